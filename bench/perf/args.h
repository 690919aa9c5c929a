// Command line of the perf tools: nccl-tests' flags and meanings, plus
// --memory host|device. Header-only so unit tests can check it without
// running a collective.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "lanes/lanes.h"

namespace lanes::perf {

// Auto: device memory when the build has CUDA and a GPU is visible, else host.
enum class Memory { Auto, Host, Device };
// Which library runs the timed collective (the control traffic is always Lanes).
enum class Backend { Lanes, Nccl };

struct PerfArgs {
  int nThreads = 1;
  int nGpus = 1;
  uint64_t minBytes = 32ull << 20;
  uint64_t maxBytes = 32ull << 20;
  uint64_t stepBytes = 1ull << 20;
  uint64_t stepFactor = 1;
  int iters = 20;
  int warmupIters = 5;
  int aggIters = 1;
  int check = 1;      // check iterations; 0 turns the data check off
  int runCycles = 1;  // -N: whole sweeps; 0 repeats until killed
  int blocking = 0;
  int average = 1;  // 0 rank 0, 1 mean, 2 min, 3 max
  int root = 0;
  std::vector<lanesDataType_t> types{lanesFloat32};
  std::vector<lanesRedOp_t> ops{lanesSum};
  Memory memory = Memory::Auto;
  int graphLaunches = 0;  // -G: launches of a captured CUDA Graph (0: no graph)
  int bounds = -1;        // --bounds: -1 on with device memory, 0 off, 1 on
  std::string jsonPath;
  bool help = false;
  // nccl-tests flags with a meaning here (see perfUsage for what each does).
  int streamNull = 0;      // -y: device collectives on the legacy default stream
  int timeoutSeconds = 0;  // -T: LANES_TIMEOUT for this run (0: leave it)
  int reportCpuTime = 0;   // -C: time column = enqueue time, as nccl-tests
  // nccl-tests flags parsed for compatibility; the header says what each does here.
  int parallelInit = 0;      // -p
  int reportTimestamps = 0;  // -S
  int localRegister = 0;     // -R
  int ctaPolicy = -1;        // -x
  int deviceImpl = 0;        // -D
  int deviceCtaCount = 16;   // -V
  int memoryReport = 0;      // -M
  // Side by side with NCCL: which library runs the sweep, or both (--compare).
  Backend backend = Backend::Lanes;
  bool compare = false;
  std::vector<std::string> ignoredFlags;  // "-p 1" etc., for the header note
};

struct ParseResult {
  bool ok = true;
  std::string error;  // a sentence naming the flag and what it accepts
};

// nccl-tests' type names first; Lanes' own names and short forms also work.
struct NamedType {
  const char* name;  // as printed in the type column
  lanesDataType_t type;
};
inline const std::vector<NamedType>& perfTypes() {
  static const std::vector<NamedType> kTypes = {
      {"int8", lanesInt8},         {"uint8", lanesUint8},       {"int32", lanesInt32},
      {"uint32", lanesUint32},     {"int64", lanesInt64},       {"uint64", lanesUint64},
      {"half", lanesFloat16},      {"float", lanesFloat32},     {"double", lanesFloat64},
      {"bfloat16", lanesBfloat16}, {"f8e4m3", lanesFloat8e4m3}, {"f8e5m2", lanesFloat8e5m2}};
  return kTypes;
}

inline const char* perfTypeName(lanesDataType_t t) {
  for (const auto& nt : perfTypes()) {
    if (nt.type == t) return nt.name;
  }
  return "unknown";
}

inline bool parsePerfType(const std::string& s, lanesDataType_t* out) {
  static const std::vector<NamedType> kAliases = {{"char", lanesInt8},
                                                  {"int", lanesInt32},
                                                  {"float16", lanesFloat16},
                                                  {"fp16", lanesFloat16},
                                                  {"float32", lanesFloat32},
                                                  {"fp32", lanesFloat32},
                                                  {"float64", lanesFloat64},
                                                  {"fp64", lanesFloat64},
                                                  {"bf16", lanesBfloat16},
                                                  {"float8e4m3", lanesFloat8e4m3},
                                                  {"fp8e4m3", lanesFloat8e4m3},
                                                  {"e4m3", lanesFloat8e4m3},
                                                  {"float8e5m2", lanesFloat8e5m2},
                                                  {"fp8e5m2", lanesFloat8e5m2},
                                                  {"e5m2", lanesFloat8e5m2}};
  for (const auto* list : {&perfTypes(), &kAliases}) {
    for (const auto& nt : *list) {
      if (s == nt.name) {
        *out = nt.type;
        return true;
      }
    }
  }
  return false;
}

inline const char* perfOpName(lanesRedOp_t op) {
  switch (op) {
    case lanesSum:
      return "sum";
    case lanesProd:
      return "prod";
    case lanesMax:
      return "max";
    case lanesMin:
      return "min";
    case lanesAvg:
      return "avg";
    default:
      return "unknown";
  }
}

inline bool parsePerfOp(const std::string& s, lanesRedOp_t* out) {
  for (lanesRedOp_t op : {lanesSum, lanesProd, lanesMax, lanesMin, lanesAvg}) {
    if (s == perfOpName(op)) {
      *out = op;
      return true;
    }
  }
  return false;
}

// nccl-tests' size syntax: a number with an optional K, M or G (powers of
// 1024); fractions allowed ("1.5K"). Returns false for anything else.
inline bool parsePerfSize(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] == '-') return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || !std::isfinite(v) || v < 0) return false;
  double unit = 1;
  if (*end != '\0') {
    switch (*end) {
      case 'k':
      case 'K':
        unit = 1024.0;
        break;
      case 'm':
      case 'M':
        unit = 1024.0 * 1024;
        break;
      case 'g':
      case 'G':
        unit = 1024.0 * 1024 * 1024;
        break;
      default:
        return false;
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;
    if (*end != '\0') return false;
  }
  double bytes = v * unit;
  if (bytes >= 18446744073709551615.0) return false;
  *out = static_cast<uint64_t>(bytes);
  return true;
}

