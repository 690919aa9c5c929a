// The files a tool argument names, for lanes-flight and lanes-trace: a
// file, a folder's *.json files, or PREFIX.*.json for a prefix as in
// LANES_FLIGHT_RECORDER_FILE and LANES_TRACE_FILE.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace lanes {

std::vector<std::filesystem::path> dumpFilesAt(const std::string& arg);
// The whole file; false where it cannot be read.
bool readWholeFile(const std::filesystem::path& path, std::string* out);

}  // namespace lanes
