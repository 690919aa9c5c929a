// The perf tools' pure parts: flag parsing, bandwidth factors, the nccl-tests
// row layout, and the data-check values (exact whatever the reduction order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "bench/perf/args.h"
#include "bench/perf/bound_model.h"
#include "bench/perf/coll_data.h"
#include "bench/perf/element.h"
#include "bench/perf/pattern.h"
#include "bench/perf/report.h"
#include "bench/perf/run_env.h"
#include "bench/perf/staged_bound.h"

namespace lanes::perf {
namespace {

ParseResult parse(std::vector<std::string> argv, PerfArgs* out) { return parsePerfArgs(argv, out); }

TEST(PerfArgs, DefaultsMatchNcclTests) {
  PerfArgs a;
  ASSERT_TRUE(parse({}, &a).ok);
  EXPECT_EQ(a.minBytes, 32u << 20);
  EXPECT_EQ(a.maxBytes, 32u << 20);
  EXPECT_EQ(a.iters, 20);
  EXPECT_EQ(a.warmupIters, 5);
  EXPECT_EQ(a.check, 1);
  EXPECT_EQ(a.average, 1);
  ASSERT_EQ(a.types.size(), 1u);
  EXPECT_EQ(a.types[0], lanesFloat32);
  ASSERT_EQ(a.ops.size(), 1u);
  EXPECT_EQ(a.ops[0], lanesSum);
  EXPECT_EQ(a.memory, Memory::Auto);
  EXPECT_EQ(a.graphLaunches, 0);
  EXPECT_EQ(a.bounds, -1);
}

TEST(PerfArgs, MemoryDefaultsToDeviceOnlyWithCudaAndAGpu) {
  EXPECT_EQ(resolveMemory(Memory::Auto, true, 1), Memory::Device);
  EXPECT_EQ(resolveMemory(Memory::Auto, true, 0), Memory::Host);
  EXPECT_EQ(resolveMemory(Memory::Auto, false, 4), Memory::Host);
  // What the user asked for stands, even where it cannot run (the tool says why).
  EXPECT_EQ(resolveMemory(Memory::Host, true, 8), Memory::Host);
  EXPECT_EQ(resolveMemory(Memory::Device, false, 0), Memory::Device);
  PerfArgs a;
  ASSERT_TRUE(parse({"--memory", "device"}, &a).ok);
  EXPECT_EQ(a.memory, Memory::Device);
  ASSERT_TRUE(parse({"--memory=host"}, &a).ok);
  EXPECT_EQ(a.memory, Memory::Host);
}

TEST(PerfArgs, RanksShareGpusRoundRobin) {
  // -g 2 on one GPU: both ranks on GPU 0.
  EXPECT_EQ(gpuForRank(0, 1), 0);
  EXPECT_EQ(gpuForRank(1, 1), 0);
  // 8 ranks on 2 GPUs: 0,1,0,1,...
  EXPECT_EQ(gpuForRank(5, 2), 1);
  EXPECT_EQ(gpuForRank(6, 2), 0);
  EXPECT_EQ(gpuForRank(3, 8), 3);
  EXPECT_EQ(gpuForRank(0, 0), -1);
}

TEST(PerfArgs, GraphAndBoundsFlags) {
  PerfArgs a;
  ASSERT_TRUE(parse({"-G", "10", "--bounds"}, &a).ok);
  EXPECT_EQ(a.graphLaunches, 10);
  EXPECT_EQ(a.bounds, 1);
  // A bare --bounds must not swallow the next flag.
  ASSERT_TRUE(parse({"--bounds", "-b", "8"}, &a).ok);
  EXPECT_EQ(a.bounds, 1);
  EXPECT_EQ(a.minBytes, 8u);
  ASSERT_TRUE(parse({"--bounds=0", "--cudagraph=3"}, &a).ok);
  EXPECT_EQ(a.bounds, 0);
  EXPECT_EQ(a.graphLaunches, 3);
  EXPECT_FALSE(parse({"--bounds=2"}, &a).ok);
  ParseResult r = parse({"-G", "-1"}, &a);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("-G"), std::string::npos) << r.error;
}

TEST(PerfBounds, StagedAllReduceBytesFollowTheAlgorithm) {
  const double S = 256.0 * (1 << 20);
  // One rank per GPU, 4 ranks: down 3/4 S of input + S/4 of result, up 2*3/4*S.
  LinkBytes one = stagedAllReduceBytes(S, 4, 1);
  EXPECT_DOUBLE_EQ(one.down, S);
  EXPECT_DOUBLE_EQ(one.up, 1.5 * S);
  // N ranks on one GPU: its link carries N times that: down N S, up 2 (N-1) S.
  for (int n : {2, 4, 8}) {
    LinkBytes all = stagedAllReduceBytes(S, n, n);
    EXPECT_DOUBLE_EQ(all.down, n * S) << n;
    EXPECT_DOUBLE_EQ(all.up, 2.0 * (n - 1) * S) << n;
  }
  // The slower direction decides: 4 ranks on a GPU, 50 GB/s up, 25 GB/s down.
  LinkBytes four = stagedAllReduceBytes(1e9, 4, 4);  // down 4e9, up 6e9
  EXPECT_DOUBLE_EQ(linkBoundSeconds(four, 50, 25), 4e9 / 25e9);
  LinkBytes two = stagedAllReduceBytes(1e9, 2, 2);  // down 2e9, up 2e9
  EXPECT_DOUBLE_EQ(linkBoundSeconds(two, 10, 50), 2e9 / 10e9);
}

TEST(PerfArgs, SizesTakeSuffixes) {
  uint64_t v = 0;
  EXPECT_TRUE(parsePerfSize("8", &v));
  EXPECT_EQ(v, 8u);
  EXPECT_TRUE(parsePerfSize("64K", &v));
  EXPECT_EQ(v, 64u << 10);
  EXPECT_TRUE(parsePerfSize("64M", &v));
  EXPECT_EQ(v, 64u << 20);
  EXPECT_TRUE(parsePerfSize("2G", &v));
  EXPECT_EQ(v, 2ull << 30);
  EXPECT_TRUE(parsePerfSize("1.5k", &v));
  EXPECT_EQ(v, 1536u);
  EXPECT_FALSE(parsePerfSize("", &v));
  EXPECT_FALSE(parsePerfSize("-8", &v));
  EXPECT_FALSE(parsePerfSize("8X", &v));
  EXPECT_FALSE(parsePerfSize("M", &v));
  EXPECT_FALSE(parsePerfSize("8MM", &v));
}

TEST(PerfArgs, ParsesTheCompareCommandLine) {
  PerfArgs a;
  ParseResult r = parse(
      {"--memory", "host", "-b", "8",  "-e", "64M",      "-f", "4", "-d", "float", "-o", "sum",
       "-c",       "0",    "-n", "50", "-w", "3",        "-a", "3", "-r", "1",     "-z", "1",
       "-m",       "2",    "-N", "1",  "-J", "out.json", "-t", "2", "-g", "2"},
      &a);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(a.minBytes, 8u);
  EXPECT_EQ(a.maxBytes, 64u << 20);
  EXPECT_EQ(a.stepFactor, 4u);
  EXPECT_EQ(a.check, 0);
  EXPECT_EQ(a.iters, 50);
  EXPECT_EQ(a.warmupIters, 3);
  EXPECT_EQ(a.average, 3);
  EXPECT_EQ(a.root, 1);
  EXPECT_EQ(a.aggIters, 2);
  EXPECT_EQ(a.jsonPath, "out.json");
  EXPECT_EQ(a.nThreads * a.nGpus, 4);
}

TEST(PerfArgs, AllTypesAndAllOps) {
  PerfArgs a;
  ASSERT_TRUE(parse({"-d", "all", "-o", "all"}, &a).ok);
  EXPECT_EQ(a.types.size(), 12u);
  EXPECT_EQ(a.ops.size(), 5u);
  for (int t = 0; t < lanesNumTypes; ++t) {
    EXPECT_NE(std::find(a.types.begin(), a.types.end(), static_cast<lanesDataType_t>(t)),
              a.types.end())
        << "type " << t << " missing from -d all";
  }
  ASSERT_TRUE(parse({"-d", "bf16", "-o", "avg"}, &a).ok);
  EXPECT_EQ(a.types[0], lanesBfloat16);
  EXPECT_EQ(a.ops[0], lanesAvg);
  ASSERT_TRUE(parse({"-d", "f8e5m2"}, &a).ok);
  EXPECT_EQ(a.types[0], lanesFloat8e5m2);
  EXPECT_STREQ(perfTypeName(lanesFloat16), "half");
}

TEST(PerfArgs, BadValuesAreErrorsThatNameTheFlag) {
  PerfArgs a;
  struct Case {
    std::vector<std::string> argv;
    const char* mention;
  } cases[] = {
      {{"-d", "float7"}, "-d"},
      {{"-o", "xor"}, "-o"},
      {{"-b", "lots"}, "-b"},
      {{"-n", "0"}, "-n"},
      {{"-a", "4"}, "-a"},
      {{"-c", "-1"}, "-c"},
      {{"--memory", "gpu"}, "--memory"},
      {{"-f", "0"}, "-f"},
      {{"-q", "1"}, "-q"},
      {{"-b"}, "-b"},
      {{"-b", "2M", "-e", "1M"}, "minbytes"},
  };
  for (const auto& c : cases) {
    ParseResult r = parse(c.argv, &a);
    EXPECT_FALSE(r.ok) << c.argv[0];
    EXPECT_NE(r.error.find(c.mention), std::string::npos) << r.error;
  }
}

TEST(PerfArgs, SweepStepsLikeNcclTests) {
  PerfArgs a;
  ASSERT_TRUE(parse({"-b", "8", "-e", "64M", "-f", "4"}, &a).ok);
  std::vector<uint64_t> s = sweepSizes(a);
  ASSERT_EQ(s.size(), 12u);  // 8, 32, ..., 32M (64M is not 8 times a power of 4)
  EXPECT_EQ(s.front(), 8u);
  EXPECT_EQ(s.back(), 32u << 20);
  ASSERT_TRUE(parse({"-b", "1K", "-e", "4K", "-i", "1K"}, &a).ok);
  EXPECT_EQ(sweepSizes(a), (std::vector<uint64_t>{1024, 2048, 3072, 4096}));
}

TEST(PerfBandwidth, BusFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(allReduceBusFactor(4), 1.5);
  EXPECT_DOUBLE_EQ(allReduceBusFactor(2), 1.0);
  EXPECT_DOUBLE_EQ(allReduceBusFactor(8), 1.75);
  EXPECT_DOUBLE_EQ(nMinusOneOverN(4), 0.75);
  EXPECT_DOUBLE_EQ(unitBusFactor(8), 1.0);
  // all-gather's algbw counts every rank's block: count 8 floats per rank x 4 ranks.
  EXPECT_DOUBLE_EQ(data::allRanksBytes(8, 4, 4), 128.0);
  EXPECT_DOUBLE_EQ(data::paramBytes(8, 4, 4), 32.0);
}

TEST(PerfBandwidth, CountsFollowNcclTests) {
  CollCounts ag = data::gatherCounts(1001, 4);  // per-rank blocks round down
  EXPECT_EQ(ag.sendCount, 250u);
  EXPECT_EQ(ag.recvCount, 1000u);
  EXPECT_EQ(ag.paramCount, 250u);
  EXPECT_EQ(ag.sendInplaceOffset, 250u);
  CollCounts rs = data::scatterCounts(1000, 4);
  EXPECT_EQ(rs.sendCount, 1000u);
  EXPECT_EQ(rs.recvCount, 250u);
  EXPECT_EQ(rs.recvInplaceOffset, 250u);
  CollCounts a2a = data::allToAllCounts(1000, 4);
  EXPECT_EQ(a2a.sendCount, 1000u);
  EXPECT_EQ(a2a.paramCount, 250u);
  CollCounts ar = data::sameCounts(1000, 4);
  EXPECT_EQ(ar.recvCount, 1000u);
  EXPECT_EQ(ar.sendInplaceOffset, 0u);
}

TEST(PerfReport, RowsKeepNcclTestsWidths) {
  std::string p = rowParams(8, 2, "float", "sum", -1);
  EXPECT_EQ(p, "           8             2     float     sum      -1");
  std::string r = rowResult(10.45, 0.001, 0.0, 0);
  EXPECT_EQ(r, "    10.45    0.00    0.00      0");
  EXPECT_EQ(rowResult(90330, 118.87, 222.88, 0), "  90330.0  118.87  222.88      0");
  EXPECT_EQ(rowResult(123456, 1234.5, 12345, 3), "   123456  1234.5   12345      3");
  EXPECT_EQ(rowResult(1.0, 1.0, 1.0, -1), "     1.00    1.00    1.00    N/A");
  std::string h = columnHeader();
  EXPECT_NE(h.find("out-of-place"), std::string::npos);
  EXPECT_NE(h.find("#wrong"), std::string::npos);
}

TEST(PerfElement, EncodesExactValuesInEveryType) {
  for (int t = 0; t < lanesNumTypes; ++t) {
    auto type = static_cast<lanesDataType_t>(t);
    int64_t lim = static_cast<int64_t>(exactIntLimit(type));
    int64_t lo = isSignedType(type) ? -lim : 0;
    for (int64_t v = lo; v <= std::min<int64_t>(lim, 4096); ++v) {
      ASSERT_EQ(roundTo(type, static_cast<double>(v)), static_cast<double>(v))
          << "type " << t << " value " << v;
    }
  }
  // Known encodings and rounding: half 1.0 = 0x3c00; e4m3 saturates at 448.
  uint16_t h = 0;
  storeElement(lanesFloat16, &h, 0, 1.0);
  EXPECT_EQ(h, 0x3c00);
  EXPECT_EQ(roundTo(lanesFloat8e4m3, 1000.0), 448.0);
  EXPECT_EQ(roundTo(lanesFloat8e5m2, 9.0), 8.0);    // ties to even: 9 -> 8
  EXPECT_EQ(roundTo(lanesFloat8e5m2, 11.0), 12.0);  // 11 -> 12
  EXPECT_EQ(roundTo(lanesBfloat16, 257.0), 256.0);  // 8 significant bits
  EXPECT_TRUE(std::isinf(roundTo(lanesFloat16, 1e6)));
}

// Long-double reference: combine every rank's input in `order`, rounding to
// the datatype after each step as a reduction in that type would, and demand
// that no step ever rounds (the result is order-independent).
long double combineInOrder(const PatternKey& k, uint64_t index, const std::vector<int>& order,
                           bool* exact) {
  long double acc = reduceInput(k, order[0], index);
  for (size_t s = 1; s < order.size(); ++s) {
    long double v = reduceInput(k, order[s], index);
    switch (k.op) {
      case lanesProd:
        acc *= v;
        break;
      case lanesMax:
        acc = std::max(acc, v);
        break;
      case lanesMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
    if (roundTo(k.type, static_cast<double>(acc)) != static_cast<double>(acc)) *exact = false;
  }
  return acc;
}

// Pairwise tree: the order-dependence a ring or tree introduces.
long double combineTree(const PatternKey& k, uint64_t index, std::vector<long double> vals,
                        bool* exact) {
  while (vals.size() > 1) {
    std::vector<long double> next;
    for (size_t i = 0; i + 1 < vals.size(); i += 2) {
      long double a = vals[i], b = vals[i + 1], c;
      switch (k.op) {
        case lanesProd:
          c = a * b;
          break;
        case lanesMax:
          c = std::max(a, b);
          break;
        case lanesMin:
          c = std::min(a, b);
          break;
        default:
          c = a + b;
          break;
      }
      if (roundTo(k.type, static_cast<double>(c)) != static_cast<double>(c)) *exact = false;
      next.push_back(c);
    }
    if (vals.size() % 2) next.push_back(vals.back());
    vals = std::move(next);
  }
  return vals[0];
}

TEST(PerfPattern, ExpectedIsExactForEveryTypeOpAndOrder) {
  std::mt19937 rng(7);
  for (int n : {1, 2, 3, 4, 5, 8, 16, 33}) {
    for (int t = 0; t < lanesNumTypes; ++t) {
      for (lanesRedOp_t op : {lanesSum, lanesProd, lanesMax, lanesMin, lanesAvg}) {
        PatternKey k{static_cast<lanesDataType_t>(t), op, n, 3};
        for (uint64_t i = 0; i < 97; ++i) {
          std::vector<int> order(n);
          for (int r = 0; r < n; ++r) order[r] = r;
          std::vector<std::vector<int>> orders{order};
          std::reverse(order.begin(), order.end());
          orders.push_back(order);
          std::shuffle(order.begin(), order.end(), rng);
          orders.push_back(order);
          bool exact = true;
          for (const auto& o : orders) {
            for (int r : o) {
              double in = reduceInput(k, r, i);
              ASSERT_EQ(roundTo(k.type, in), in) << "input not representable";
            }
            long double combined = combineInOrder(k, i, o, &exact);
            std::vector<long double> vals;
            for (int r : o) vals.push_back(reduceInput(k, r, i));
            long double tree = combineTree(k, i, vals, &exact);
            ASSERT_EQ(combined, tree);
            ASSERT_EQ(static_cast<double>(combined), combinedExact(k, i));
          }
          ASSERT_TRUE(exact) << "a partial result rounds: type " << t << " op " << op << " n " << n
                             << " element " << i;
          // The expected value: the exact combination, divided for avg.
          long double ref = combinedExact(k, i);
          double want = static_cast<double>(ref);
          if (op == lanesAvg) {
            want = isFloat(k.type) ? roundTo(k.type, static_cast<double>(ref / n))
                                   : static_cast<double>(std::trunc(ref / n));
            bool pow2 = (n & (n - 1)) == 0;
            if (isFloat(k.type) && pow2) {
              // Dividing by a power of two must be exact too.
              ASSERT_EQ(static_cast<long double>(want) * n, ref);
            }
          }
          ASSERT_EQ(reduceExpected(k, i), want);
          ASSERT_EQ(roundTo(k.type, want), want);
          bool tolerant = op == lanesAvg && isFloat(k.type) && (n & (n - 1)) != 0;
          // Only avg on floats with a non-power-of-two rank count may be inexact.
          if (!tolerant) {
            ASSERT_EQ(reduceTolerance(k, i), 0.0) << "type " << t << " n " << n;
          }
        }
      }
    }
  }
}

TEST(PerfPattern, InputsAreNotTrivial) {
  // A check that passes because every input is the identity would prove nothing.
  for (int t = 0; t < lanesNumTypes; ++t) {
    for (lanesRedOp_t op : {lanesSum, lanesProd, lanesMax, lanesMin, lanesAvg}) {
      PatternKey k{static_cast<lanesDataType_t>(t), op, 4, 0};
      int differing = 0;
      for (uint64_t i = 0; i < 64; ++i) {
        double own = reduceInput(k, 0, i);
        if (reduceExpected(k, i) != own) ++differing;
      }
      EXPECT_GT(differing, 8) << "type " << t << " op " << op;
    }
  }
}

TEST(PerfPattern, DataMovementExpectationsPointAtTheRightSender) {
  DataKey k{lanesFloat32, lanesSum, 2, 4, 1, 10, 5};
  // all-gather: block r of the result is rank r's input.
  for (size_t i = 0; i < 40; ++i) {
    DataKey sender = k;
    sender.rank = static_cast<int>(i / 10);
    EXPECT_EQ(data::allGatherExpect(k, i)->value, data::ownInput(sender, i % 10));
  }
  // all-to-all: rank 2's block s comes from sender s's block 2.
  for (size_t i = 0; i < 40; ++i) {
    DataKey sender = k;
    sender.rank = static_cast<int>(i / 10);
    EXPECT_EQ(data::allToAllExpect(k, i)->value, data::ownInput(sender, 2 * 10 + i % 10));
  }
  // reduce: only the root's buffer is defined.
  EXPECT_FALSE(data::reduceExpect(k, 0).has_value());
  k.rank = 1;
  EXPECT_TRUE(data::reduceExpect(k, 0).has_value());
  // copy values are exact in the narrowest types.
  for (int r = 0; r < 8; ++r) {
    for (uint64_t i = 0; i < 50; ++i) {
      double v = copyValue(lanesFloat8e5m2, r, i, 0);
      EXPECT_EQ(roundTo(lanesFloat8e5m2, v), v);
      EXPECT_GE(copyValue(lanesUint8, r, i, 0), 0.0);
    }
  }
}

// nccl-tests' src/common.cu: -y --stream_null, -T --timeout, -C --report_cputime,
// -a --average, -J --output_file, and the flags with no meaning here.
TEST(PerfArgs, NcclTestsFlagsParseWithTheirMeaning) {
  PerfArgs a;
  ASSERT_TRUE(
      parse({"-y", "1", "-T", "30", "-C", "1", "-a", "3", "-J", "out.json", "-N", "2"}, &a).ok);
  EXPECT_EQ(a.streamNull, 1);
  EXPECT_EQ(a.timeoutSeconds, 30);
  EXPECT_EQ(a.reportCpuTime, 1);
  EXPECT_EQ(a.average, 3);
  EXPECT_EQ(a.jsonPath, "out.json");
  EXPECT_EQ(a.runCycles, 2);
  EXPECT_TRUE(a.ignoredFlags.empty());
  ASSERT_TRUE(
      parse({"--stream_null=0", "--timeout=5", "--report_cputime=0", "--output_file=x"}, &a).ok);
  EXPECT_EQ(a.streamNull, 0);
  EXPECT_EQ(a.timeoutSeconds, 5);
  EXPECT_EQ(a.jsonPath, "x");
  // Parsed for compatibility, listed for the header's note.
  ASSERT_TRUE(
      parse({"-p", "1", "-R", "2", "-x", "1", "-D", "0", "-V", "8", "-M", "1", "-S", "1"}, &a).ok);
  EXPECT_EQ(a.localRegister, 2);
  EXPECT_EQ(a.deviceCtaCount, 8);
  EXPECT_EQ(a.ignoredFlags,
            (std::vector<std::string>{"-p 1", "-R 2", "-x 1", "-V 8", "-M 1", "-S 1"}));
  // Out of range, and -I (not an nccl-tests flag upstream).
  for (std::vector<std::string> bad : {std::vector<std::string>{"-y", "2"},
                                       {"-C", "x"},
                                       {"-R", "3"},
                                       {"-V", "0"},
                                       {"-T", "-1"},
                                       {"-I", "1"}}) {
    ParseResult r = parse(bad, &a);
    EXPECT_FALSE(r.ok) << bad[0];
  }
}

TEST(PerfArgs, BackendAndCompare) {
  PerfArgs a;
  ASSERT_TRUE(parse({}, &a).ok);
  EXPECT_EQ(a.backend, Backend::Lanes);
  EXPECT_FALSE(a.compare);
  ASSERT_TRUE(parse({"--backend", "nccl"}, &a).ok);
  EXPECT_EQ(a.backend, Backend::Nccl);
  ASSERT_TRUE(parse({"--compare", "nccl", "--memory", "device"}, &a).ok);
  EXPECT_TRUE(a.compare);
  ParseResult r = parse({"--backend", "nccl", "--memory", "host"}, &a);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("device"), std::string::npos) << r.error;
  EXPECT_FALSE(parse({"--compare", "nccl", "--memory", "host"}, &a).ok);
  EXPECT_FALSE(parse({"--compare", "mpi"}, &a).ok);
  EXPECT_FALSE(parse({"--backend", "mpi"}, &a).ok);
  EXPECT_FALSE(parse({"--compare", "nccl", "--backend", "nccl"}, &a).ok);
}

// nccl-tests' hypercube.cu: blocks of a multiple of 4 elements; algbw counts
// the n-1 blocks received, bus factor 1; power-of-two rank counts only.
TEST(PerfBandwidth, HyperCubeFollowsNcclTests) {
  CollCounts c = data::hyperCubeCounts(1000, 4);  // 1000 / 16 * 4
  EXPECT_EQ(c.paramCount, 248u);
  EXPECT_EQ(c.sendCount, 248u);
  EXPECT_EQ(c.recvCount, 992u);
  EXPECT_EQ(c.sendInplaceOffset, 248u);
  EXPECT_EQ(data::hyperCubeCounts(15, 4).paramCount, 0u);
  EXPECT_DOUBLE_EQ(data::othersBytes(248, 4, 4), 248.0 * 4 * 3);
  EXPECT_TRUE(data::powerOfTwoRanks(8));
  EXPECT_FALSE(data::powerOfTwoRanks(6));
}

TEST(PerfBounds, LinkAndHostBoundsFromMeasuredRates) {
  CopyBounds b{20, 25, 10, 12, 1000};
  // Both directions busy: both-ways rates; the slower direction decides.
  EXPECT_DOUBLE_EQ(gpuLinkSeconds({12e9, 10e9}, b), 1.0);
  // One direction only: the one-way rate.
  EXPECT_DOUBLE_EQ(gpuLinkSeconds({25e9, 0}, b), 1.0);
  EXPECT_DOUBLE_EQ(gpuLinkSeconds({0, 20e9}, b), 1.0);
  EXPECT_EQ(gpuLinkSeconds({0, 0}, b), 0.0);
  EXPECT_LT(gpuLinkSeconds({1, 1}, CopyBounds{}), 0.0);  // no rates: unknown
  EXPECT_DOUBLE_EQ(hostCopySeconds({0, 50e9}, 25), 2.0);
  // All-reduce, 4 ranks on 4 GPUs of S bytes: 1.5 S each way per GPU; at
  // 10 GB/s both ways the bound busbw is the link rate.
  CollCounts c = data::sameCounts(1 << 20, 4);
  RankTraffic t = data::allReduceTraffic(c, 4, 0, 4, 0);
  const double s = (1 << 20) * 4.0;
  EXPECT_DOUBLE_EQ(t.out, 1.5 * s);
  double secs = gpuLinkSeconds({t.out, t.in}, CopyBounds{10, 10, 10, 10, 100});
  EXPECT_NEAR(boundBusBw(s, allReduceBusFactor(4), secs), 10.0, 1e-9);
  // Broadcast: the root only sends, the others only receive.
  EXPECT_EQ(data::broadcastTraffic(c, 4, 0, 4, 0).in, 0.0);
  EXPECT_EQ(data::broadcastTraffic(c, 4, 1, 4, 0).out, 0.0);
  EXPECT_EQ(boundBusBw(s, 1.0, 0), 0.0);
}

TEST(PerfReport, ExtraColumnsOnlyWhereAskedFor) {
  EXPECT_EQ(boundColumns(20.0, 10.0), "   20.00   50.0%");
  EXPECT_EQ(boundColumns(0, 10.0), "     N/A     N/A");
  EXPECT_EQ(compareColumns("nccl", 0.5, 1.25), "     nccl    0.50    1.25");
  EXPECT_EQ(compareColumns("lanes", 0, 0), "    lanes       -       -");
  EXPECT_EQ(boundHeader(0).size(), boundColumns(1, 1).size());
  EXPECT_EQ(compareHeader(0).size(), compareColumns("nccl", 1, 1).size());
}

TEST(PerfEnv, ListsPrefixedVariablesAndRedactsSecrets) {
  std::string a = "LANES_P2P_DISABLE=1", b = "NCCL_P2P_DISABLE=1", c = "PATH=/bin",
              d = "LANES_BOOTSTRAP_SECRET=abc", e = "LANES_A=x=y";
  char* env[] = {a.data(), b.data(), c.data(), d.data(), e.data(), nullptr};
  auto lanes = prefixedEnv(env, "LANES_");
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_EQ(lanes[0], (std::pair<std::string, std::string>{"LANES_A", "x=y"}));
  EXPECT_EQ(lanes[1].second, "<redacted>");
  EXPECT_EQ(envLine(prefixedEnv(env, "NCCL_")), "NCCL_P2P_DISABLE=1");
  EXPECT_EQ(envLine({}), "(none set)");
  char* argv[] = {a.data(), c.data()};
  EXPECT_EQ(commandLine(2, argv), "LANES_P2P_DISABLE=1 PATH=/bin");
}

}  // namespace
}  // namespace lanes::perf