inline bool parsePerfInt(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 0);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

inline const char* perfUsage() {
  return "  -t,--nthreads N        ranks as threads of this process (without a launcher)\n"
         "  -g,--ngpus N           GPUs (ranks) per thread; rank r uses GPU r % (visible\n"
         "                         GPUs), so -g 2 on one GPU puts two ranks on GPU 0\n"
         "  -b,--minbytes SIZE     smallest size (K/M/G suffixes), default 32M\n"
         "  -e,--maxbytes SIZE     largest size, default 32M\n"
         "  -i,--stepbytes SIZE    additive step when -f is 1, default 1M\n"
         "  -f,--stepfactor N      multiplicative step, default 1 (use -i)\n"
         "  -n,--iters N           timed iterations per size, default 20\n"
         "  -w,--warmup_iters N    warm-up iterations, default 5\n"
         "  -m,--agg_iters N       operations per timed iteration, default 1\n"
         "  -N,--run_cycles N      repeat the whole sweep N times (0: until killed), default 1\n"
         "  -c,--check N           data check iterations (0: off), default 1\n"
         "  -o,--op OP             sum|prod|max|min|avg|all, default sum\n"
         "  -d,--datatype TYPE     int8|uint8|int32|uint32|int64|uint64|half|float|double|\n"
         "                         bfloat16|f8e4m3|f8e5m2|all, default float\n"
         "  -r,--root N            root rank of rooted collectives, default 0\n"
         "  -z,--blocking 0|1      1: wait for each collective before the next (host-memory\n"
         "                         collectives always block)\n"
         "  -a,--average 0-3       time reported: 0 rank 0, 1 mean, 2 min, 3 max; default 1\n"
         "  -J,--output_file FILE  also write the results as JSON (version 2; --output_json\n"
         "                         is accepted too)\n"
         "  -y,--stream_null 0|1   1: device collectives on the legacy default stream\n"
         "  -T,--timeout SECONDS   give up a call after SECONDS: sets LANES_TIMEOUT for Lanes\n"
         "                         (NCCL has no such bound; 0 leaves the environment)\n"
         "  -C,--report_cputime 0|1  1: time column is the CPU time to enqueue the loop, as\n"
         "                         nccl-tests (bandwidths still use the completed time)\n"
         "  -p,--parallel_init, -S,--report_timestamps, -R,--local_register,\n"
         "  -x,--cta_policy, -D,--device_implementation, -V,--device_cta_count,\n"
         "  -M,--memory_report     nccl-tests flags parsed for compatibility; they have no\n"
         "                         effect here and the header says so when set\n"
         "  --backend lanes|nccl   library that runs the sweep (nccl: libnccl.so.2 opened at\n"
         "                         run time, device memory only); default lanes\n"
         "  --compare nccl         run Lanes and NCCL size by size; each size prints a lanes\n"
         "                         row, then an nccl row with the busbw ratio lanes/nccl\n"
         "  -G,--cudagraph N       capture the timed loop in a CUDA Graph, launch it N times\n"
         "                         (device memory; Lanes refuses capture on most paths: the\n"
         "                         tool then says why and times without graphs)\n"
         "  --memory host|device   where buffers live; default device when this build has\n"
         "                         CUDA and a GPU is visible, else host\n"
         "  --bounds [0|1]         measure each GPU's copy bandwidth (H2D, D2H, both ways,\n"
         "                         device copy), or with host memory each host's memcpy\n"
         "                         bandwidth, and print per size the bound on busbw and\n"
         "                         the fraction reached; default on with device memory\n"
         "  -h,--help              this text\n";
}

