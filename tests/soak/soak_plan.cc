#include "tests/soak/soak_plan.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace lanes::soak {

const char* opKindName(OpKind k) {
  switch (k) {
    case OpKind::AllReduce:
      return "all-reduce";
    case OpKind::Reduce:
      return "reduce";
    case OpKind::Broadcast:
      return "broadcast";
    case OpKind::AllGather:
      return "all-gather";
    case OpKind::ReduceScatter:
      return "reduce-scatter";
    case OpKind::AlltoAll:
      return "all-to-all";
    case OpKind::Gather:
      return "gather";
    case OpKind::Scatter:
      return "scatter";
    case OpKind::SendRecv:
      return "send/recv ring";
    case OpKind::kCount:
      break;
  }
  return "?";
}

OpSpec OpPlanner::next() {
  OpSpec op;
  op.seq = seq_++;
  auto pick = [&](uint64_t n) { return static_cast<size_t>(rng_() % n); };
  op.kind = static_cast<OpKind>(pick(static_cast<uint64_t>(OpKind::kCount)));
  op.comm = static_cast<int>(pick(static_cast<uint64_t>(comms_)));
  op.type = test::kAllTypes[pick(std::size(test::kAllTypes))];
  op.reduction = test::kAllReductions[pick(std::size(test::kAllReductions))];
  // Sizes spread evenly over the orders of magnitude, 1 byte to maxBytes.
  const double logMax = std::log2(static_cast<double>(std::max<size_t>(maxBytes_, 1)));
  const double exponent = std::uniform_real_distribution<double>(0, logMax)(rng_);
  const size_t bytes = static_cast<size_t>(std::exp2(exponent));
  op.count = std::max<size_t>(1, bytes / test::typeSize(op.type));
  op.rootDraw = static_cast<uint32_t>(rng_());
  op.inPlace = (rng_() & 1) != 0;
  op.salt = static_cast<uint32_t>(rng_());
  return op;
}

std::string describe(const OpSpec& op, int root) {
  std::string s = "op " + std::to_string(op.seq) + ": " + opKindName(op.kind) + " of " +
                  std::to_string(op.count) + " " + test::typeName(op.type);
  if (op.kind == OpKind::AllReduce || op.kind == OpKind::Reduce || op.kind == OpKind::ReduceScatter)
    s += std::string(" ") + test::reductionName(op.reduction);
  if (op.kind == OpKind::Reduce || op.kind == OpKind::Broadcast || op.kind == OpKind::Gather ||
      op.kind == OpKind::Scatter)
    s += " root " + std::to_string(root);
  s += op.inPlace ? ", in place" : ", out of place";
  s += " on communicator " + std::to_string(op.comm);
  return s;
}

}  // namespace lanes::soak
