// Flag parsing for lanes_overlap_gemm (overlap_options.h).
#include "gpu/overlap_options.h"

#include <cstdlib>

namespace lanes_overlap {

std::vector<std::string> Options::backends() const {
  std::vector<std::string> out{backend};
  if (!compare.empty()) out.push_back(compare);
  return out;
}

const char* usage() {
  return "usage: lanes_overlap_gemm [--m 8192] [--seconds 2] [--bytes 256M] [--queue 2]\n"
         "                          [--ranks 2] [--gpu 0]                 one GPU, Lanes only\n"
         "                          [--gpus N] [--backend lanes|nccl] [--compare nccl|lanes]\n"
         "                          [-J file.json]\n"
         "  --gpus N      one rank per GPU 0..N-1 and a GEMM on every one of them (0: the\n"
         "                one-GPU mode, --ranks thread ranks on GPU --gpu)\n"
         "  --backend     library that all-reduces (default lanes); NCCL needs --gpus >= 1\n"
         "  --compare     run the other library afterwards in the same process\n"
         "  --queue F     queue all-reduce work worth F solo GEMM windows (+0.7 s), so the\n"
         "                all-reduces outlast the GEMMs even when slowed F times\n"
         "exit: 0 ok, 1 error, 2 bad flags / no GPU / no NCCL, 3 all-reduces did not cover a\n"
         "GEMM window on some GPU (raise --queue)\n";
}

namespace {

// "256M", "2", "0.5": the number times its unit (K, M, G as powers of 1024).
bool parseNumber(const char* v, double* out) {
  char* end = nullptr;
  double d = std::strtod(v, &end);
  if (end == v) return false;
  double unit = 1;
  if (*end == 'K' || *end == 'k')
    unit = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm')
    unit = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    unit = 1024.0 * 1024 * 1024, ++end;
  if (*end != '\0' || d < 0) return false;
  *out = d * unit;
  return true;
}

bool isBackend(const std::string& b) { return b == "lanes" || b == "nccl"; }

}  // namespace

std::string parseOptions(int argc, char** argv, Options* o) {
  bool ranksSet = false, gpuSet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") return "help";
    if (i + 1 >= argc) return f + " needs a value (or is not a flag)";
    const std::string v = argv[++i];
    if (f == "--backend" || f == "--compare") {
      if (!isBackend(v)) return f + " " + v + ": the backends are lanes and nccl";
      (f == "--backend" ? o->backend : o->compare) = v;
      continue;
    }
    if (f == "-J" || f == "--json") {
      o->json = v;
      continue;
    }
    double d = 0;
    if (!parseNumber(v.c_str(), &d)) return f + " " + v + ": not a number";
    if (f == "--m" && d >= 256 && d <= 65536) {
      o->m = static_cast<int>(d);
    } else if (f == "--seconds" && d > 0 && d <= 60) {
      o->seconds = d;
    } else if (f == "--ranks" && d >= 1 && d <= 8) {
      o->ranks = static_cast<int>(d), ranksSet = true;
    } else if (f == "--gpu" && d < 64) {
      o->gpu = static_cast<int>(d), gpuSet = true;
    } else if (f == "--gpus" && d <= 64) {
      o->gpus = static_cast<int>(d);
    } else if (f == "--bytes" && d >= 1024) {
      o->bytes = static_cast<size_t>(d) / 16 * 16;
    } else if (f == "--queue" && d >= 1 && d <= 20) {
      o->queue = d;
    } else {
      return f + " " + v + ": unknown flag or value out of range";
    }
  }
  if (o->compare == o->backend) return "--compare " + o->compare + " is the --backend already";
  if (o->gpus > 0 && (ranksSet || gpuSet))
    return "--gpus N puts one rank on each of GPUs 0..N-1; --ranks and --gpu are for the "
           "one-GPU mode (--gpus 0)";
  if (o->gpus == 0)
    for (const std::string& b : o->backends())
      if (b == "nccl")
        return "NCCL needs one rank per GPU (it refuses two ranks on one GPU: 'Duplicate GPU "
               "detected'): add --gpus N, e.g. --gpus 2";
  return {};
}

}  // namespace lanes_overlap
