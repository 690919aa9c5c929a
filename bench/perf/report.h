// nccl-tests' text layout: header lines, one row per size, footer. Rows are
// parsed by existing nccl-tests tooling, so widths match theirs exactly.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lanes::perf {

// nccl-tests' getFloatStr: fits `value` in `width` columns, dropping decimals
// as it grows, exponent form when even that does not fit.
inline std::string fitFloat(double value, int width) {
  int power = 0;
  for (uint64_t v = 1; value >= static_cast<double>(v) && power < 20; v *= 10) power++;
  char buf[64];
  if (power < width - 2) {
    std::snprintf(buf, sizeof(buf), "%*.2f", width, value);
  } else if (power < width - 1) {
    std::snprintf(buf, sizeof(buf), "%*.1f", width, value);
  } else if (power < width + 1) {
    std::snprintf(buf, sizeof(buf), "%*.0f", width, value);
  } else {
    std::snprintf(buf, sizeof(buf), "%*.1e", width, value);
  }
  return buf;
}

inline std::string columnHeader() {
  char a[256], b[256], c[256];
  std::snprintf(a, sizeof(a),
                "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
                "          ",
                "", "", "", "", "");
  std::snprintf(b, sizeof(b), "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s",
                "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                "time", "algbw", "busbw", "#wrong");
  std::snprintf(c, sizeof(c), "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s",
                "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "");
  return std::string(a) + "\n" + b + "\n" + c + "\n";
}

inline std::string rowParams(uint64_t bytes, uint64_t count, const char* type, const char* op,
                             int root) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%12llu  %12llu  %8s  %6s  %6i",
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(count),
                type, op, root);
  return buf;
}

// wrong < 0: no data check ("N/A").
inline std::string rowResult(double timeUs, double algBw, double busBw, int64_t wrong) {
  char buf[128];
  if (wrong < 0) {
    std::snprintf(buf, sizeof(buf), "  %7s  %6s  %6s    N/A", fitFloat(timeUs, 7).c_str(),
                  fitFloat(algBw, 6).c_str(), fitFloat(busBw, 6).c_str());
  } else {
    std::snprintf(buf, sizeof(buf), "  %7s  %6s  %6s  %5lld", fitFloat(timeUs, 7).c_str(),
                  fitFloat(algBw, 6).c_str(), fitFloat(busBw, 6).c_str(),
                  static_cast<long long>(wrong));
  }
  return buf;
}

// A form the collective does not have (in-place all-to-all, send/recv).
inline std::string rowSkipped() {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  return buf;
}

}  // namespace lanes::perf
