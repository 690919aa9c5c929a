#include "tools/lanes_run_program.h"

#include <sys/stat.h>
#include <unistd.h>

namespace lanes::run {
namespace {

enum class Found { Missing, Directory, NotExecutable, Runnable };

Found inspect(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Found::Missing;
  if (S_ISDIR(st.st_mode)) return Found::Directory;
  if (::access(path.c_str(), X_OK) != 0) return Found::NotExecutable;
  return Found::Runnable;
}

// What is wrong with `shown` (a path that exists), and the fix.
std::string whyNot(Found f, const std::string& shown) {
  if (f == Found::Directory) return shown + " is a directory";
  return shown + " is not executable (chmod +x " + shown + ")";
}

}  // namespace

Status resolveProgram(const std::string& name, const char* pathVar, std::string* path,
                      int* exitCode) {
  *exitCode = 127;
  const std::string head = "cannot start " + name + ": ";
  if (name.empty()) return invalidArgument("the PROGRAM to start is an empty string.");
  if (name.find('/') != std::string::npos) {
    Found f = inspect(name);
    if (f == Found::Runnable) {
      *path = name;
      return Status::ok();
    }
    if (f == Found::Missing) return invalidArgument(head + "no such file.");
    *exitCode = 126;
    return invalidArgument(head + whyNot(f, name) + ".");
  }
  // execvp's rules: PATH in order, an empty entry is the current directory,
  // a default when PATH is unset; entries that are not runnable are skipped.
  const std::string dirs = pathVar != nullptr ? pathVar : "/usr/local/bin:/usr/bin:/bin";
  std::string notRunnable;  // the first PATH hit that exists but cannot run
  Found notRunnableWhy = Found::Missing;
  for (size_t at = 0; at <= dirs.size();) {
    size_t colon = dirs.find(':', at);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(at, colon - at);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    Found f = inspect(candidate);
    if (f == Found::Runnable) {
      *path = candidate;
      return Status::ok();
    }
    if (f != Found::Missing && notRunnable.empty()) {
      notRunnable = candidate;
      notRunnableWhy = f;
    }
    at = colon + 1;
  }
  // Not on PATH: the current directory, as mpirun looks there too.
  const std::string local = "./" + name;
  Found f = inspect(local);
  if (f == Found::Runnable) {
    *path = local;
    return Status::ok();
  }
  if (f != Found::Missing) {
    *exitCode = 126;
    return invalidArgument(head + "it is not on PATH, and " + whyNot(f, local) + ".");
  }
  if (!notRunnable.empty()) {
    *exitCode = 126;
    return invalidArgument(head + "the only match on PATH, " + whyNot(notRunnableWhy, notRunnable) +
                           ".");
  }
  return invalidArgument(head +
                         "not found on PATH nor in the current directory; give its path "
                         "(./" +
                         name + " for a program in the current directory).");
}

}  // namespace lanes::run
