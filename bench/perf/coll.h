// One collective as the perf driver sees it: how a size becomes counts, how
// bus bandwidth is derived (nccl-tests' PERFORMANCE.md), how to run it, and
// what goes in and must come out. Adding a tool is adding one CollSpec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "base/status.h"
#include "lanes/lanes.h"

namespace lanes::perf {

class CollBackend;
class RankMemory;

// Element counts for one size, as nccl-tests' getCollByteCount.
struct CollCounts {
  size_t sendCount = 0;          // elements in the send buffer
  size_t recvCount = 0;          // elements in the receive buffer
  size_t paramCount = 0;         // the `count` argument of the call
  size_t sendInplaceOffset = 0;  // in-place: send data starts at recv + offset*rank
  size_t recvInplaceOffset = 0;  // in-place: recv data starts at recv + offset*rank
};

// Where the data check stands for one element.
struct Expected {
  double value = 0;
  double tolerance = 0;
};

// What fill/expect need to know about the run.
struct DataKey {
  lanesDataType_t type = lanesFloat32;
  lanesRedOp_t op = lanesSum;
  int rank = 0;
  int nranks = 1;
  int root = 0;
  size_t paramCount = 0;
  uint64_t seed = 0;
};

// One call of the timed collective.
struct CallArgs {
  const void* send;
  void* recv;
  size_t count;  // CollCounts::paramCount
  lanesDataType_t type;
  lanesRedOp_t op;
  int root;
  cudaStream_t stream;
};

// Bytes one rank's data must leave its buffers with (out) and arrive in them
// with (in), at the least, whatever the algorithm: the bound model's input.
struct RankTraffic {
  double out = 0;
  double in = 0;
};

struct CollSpec {
  const char* name;  // "AllReduce"
  const char* key;   // "allreduce": the JSON "collective"
  bool reduces;      // takes an op (-o); otherwise the op column says "none"
  bool rooted;       // takes a root (-r); otherwise the root column says -1
  // Has an in-place form (nccl-tests runs one for every collective).
  bool inPlace;
  // Bytes per size the sweep asks for -> counts.
  CollCounts (*counts)(size_t count, int nranks);
  // algbw = algBytes / time; busbw = algbw * busFactor.
  double (*algBytes)(size_t paramCount, size_t typeSize, int nranks);
  double (*busFactor)(int nranks);
  // Enqueues the call on a.stream (nullptr for host memory) through `b`;
  // `mem` copies within the rank's own buffers where the collective needs it.
  Status (*run)(CollBackend& b, RankMemory& mem, const CallArgs& a);
  // Value this rank writes at send-buffer element i.
  double (*input)(const DataKey& key, size_t i);
  // Value this rank must hold at receive-buffer element i; nullopt where the
  // collective leaves the element undefined (a non-root's buffer).
  std::optional<Expected> (*expect)(const DataKey& key, size_t i);
  // This rank's least traffic for one call (bytes; see RankTraffic).
  RankTraffic (*traffic)(const CollCounts& c, size_t typeSize, int rank, int nranks, int root);
  // Rank counts the collective runs with (hypercube: powers of two).
  bool (*acceptsRanks)(int nranks);
  // NCCL leaves the in-place form's result undefined (send/recv through one
  // buffer: a receive may land before the send read those bytes; on 2 H200s
  // with P2P off NCCL 2.28 got it wrong at every size). nccl-tests prints N/A
  // for it; Lanes orders it, so its rows stay checked.
  bool inPlaceUndefinedOnNccl = false;
};

// Whether `backend`'s result of the in-place form is checked.
bool checksInPlace(const CollSpec& spec, const char* backend);

// The specs the tools use (colls.cc).
const CollSpec& allReduceSpec();
const CollSpec& allGatherSpec();
const CollSpec& reduceScatterSpec();
const CollSpec& broadcastSpec();
const CollSpec& reduceSpec();
const CollSpec& allToAllSpec();
const CollSpec& gatherSpec();
const CollSpec& scatterSpec();
const CollSpec& sendRecvSpec();
const CollSpec& hyperCubeSpec();

// nccl-tests' bus bandwidth factors (PERFORMANCE.md).
inline double allReduceBusFactor(int n) { return 2.0 * (n - 1) / n; }
inline double nMinusOneOverN(int n) { return static_cast<double>(n - 1) / n; }
inline double unitBusFactor(int) { return 1.0; }

}  // namespace lanes::perf
