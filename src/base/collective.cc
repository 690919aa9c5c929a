#include "base/collective.h"

namespace lanes {

const char* collTypeName(CollType t) {
  switch (t) {
    case CollType::AllReduce:
      return "allreduce";
    case CollType::Broadcast:
      return "broadcast";
    case CollType::Reduce:
      return "reduce";
    case CollType::AllGather:
      return "allgather";
    case CollType::ReduceScatter:
      return "reducescatter";
    case CollType::AlltoAll:
      return "alltoall";
    case CollType::Gather:
      return "gather";
    case CollType::Scatter:
      return "scatter";
  }
  return "unknown";
}

}  // namespace lanes
