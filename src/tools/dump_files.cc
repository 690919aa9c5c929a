#include "tools/dump_files.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace lanes {

std::vector<std::filesystem::path> dumpFilesAt(const std::string& arg) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(arg, ec)) return {arg};
  std::vector<fs::path> out;
  fs::path folder = arg;
  std::string prefix;
  if (!fs::is_directory(arg, ec)) {
    folder = fs::path(arg).parent_path();
    if (folder.empty()) folder = ".";
    prefix = fs::path(arg).filename().string() + ".";
  }
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.size() > 5 && name.ends_with(".json") &&
        name.starts_with(prefix))
      out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool readWholeFile(const std::filesystem::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

}  // namespace lanes
