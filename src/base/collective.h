// One collective call as every layer sees it: which collective, and its
// arguments for this rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/datatype.h"

namespace lanes {

enum class CollType : uint8_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
};
inline constexpr size_t kCollTypeCount = static_cast<size_t>(CollType::Scatter) + 1;
const char* collTypeName(CollType t);
// The collective collTypeName names, in any case, with or without '_' or '-'
// between words ("all_reduce", "AllReduce"); false for anything else.
bool parseCollTypeName(std::string_view name, CollType* out);

// Collectives with a root rank: their argument is checked, and their data flows
// to or from that one rank.
constexpr bool isRooted(CollType t) {
  return t == CollType::Broadcast || t == CollType::Reduce || t == CollType::Gather ||
         t == CollType::Scatter;
}
// Collectives that combine the ranks' inputs with a reduction operator.
constexpr bool isReduction(CollType t) {
  return t == CollType::AllReduce || t == CollType::Reduce || t == CollType::ReduceScatter;
}

// One collective as this rank sees it. Buffers are already validated; for
// PreMulSum the input has been pre-multiplied into `send` and redop is Sum;
// Avg arrives as Sum (the caller divides afterwards).
struct CollArgs {
  CollType coll = CollType::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // elements as the API counts them (per rank for AllGather etc.)
  lanesDataType_t type = lanesFloat32;
  RedOpKind redop = RedOpKind::Sum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
};

// Elements of input a rank contributes: what the planner sizes a call by
// (CallFacts::bytes) and PreMulSum scales. A reduce-scatter's count is its
// output; its input is nranks of those.
inline size_t inputCount(const CollArgs& a) {
  return a.coll == CollType::ReduceScatter ? a.count * static_cast<size_t>(a.nranks) : a.count;
}

}  // namespace lanes
