// Printing and JSON for lanes_overlap_gemm (overlap_report.h).
#include "gpu/overlap_report.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace lanes_overlap {

double Run::minFraction() const {
  double m = rows.empty() ? 0 : rows.front().fraction();
  for (const GpuRow& r : rows) m = std::min(m, r.fraction());
  return m;
}

bool Run::allCovered() const {
  return std::all_of(rows.begin(), rows.end(), [](const GpuRow& r) { return r.covered; });
}

void printRun(const Run& run, const Options& o) {
  const char* b = run.backend.c_str();
  // Ring all-reduce bus factor, as nccl-tests: 2(n-1)/n of the bytes cross each link.
  const double busFactor = 2.0 * (run.ranks - 1) / run.ranks;
  auto busbw = [&](double s) { return s > 0 ? o.bytes / s / 1e9 * busFactor : 0.0; };
  std::printf("## %s, %d rank%s\n", b, run.ranks, run.ranks == 1 ? "" : "s");
  std::printf("all-reduce alone (%s):     %8.2f ms per call (busbw %.2f GB/s)\n", b,
              run.arSoloSeconds * 1e3, busbw(run.arSoloSeconds));
  std::printf("all-reduce with GEMM (%s): %8.2f ms per call (busbw %.2f GB/s, %d calls queued)\n",
              b, run.arConcurrentSeconds * 1e3, busbw(run.arConcurrentSeconds), run.arCalls);
  std::printf("%-7s %4s %13s %19s %9s %8s %8s\n", "backend", "gpu", "solo TFLOP/s",
              "concurrent TFLOP/s", "fraction", "covered", "GEMMs");
  for (const GpuRow& r : run.rows)
    std::printf("%-7s %4d %13.1f %19.1f %9.3f %8s %8d\n", b, r.gpu, r.solo, r.concurrent,
                r.fraction(), r.covered ? "yes" : "NO", r.gemms);
  const double f = run.minFraction();
  // The target is Lanes'; NCCL's fraction is the reference it is read against.
  std::printf("fraction of solo (%s, min over %zu GPU%s): %.3f%s\n", b, run.rows.size(),
              run.rows.size() == 1 ? "" : "s", f,
              run.backend != "lanes" ? ""
              : f >= 0.9             ? " (target >= 0.90: met)"
                                     : " (target >= 0.90: NOT met)");
  std::printf("all-reduces covered the whole GEMM window on every GPU (%s): %s\n", b,
              run.allCovered() ? "yes" : "NO (raise --queue; the fraction overstates)");
}

void printComparison(const std::vector<Run>& runs) {
  std::printf("## fraction of solo GEMM throughput while all-reducing, side by side\n");
  std::printf("%4s", "gpu");
  for (const Run& r : runs) std::printf(" %9s", r.backend.c_str());
  std::printf("\n");
  for (size_t g = 0; g < runs.front().rows.size(); ++g) {
    std::printf("%4d", runs.front().rows[g].gpu);
    for (const Run& r : runs)
      std::printf(" %8.3f%s", r.rows[g].fraction(), r.rows[g].covered ? " " : "!");
    std::printf("\n");
  }
  std::printf("%4s", "min");
  for (const Run& r : runs) std::printf(" %8.3f%s", r.minFraction(), r.allCovered() ? " " : "!");
  std::printf("\n");
  if (std::any_of(runs.begin(), runs.end(), [](const Run& r) { return !r.allCovered(); }))
    std::printf("(! = not covered: that fraction overstates)\n");
}

namespace {
struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
}  // namespace

std::string writeJson(const std::string& path, const std::vector<Run>& runs, const Options& o) {
  std::unique_ptr<std::FILE, FileClose> f(std::fopen(path.c_str(), "w"));
  if (!f) return "cannot write " + path + ": " + std::strerror(errno);
  std::FILE* out = f.get();
  std::fprintf(out,
               "{\"tool\": \"lanes_overlap_gemm\", \"m\": %d, \"bytes\": %zu, \"gpus\": %d, "
               "\"seconds\": %g,\n \"rows\": [",
               o.m, o.bytes, o.gpus, o.seconds);
  const char* sep = "";
  for (const Run& r : runs) {
    for (const GpuRow& row : r.rows) {
      std::fprintf(out,
                   "%s\n  {\"backend\": \"%s\", \"gpu\": %d, \"ranks\": %d, \"solo_tflops\": %.3f, "
                   "\"concurrent_tflops\": %.3f, \"fraction\": %.4f, \"covered\": %s, "
                   "\"allreduce_ms_alone\": %.4f, \"allreduce_ms_with_gemm\": %.4f}",
                   sep, r.backend.c_str(), row.gpu, r.ranks, row.solo, row.concurrent,
                   row.fraction(), row.covered ? "true" : "false", r.arSoloSeconds * 1e3,
                   r.arConcurrentSeconds * 1e3);
      sep = ",";
    }
  }
  std::fprintf(out, "\n]}\n");
  if (std::fflush(out) != 0 || std::ferror(out)) return "cannot write " + path;
  return {};
}

}  // namespace lanes_overlap
