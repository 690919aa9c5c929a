#include "base/collective.h"

#include <cctype>
#include <string>

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

bool parseCollTypeName(std::string_view name, CollType* out) {
  std::string folded;
  for (char c : name)
    if (c != '_' && c != '-')
      folded += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int t = 0; t <= static_cast<int>(CollType::Scatter); ++t) {
    if (folded == collTypeName(static_cast<CollType>(t))) {
      *out = static_cast<CollType>(t);
      return true;
    }
  }
  return false;
}

}  // namespace lanes
