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

// Extra columns after nccl-tests' own, present only when asked for so the
// plain table keeps nccl-tests' layout: the bound on busbw from the rates
// measured in this run (--bounds) and the fraction of it the out-of-place
// busbw reached; in --compare runs the backend and, on NCCL rows, the ratio
// lanes busbw / nccl busbw (out-of-place, then in-place).
inline std::string boundHeader(int line) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "  %6s  %6s", line == 0 ? "bound" : "(GB/s)",
                line == 0 ? "%bound" : "");
  return buf;
}
inline std::string boundColumns(double boundBusBw, double busBw) {
  char buf[64];
  if (boundBusBw <= 0) {
    std::snprintf(buf, sizeof(buf), "  %6s  %6s", "N/A", "N/A");
  } else {
    std::snprintf(buf, sizeof(buf), "  %6s  %5.1f%%", fitFloat(boundBusBw, 6).c_str(),
                  100.0 * busBw / boundBusBw);
  }
  return buf;
}
inline std::string compareHeader(int line) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "  %7s  %6s  %6s", line == 0 ? "backend" : "",
                line == 0 ? "ratio" : "(oop)", line == 0 ? "ratio" : "(ip)");
  return buf;
}
// ratio <= 0: not applicable (the Lanes row, or a failed NCCL size).
inline std::string compareColumns(const char* backend, double ratioOop, double ratioIp) {
  char buf[64], a[16] = "-", b[16] = "-";
  if (ratioOop > 0) std::snprintf(a, sizeof(a), "%.2f", ratioOop);
  if (ratioIp > 0) std::snprintf(b, sizeof(b), "%.2f", ratioIp);
  std::snprintf(buf, sizeof(buf), "  %7s  %6s  %6s", backend, a, b);
  return buf;
}

// A form the collective does not have (in-place all-to-all, send/recv).
inline std::string rowSkipped() {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  return buf;
}

}  // namespace lanes::perf