// Parses argv[1..]. Unknown flags and bad values are errors.
inline ParseResult parsePerfArgs(const std::vector<std::string>& argv, PerfArgs* out) {
  PerfArgs a;
  auto fail = [](std::string m) { return ParseResult{false, std::move(m)}; };
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string flag = argv[i];
    std::string value;
    bool inlineValue = false;
    if (flag.rfind("--", 0) == 0) {
      size_t eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        inlineValue = true;
      }
    } else if (flag.size() > 2 && flag[0] == '-' && flag[1] != '-') {
      value = flag.substr(2);  // "-b8" as getopt allows
      flag = flag.substr(0, 2);
      inlineValue = true;
    }
    if (flag == "-h" || flag == "--help") {
      a.help = true;
      continue;
    }
    if (flag == "--bounds" && !inlineValue) {  // a bare switch; --bounds=0 turns it off
      a.bounds = 1;
      continue;
    }
    if (!inlineValue) {
      if (i + 1 >= argv.size()) return fail(flag + " needs a value; see --help.");
      value = argv[++i];
    }
    int64_t n = 0;
    auto intFlag = [&](int64_t lo, int64_t hi, int* dst) -> bool {
      if (!parsePerfInt(value, lo, hi, &n)) return false;
      *dst = static_cast<int>(n);
      return true;
    };
    auto bad = [&](const char* what) {
      return fail("invalid value '" + value + "' for " + flag + ": expected " + what + ".");
    };
    if (flag == "-t" || flag == "--nthreads") {
      if (!intFlag(1, 1024, &a.nThreads)) return bad("a thread count from 1 to 1024");
    } else if (flag == "-g" || flag == "--ngpus") {
      if (!intFlag(1, 1024, &a.nGpus)) return bad("a count from 1 to 1024");
    } else if (flag == "-b" || flag == "--minbytes") {
      if (!parsePerfSize(value, &a.minBytes)) return bad("a size such as 8, 64K, 1M or 2G");
    } else if (flag == "-e" || flag == "--maxbytes") {
      if (!parsePerfSize(value, &a.maxBytes)) return bad("a size such as 8, 64K, 1M or 2G");
    } else if (flag == "-i" || flag == "--stepbytes") {
      if (!parsePerfSize(value, &a.stepBytes) || a.stepBytes == 0) return bad("a non-zero size");
    } else if (flag == "-f" || flag == "--stepfactor") {
      if (!parsePerfInt(value, 1, 1 << 20, &n)) return bad("an integer factor of 1 or more");
      a.stepFactor = static_cast<uint64_t>(n);
    } else if (flag == "-n" || flag == "--iters") {
      if (!intFlag(1, 1 << 30, &a.iters)) return bad("a positive iteration count");
    } else if (flag == "-w" || flag == "--warmup_iters") {
      if (!intFlag(0, 1 << 30, &a.warmupIters)) return bad("a non-negative iteration count");
    } else if (flag == "-m" || flag == "--agg_iters") {
      if (!intFlag(1, 1 << 20, &a.aggIters)) return bad("a positive count");
    } else if (flag == "-N" || flag == "--run_cycles") {
      if (!intFlag(0, 1 << 30, &a.runCycles)) return bad("a non-negative count");
    } else if (flag == "-c" || flag == "--check") {
      if (!intFlag(0, 1 << 20, &a.check)) return bad("0 (off) or a check iteration count");
    } else if (flag == "-z" || flag == "--blocking") {
      if (!intFlag(0, 1, &a.blocking)) return bad("0 or 1");
    } else if (flag == "-a" || flag == "--average") {
      if (!intFlag(0, 3, &a.average)) return bad("0 (rank 0), 1 (mean), 2 (min) or 3 (max)");
    } else if (flag == "-r" || flag == "--root") {
      if (!intFlag(0, 1 << 30, &a.root)) return bad("a rank number");
    } else if (flag == "-o" || flag == "--op") {
      if (value == "all") {
        a.ops = {lanesSum, lanesProd, lanesMax, lanesMin, lanesAvg};
      } else {
        lanesRedOp_t op;
        if (!parsePerfOp(value, &op)) return bad("sum, prod, max, min, avg or all");
        a.ops = {op};
      }
    } else if (flag == "-d" || flag == "--datatype") {
      if (value == "all") {
        a.types.clear();
        for (const auto& nt : perfTypes()) a.types.push_back(nt.type);
      } else {
        lanesDataType_t t;
        if (!parsePerfType(value, &t)) {
          return bad(
              "int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, "
              "f8e4m3, f8e5m2 or all");
        }
        a.types = {t};
      }
    } else if (flag == "--memory") {
      if (value == "host") {
        a.memory = Memory::Host;
      } else if (value == "device") {
        a.memory = Memory::Device;
      } else {
        return bad("host or device");
      }
    } else if (flag == "-G" || flag == "--cudagraph") {
      if (!intFlag(0, 1 << 20, &a.graphLaunches)) return bad("a non-negative launch count");
    } else if (flag == "--bounds") {
      if (!intFlag(0, 1, &a.bounds)) return bad("0 or 1");
    } else if (flag == "-J" || flag == "--output_json" || flag == "--output_file") {
      a.jsonPath = value;
    } else if (flag == "-y" || flag == "--stream_null") {
      if (!intFlag(0, 1, &a.streamNull)) return bad("0 or 1");
    } else if (flag == "-T" || flag == "--timeout") {
      if (!intFlag(0, 1 << 24, &a.timeoutSeconds)) return bad("a number of seconds (0: none)");
    } else if (flag == "-C" || flag == "--report_cputime") {
      if (!intFlag(0, 1, &a.reportCpuTime)) return bad("0 or 1");
    } else if (flag == "-p" || flag == "--parallel_init") {
      if (!intFlag(0, 1, &a.parallelInit)) return bad("0 or 1");
      if (a.parallelInit) a.ignoredFlags.push_back("-p " + value);
    } else if (flag == "-S" || flag == "--report_timestamps") {
      if (!intFlag(0, 1, &a.reportTimestamps)) return bad("0 or 1");
      if (a.reportTimestamps) a.ignoredFlags.push_back("-S " + value);
    } else if (flag == "-R" || flag == "--local_register") {
      if (!intFlag(0, 2, &a.localRegister)) return bad("0, 1 (local) or 2 (symmetric)");
      if (a.localRegister) a.ignoredFlags.push_back("-R " + value);
    } else if (flag == "-x" || flag == "--cta_policy") {
      if (!intFlag(0, 2, &a.ctaPolicy)) return bad("0, 1 or 2");
      a.ignoredFlags.push_back("-x " + value);
    } else if (flag == "-D" || flag == "--device_implementation") {
      if (!intFlag(0, 1 << 20, &a.deviceImpl)) return bad("an implementation number");
      if (a.deviceImpl) a.ignoredFlags.push_back("-D " + value);
    } else if (flag == "-V" || flag == "--device_cta_count") {
      if (!intFlag(1, 128, &a.deviceCtaCount)) return bad("a CTA count from 1 to 128");
      a.ignoredFlags.push_back("-V " + value);
    } else if (flag == "-M" || flag == "--memory_report") {
      if (!intFlag(0, 1, &a.memoryReport)) return bad("0 or 1");
      if (a.memoryReport) a.ignoredFlags.push_back("-M " + value);
    } else if (flag == "--backend") {
      if (value == "lanes") {
        a.backend = Backend::Lanes;
      } else if (value == "nccl") {
        a.backend = Backend::Nccl;
      } else {
        return bad("lanes or nccl");
      }
    } else if (flag == "--compare") {
      if (value != "nccl") return bad("nccl (the only library Lanes compares against)");
      a.compare = true;
    } else {
      return fail("unknown option " + flag + "; see --help.");
    }
  }
  if (a.compare && a.backend == Backend::Nccl) {
    return fail("--compare nccl already runs NCCL beside Lanes; drop --backend nccl.");
  }
  if ((a.backend == Backend::Nccl || a.compare) && a.memory == Memory::Host) {
    return fail(std::string(a.compare ? "--compare nccl" : "--backend nccl") +
                " needs --memory device: NCCL takes device buffers only.");
  }
  if (a.minBytes > a.maxBytes) {
    return fail("invalid sizes: minbytes " + std::to_string(a.minBytes) + " > maxbytes " +
                std::to_string(a.maxBytes) + ".");
  }
  *out = std::move(a);
  return {};
}

// The memory a run uses: what was asked for, or for Auto, device memory when
// the build has the CUDA data path and the process sees a GPU.
inline Memory resolveMemory(Memory requested, bool cudaBuilt, int visibleGpus) {
  if (requested != Memory::Auto) return requested;
  return cudaBuilt && visibleGpus > 0 ? Memory::Device : Memory::Host;
}

// The GPU of rank r of a process that runs several: round-robin, so more ranks
// than GPUs share them (Lanes allows several ranks per GPU; NCCL does not).
// Under a launcher r is the local rank. -1 without GPUs.
inline int gpuForRank(int r, int gpus) { return gpus > 0 ? r % gpus : -1; }

// The sizes a sweep visits, as nccl-tests steps them.
inline std::vector<uint64_t> sweepSizes(const PerfArgs& a) {
  std::vector<uint64_t> sizes;
  for (uint64_t s = a.minBytes; s <= a.maxBytes;) {
    sizes.push_back(s);
    uint64_t next = a.stepFactor > 1 ? s * a.stepFactor : s + a.stepBytes;
    if (next <= s) break;  // 0 * factor, or overflow
    s = next;
  }
  return sizes;
}

}  // namespace lanes::perf
