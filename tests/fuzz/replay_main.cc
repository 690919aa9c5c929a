// Runs a fuzz target's LLVMFuzzerTestOneInput once per file: the seed corpus
// and the regression inputs, as a plain test in builds without libFuzzer.
// Arguments are files or folders (a missing folder is skipped); exits 0 when
// every input ran, so a crash or sanitizer report fails the test.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool runFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  int ran = 0;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      for (const auto& entry : fs::recursive_directory_iterator(arg))
        if (entry.is_regular_file()) {
          ok = runFile(entry.path()) && ok;
          ++ran;
        }
    } else if (fs::exists(arg, ec)) {
      ok = runFile(arg) && ok;
      ++ran;
    }
  }
  // An empty run means the corpus went missing: that is a failure too.
  std::printf("replayed %d inputs\n", ran);
  return ok && ran > 0 ? 0 : 1;
}
