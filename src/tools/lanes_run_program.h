// Finds the program lanes-run starts, once, before any rank is forked, so a
// program that cannot start is reported once and not once per rank.
#pragma once

#include <string>

#include "base/status.h"

namespace lanes::run {

// The path to exec for `name`, as a shell finds it: a name with a slash is
// taken as is, a bare name is looked up on `pathVar` (PATH). A bare name that
// is on no PATH entry but is an executable file in the current directory runs
// as ./name, as mpirun does: `lanes-run -n 2 app` is what newcomers type.
// Errors say what is wrong (missing, a directory, not executable) and what
// to write instead; *exitCode is then the shell's code for it: 127 for a
// program not found, 126 for one found that cannot run.
Status resolveProgram(const std::string& name, const char* pathVar, std::string* path,
                      int* exitCode);

}  // namespace lanes::run
