#include "tests/multi/reduction_matrix.h"

#include <cstring>
#include <string>

#include "base/sanitizers.h"
#include "tests/multi/data.h"
#include "tests/multi/harness.h"
#include "tests/multi/red_op.h"

namespace lanes::test {
namespace {

// FNV-1a of a buffer: the ranks compare their outputs by it.
uint64_t hashOf(const void* p, size_t bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ULL;
  return h;
}

// Under a sanitizer, counts above 4096 run for one type of each element
// size: the chunked paths move bytes alike for all types of a size, each
// type's arithmetic is checked at the small counts here and at every count
// in the release build, and the full matrix at 100 thousand elements takes
// 40-60 s per test under AddressSanitizer.
constexpr size_t kSanitizedFullMatrixCount = 4096;
bool runsAt(lanesDataType_t t, size_t count) {
  constexpr bool kSanitized = kUnderAddressSanitizer || kUnderThreadSanitizer;
  if (!kSanitized || count <= kSanitizedFullMatrixCount) return true;
  return t == lanesInt8 || t == lanesBfloat16 || t == lanesFloat32 || t == lanesFloat64;
}

// Reduce-scatter (every type and reduction) and all-gather (every type) at
// each count, in place and not.
void runGatherScatter(lanesComm_t c, int rank, int n, const std::vector<size_t>& counts,
                      const PlanCheck& checkPlan) {
  uint32_t salt = 1000;
  for (lanesDataType_t t : kAllTypes) {
    const size_t esz = typeSize(t);
    for (size_t count : counts) {
      if (!runsAt(t, count)) continue;
      for (bool inPlace : {false, true}) {
        for (Reduction r : kAllReductions) {
          ++salt;
          GuardedBuffer send(count * esz * n), recv(inPlace ? count * esz * n : count * esz);
          void* in = inPlace ? recv.data() : send.data();
          fillReductionInput(t, r, rank, n, in, count * n, 0, salt);
          RedOp op(r, t, c);
          void* out =
              inPlace ? static_cast<std::byte*>(recv.data()) + rank * count * esz : recv.data();
          RANK_CHECK_LANES(lanesReduceScatter(in, out, count, t, op.get(), c, nullptr), c);
          const std::string problem =
              checkReductionOutput(t, r, n, out, count, static_cast<size_t>(rank) * count, salt);
          RANK_CHECK(problem.empty(), "reduce-scatter %s %s count %zu %s: %s", typeName(t),
                     reductionName(r), count, inPlace ? "in place" : "out of place",
                     problem.c_str());
          if (count > 0) checkPlan(c, "reduce-scatter");
        }
        ++salt;
        const size_t bytes = count * esz;
        GuardedBuffer send(bytes), recv(bytes * n);
        void* in = inPlace ? static_cast<std::byte*>(recv.data()) + rank * bytes : send.data();
        fillPattern(in, bytes, rank, 0, salt);
        RANK_CHECK_LANES(lanesAllGather(in, recv.data(), count, t, c, nullptr), c);
        for (int p = 0; p < n; ++p) {
          const std::string problem =
              checkPattern(static_cast<std::byte*>(recv.data()) + p * bytes, bytes, p, 0, salt);
          RANK_CHECK(problem.empty(), "all-gather %s count %zu %s, block of rank %d: %s",
                     typeName(t), count, inPlace ? "in place" : "out of place", p, problem.c_str());
        }
        if (count > 0) checkPlan(c, "all-gather");
      }
    }
  }
}

}  // namespace

void runReductionMatrix(lanesComm_t c, int rank, int n, const std::vector<size_t>& counts,
                        const PlanCheck& checkPlan) {
  std::vector<uint64_t> hashes;
  uint32_t salt = 0;
  for (lanesDataType_t t : kAllTypes) {
    for (Reduction r : kAllReductions) {
      for (size_t count : counts) {
        if (!runsAt(t, count)) continue;
        for (bool inPlace : {false, true}) {
          ++salt;
          const size_t bytes = count * typeSize(t);
          GuardedBuffer send(bytes), recv(bytes);
          fillReductionInput(t, r, rank, n, inPlace ? recv.data() : send.data(), count, 0, salt);
          RedOp op(r, t, c);
          RANK_CHECK_LANES(lanesAllReduce(inPlace ? recv.data() : send.data(), recv.data(), count,
                                          t, op.get(), c, nullptr),
                           c);
          // The values on one rank, rotating; the others must hold the same
          // bits (the hashes compared below).
          if (salt % static_cast<uint32_t>(n) == static_cast<uint32_t>(rank)) {
            const std::string problem = checkReductionOutput(t, r, n, recv.data(), count, 0, salt);
            RANK_CHECK(problem.empty(), "%s %s count %zu %s: %s", typeName(t), reductionName(r),
                       count, inPlace ? "in place" : "out of place", problem.c_str());
          }
          if (count > 0) checkPlan(c, "all-reduce");
          hashes.push_back(hashOf(recv.data(), bytes));
        }
      }
    }
  }
  // Bit-identical on every rank: the hashes of all ranks, gathered.
  std::vector<uint64_t> all(hashes.size() * static_cast<size_t>(n));
  RANK_CHECK_LANES(
      lanesAllGather(hashes.data(), all.data(), hashes.size(), lanesUint64, c, nullptr), c);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < hashes.size(); ++i)
      RANK_CHECK(all[static_cast<size_t>(p) * hashes.size() + i] == hashes[i],
                 "call %zu: rank %d's output differs from rank %d's", i, p, rank);
  runGatherScatter(c, rank, n, counts, checkPlan);
}

}  // namespace lanes::test
