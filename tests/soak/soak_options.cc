#include "tests/soak/soak_options.h"

#include <cstdlib>
#include <string>

#include "base/env.h"

namespace lanes::soak {

const char* soakUsage() {
  return "usage: lanes_soak [--seconds S] [--ranks N] [--seed X] [--max-bytes SIZE] [--verbose]\n"
         "  Random collectives (operation, size, datatype, reduction, root, in place or not)\n"
         "  over the world and split communicators on host memory, each checked against a\n"
         "  reference computed here. Launch with `lanes-run -n N lanes_soak ...`, or give\n"
         "  --ranks N to fork N ranks without a launcher.\n";
}

std::string parseSoakOptions(int argc, char** argv, SoakOptions* out) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--verbose") {
      out->verbose = true;
    } else if (a == "--seconds") {
      char* end = nullptr;
      if (!value(&v) || (out->seconds = std::strtod(v.c_str(), &end), *end != '\0') ||
          !(out->seconds > 0))
        return "--seconds needs a positive number of seconds";
    } else if (a == "--ranks") {
      int64_t n = 0;
      if (!value(&v) || !parseInt64(v, &n) || n < 1 || n > 256)
        return "--ranks needs a rank count between 1 and 256";
      out->ranks = static_cast<int>(n);
    } else if (a == "--seed") {
      int64_t s = 0;
      if (!value(&v) || !parseInt64(v, &s) || s < 0) return "--seed needs a non-negative integer";
      out->seed = static_cast<uint64_t>(s);
    } else if (a == "--max-bytes") {
      uint64_t b = 0;
      if (!value(&v) || !parseSize(v, &b) || b < 1 || b > (uint64_t{1} << 32))
        return "--max-bytes needs a size between 1 and 4G (K, M, G suffixes)";
      out->maxBytes = static_cast<size_t>(b);
    } else if (a == "-h" || a == "--help") {
      return "help";
    } else {
      return "unknown argument '" + a + "'";
    }
  }
  return "";
}

}  // namespace lanes::soak
