#include "planner/size_rule.h"

#include "base/env.h"
#include "base/log.h"

namespace lanes {
namespace {

bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

AlgoChoice defaultChoice(CollType coll, size_t bytes, int nranks) {
  // Below this size latency dominates: log2(n) rounds beat 2(n-1) ring steps.
  static const size_t smallBytes = static_cast<size_t>(envSize("LANES_SMALL_MSG_BYTES", 64 * 1024));
  switch (coll) {
    case CollType::AllReduce:
      // With 2 ranks one exchange replaces the ring's two dependent hops.
      if (bytes <= smallBytes && nranks > 1)
        return {AlgoId::RecursiveDoubling, "all-reduce at or below LANES_SMALL_MSG_BYTES"};
      return {AlgoId::Ring, "all-reduce above LANES_SMALL_MSG_BYTES"};
    case CollType::AllGather:
      if (bytes <= smallBytes && isPowerOfTwo(nranks) && nranks > 2)
        return {AlgoId::RecursiveDoubling, "small all-gather, power-of-two ranks"};
      return {AlgoId::Ring, "all-gather"};
    case CollType::ReduceScatter:
      return {AlgoId::Ring, "reduce-scatter"};
    case CollType::Broadcast:
      return {AlgoId::Chain, "broadcast"};
    case CollType::Reduce:
      return {AlgoId::Chain, "reduce"};
    case CollType::AlltoAll:
      return {AlgoId::Pairwise, "all-to-all"};
    case CollType::Gather:
      return {AlgoId::Direct, "gather"};
    case CollType::Scatter:
      return {AlgoId::Direct, "scatter"};
  }
  return {AlgoId::Ring, "default"};
}

}  // namespace

AlgoChoice chooseAlgorithm(CollType coll, size_t bytes, int nranks) {
  if (auto forced = envString("LANES_ALGO")) {
    AlgoId algo;
    if (!parseAlgoName(forced->c_str(), &algo)) {
      envWarnOnce("LANES_ALGO", *forced,
                  "is not an algorithm (ring, recursive_doubling, chain, pairwise, direct)",
                  "the default choice");
    } else if (algoSupports(algo, coll, nranks)) {
      return {algo, "forced by LANES_ALGO"};
    }
  }
  return defaultChoice(coll, bytes, nranks);
}

}  // namespace lanes
