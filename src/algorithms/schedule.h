// Schedule: what an algorithm hands the executor. Steps run one after the
// other; the ops of a step run at once. Each op streams: a forwarding op
// sends on what it has received (and reduced) so far, so a ring or a chain
// pipelines at the transport's granularity without explicit chunk loops.
//
// Ops addressed to the same peer in the same direction are carried in the
// order they appear in the step (per-port FIFO), on both sides alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/scratch_pool.h"
#include "base/datatype.h"
#include "kernels/cpu/wire_codec.h"

namespace lanes {

enum class OpKind : uint8_t {
  Send,            // src -> sendPeer
  Recv,            // recvPeer -> dst
  RecvReduce,      // dst = src (op) incoming from recvPeer
  RecvSend,        // recvPeer -> dst, forwarded to sendPeer as it arrives (dst may be null)
  RecvReduceSend,  // dst = src (op) incoming; dst forwarded to sendPeer as it is produced
  Copy,            // dst = src, local
  // Host summation through the communicator's shared arena (exec/arena_sum.h),
  // no peer: src = the rank's input, dst = its output, bytes = the output's.
  ArenaAllReduce,
  ArenaReduceScatter,
};

const char* opKindName(OpKind k);

struct Op {
  OpKind kind = OpKind::Copy;
  int sendPeer = -1;
  int recvPeer = -1;
  const void* src = nullptr;
  void* dst = nullptr;
  size_t bytes = 0;
};

struct Step {
  std::vector<Op> ops;
};

struct Schedule {
  // Every schedule borrows its scratch from a pool (the communicator's), so
  // that a repeated large call reuses its pages.
  explicit Schedule(ScratchPool& pool) : pool_(&pool) {}

  std::string name;  // "allreduce/ring", for logs and timeouts
  lanesDataType_t type = lanesUint8;
  RedOpKind redop = RedOpKind::Sum;  // combine used by *Reduce* ops
  // How float32 payloads cross the transports (kernels/cpu/wire_codec.h):
  // not Native only for float32 sums on the ring, where each forwarded
  // partial sum is rounded to the wire format in place, so that every rank
  // ends with the same bits.
  WireFormat wire = WireFormat::Native;
  // An Arena* op's first chunk in the communicator's arena, the same on every
  // rank (transport/shm/sum_arena.h: calls reserve chunks in call order).
  uint32_t arenaFirstChunk = 0;
  int nranks = 1;  // the communicator's size: Arena* ops cut their chunks by it
  std::vector<Step> steps;
  // Scratch the schedule's ops point into, uninitialised (every op writes
  // before it reads), given back to the pool when the schedule goes.
  std::vector<ScratchBuffer> scratch;

  std::byte* allocScratch(size_t bytes) {
    scratch.push_back(pool_->take(bytes));
    return scratch.back().data();
  }
  Step& addStep() { return steps.emplace_back(); }

 private:
  ScratchPool* pool_;
};

}  // namespace lanes
