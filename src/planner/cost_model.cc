#include "planner/cost_model.h"

namespace lanes {
namespace {

struct HopCost {
  double latencySeconds;
  double bytesPerSecond;
};

// Shared memory: a ring slot written and read by CPUs; socket: a TCP stream on
// a 25 GbE-class link; device staged: PCIe 4.0 x16 in practice, plus the
// in-stream flag hand-off.
HopCost costOf(HopClass hop) {
  switch (hop) {
    case HopClass::Local:
      return {1e-6, 10e9};
    case HopClass::SharedMemory:
      return {2e-6, 8e9};
    case HopClass::Socket:
      return {25e-6, 2.5e9};
    case HopClass::DeviceStaged:
      return {15e-6, 25e9};
  }
  return {2e-6, 8e9};
}

}  // namespace

double predictSeconds(const CostQuery& q) {
  if (q.bytes == 0) return 0;
  const HopCost c = costOf(q.nranks <= 1 ? HopClass::Local : q.hop);
  const double n = q.nranks;
  const double s = static_cast<double>(q.bytes);
  if (q.pointToPoint || q.nranks <= 1) return c.latencySeconds + s / c.bytesPerSecond;
  double steps = 0;
  double wireBytes = 0;  // bytes this rank sends over its slowest hop
  switch (q.coll) {
    case CollType::AllReduce:  // ring: reduce-scatter then all-gather
      steps = 2 * (n - 1);
      wireBytes = 2 * (n - 1) / n * s;
      break;
    case CollType::AllGather:      // s is the gathered buffer
    case CollType::ReduceScatter:  // s is the scattered input
    case CollType::AlltoAll:
      steps = n - 1;
      wireBytes = (n - 1) / n * s;
      break;
    case CollType::Broadcast:  // pipelined chain
    case CollType::Reduce:
      steps = n - 1;
      wireBytes = s;
      break;
    case CollType::Gather:  // the root receives every piece
    case CollType::Scatter:
      steps = n - 1;
      wireBytes = (n - 1) / n * s;
      break;
  }
  return steps * c.latencySeconds + wireBytes / c.bytesPerSecond;
}

}  // namespace lanes
