// The algorithm table: names, what each algorithm serves, and dispatch.
#include "algorithms/algorithm.h"

#include <strings.h>

#include <string>

#include "algorithms/ring_order.h"
#include "algorithms/schedule_builder.h"

namespace lanes {

const char* algoName(AlgoId a) {
  switch (a) {
    case AlgoId::Ring:
      return "ring";
    case AlgoId::RecursiveDoubling:
      return "recursive_doubling";
    case AlgoId::Chain:
      return "chain";
    case AlgoId::Pairwise:
      return "pairwise";
    case AlgoId::Direct:
      return "direct";
    case AlgoId::Tree:
      return "tree";
    case AlgoId::Hierarchical:
      return "hierarchical";
    case AlgoId::SharedSum:
      return "shared_sum";
    case AlgoId::HalvingDoubling:
      return "halving_doubling";
  }
  return "unknown";
}

bool parseAlgoName(const char* text, AlgoId* out) {
  if (text == nullptr) return false;
  struct Alias {
    const char* name;
    AlgoId id;
  };
  static constexpr Alias kAliases[] = {
      {"ring", AlgoId::Ring},
      {"recursive_doubling", AlgoId::RecursiveDoubling},
      {"rd", AlgoId::RecursiveDoubling},
      {"recursivedoubling", AlgoId::RecursiveDoubling},
      {"chain", AlgoId::Chain},
      {"pairwise", AlgoId::Pairwise},
      {"direct", AlgoId::Direct},
      {"tree", AlgoId::Tree},
      {"hierarchical", AlgoId::Hierarchical},
      {"shared_sum", AlgoId::SharedSum},
      {"halving_doubling", AlgoId::HalvingDoubling},
      {"hd", AlgoId::HalvingDoubling},
      {"rabenseifner", AlgoId::HalvingDoubling},
  };
  for (const Alias& a : kAliases) {
    if (strcasecmp(text, a.name) == 0) {
      *out = a.id;
      return true;
    }
  }
  return false;
}

bool algoSupports(AlgoId algo, CollType coll) {
  switch (algo) {
    case AlgoId::Ring:
      return coll == CollType::AllReduce || coll == CollType::ReduceScatter ||
             coll == CollType::AllGather;
    case AlgoId::RecursiveDoubling:
      return coll == CollType::AllReduce || coll == CollType::AllGather;
    case AlgoId::Chain:
      return coll == CollType::Broadcast || coll == CollType::Reduce;
    case AlgoId::Pairwise:
      return coll == CollType::AlltoAll;
    case AlgoId::Direct:
      return coll == CollType::Gather || coll == CollType::Scatter || coll == CollType::Broadcast ||
             coll == CollType::Reduce;
    case AlgoId::Tree:
      return coll == CollType::AllReduce || coll == CollType::Reduce || coll == CollType::Broadcast;
    case AlgoId::Hierarchical:
      return coll == CollType::AllReduce || coll == CollType::AllGather ||
             coll == CollType::ReduceScatter;
    case AlgoId::SharedSum:
    case AlgoId::HalvingDoubling:
      return coll == CollType::AllReduce || coll == CollType::ReduceScatter;
  }
  return false;
}

bool algoSupports(AlgoId algo, CollType coll, int nranks) {
  if (nranks < 1 || !algoSupports(algo, coll)) return false;
  if ((algo == AlgoId::RecursiveDoubling && coll == CollType::AllGather) ||
      (algo == AlgoId::HalvingDoubling && coll == CollType::ReduceScatter)) {
    return (nranks & (nranks - 1)) == 0;
  }
  return true;
}

Status buildSchedule(AlgoId algo, const CollArgs& args, Schedule* out,
                     std::span<const int> ringOrder, std::span<const int> hostOf) {
  const std::string what = std::string(collTypeName(args.coll)) + "/" + algoName(algo);
  if (args.nranks < 1 || args.rank < 0 || args.rank >= args.nranks) {
    return invalidArgument(what + ": rank " + std::to_string(args.rank) +
                           " is outside a communicator of " + std::to_string(args.nranks) +
                           " ranks; pass the communicator's own rank and size.");
  }
  if (isRooted(args.coll) && (args.root < 0 || args.root >= args.nranks)) {
    return invalidArgument(what + ": root " + std::to_string(args.root) + " is not a rank of a " +
                           std::to_string(args.nranks) +
                           "-rank communicator; pick a root in [0, nranks).");
  }
  if (datatypeSize(args.type) == 0) {
    return invalidArgument(what + ": unknown datatype " + std::to_string(int(args.type)) +
                           "; use one of the lanesDataType_t values.");
  }
  if (!algoSupports(algo, args.coll)) {
    return invalidUsage(std::string("algorithm '") + algoName(algo) + "' does not implement " +
                        collTypeName(args.coll) +
                        "; choose another algorithm (or let the planner pick one).");
  }
  if (!algoSupports(algo, args.coll, args.nranks)) {
    return invalidUsage(std::string("algorithm '") + algoName(algo) + "' implements " +
                        collTypeName(args.coll) + " only for a power-of-two number of ranks, not " +
                        std::to_string(args.nranks) + "; use the ring algorithm instead.");
  }
  if (!ringOrder.empty() && !isPermutation(ringOrder, args.nranks)) {
    return invalidArgument(what + ": the ring order has " + std::to_string(ringOrder.size()) +
                           " entries that are not a permutation of the " +
                           std::to_string(args.nranks) + " ranks; pass each rank once.");
  }
  out->steps.clear();
  out->scratch.clear();
  Status st = internalError(what + ": unknown algorithm id " + std::to_string(int(algo)) + ".");
  switch (algo) {
    case AlgoId::Ring:
      st = algo::buildRing(args, ringOrder, out);
      break;
    case AlgoId::RecursiveDoubling:
      st = algo::buildRecursiveDoubling(args, out);
      break;
    case AlgoId::Chain:
      st = algo::buildChain(args, out);
      break;
    case AlgoId::Pairwise:
      st = algo::buildPairwise(args, out);
      break;
    case AlgoId::Direct:
      st = algo::buildDirect(args, out);
      break;
    case AlgoId::Tree:
      st = algo::buildTree(args, out);
      break;
    case AlgoId::Hierarchical:
      st = algo::buildHierarchical(args, hostOf, out);
      break;
    case AlgoId::SharedSum:
      st = algo::buildSharedSum(args, out);
      break;
    case AlgoId::HalvingDoubling:
      st = algo::buildHalvingDoubling(args, out);
      break;
  }
  // Steps left empty (zero-byte segments, in-place copies) cost a barrier each.
  std::erase_if(out->steps, [](const Step& s) { return s.ops.empty(); });
  return st;
}

namespace algo {

void beginSchedule(const CollArgs& args, const char* algoText, Schedule* out) {
  out->name = std::string(collTypeName(args.coll)) + "/" + algoText;
  out->type = args.type;
  out->redop = args.redop;
  out->nranks = args.nranks;
  out->steps.clear();
  out->scratch.clear();
}

void localCopySchedule(const void* src, void* dst, size_t bytes, Schedule* out) {
  if (bytes == 0 || src == dst) return;
  addCopy(out->addStep(), dst, src, bytes);
}

}  // namespace algo
}  // namespace lanes
