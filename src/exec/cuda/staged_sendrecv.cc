// Device send/recv on the host-staged path: no CPU thread between the GPUs.
// Every ordered pair (sender s, receiver d) of the host owns kPairSlots slots
// of pairChunkBytes and two counters of the stage channel (stage_channel.h;
// the slots in the shared arena, or with the p2p_pairs entry (LANES_PROTO) in the
// receiver's GPU memory):
//   send, chunk q of the pair (slot q mod K), on the sender's down_:
//     wait acked[s][d] >= q + 1 - K (the slot's last chunk was taken out);
//     D2H the chunk into the slot; sent[s][d] = q + 1.
//   receive, chunk q of the pair, on the receiver's up_:
//     wait sent[s][d] >= q + 1; H2D the slot into the buffer; acked[s][d] = q + 1.
// Both ends cut messages into the same chunks (the counts of a send and its
// receive match, as NCCL requires), so they count chunks alike. Messages to one
// peer go in order; a group's channels (direction, peer) are interleaved
// chunk by chunk, so chunk k of every channel is issued before chunk k + 1 of
// any: when both ends post a pair in matching groups, a sender parked on a
// full pair never holds back a receive the parked pair's receiver waits for,
// whatever order the group lists its peers in (each wait is for a chunk at
// most K rounds back). The channels share down_ and up_, so they advance
// together (docs/gpu_data_path.md, "Send/recv", says when that stalls).
// A receive into bytes a send of the same group reads (in place) waits for
// that send's chunk to have gone down; each round issues its sends first, so
// the usual case (the same buffer and count both ways) orders chunk by chunk.
#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "base/cuda_check.h"
#include "exec/staged_chunking.h"
#include "exec/cuda/staged_collectives.h"

namespace lanes {
namespace {

// One chunk of one message.
struct PairChunk {
  const Request* request = nullptr;
  size_t offset = 0;
  size_t bytes = 0;
};

// A channel: one direction to or from one peer, its chunks in message order.
using ChannelKey = std::pair<bool, int>;  // (isSend, peer)

std::map<ChannelKey, std::vector<PairChunk>> cutIntoChannels(const std::vector<Request>& requests,
                                                             size_t chunkBytes) {
  std::map<ChannelKey, std::vector<PairChunk>> channels;
  for (const Request& r : requests) {
    std::vector<PairChunk>& chunks = channels[{r.isSend, r.peer}];
    for (size_t off = 0; off < r.bytes; off += chunkBytes)
      chunks.push_back({&r, off, std::min(chunkBytes, r.bytes - off)});
  }
  return channels;
}

bool overlaps(const std::byte* a, size_t aBytes, const std::byte* b, size_t bBytes) {
  return a < b + bBytes && b < a + aBytes;
}

// For each receive chunk (channel, index): whether it must wait for sends
// already issued. An overlapped send chunk issued in a later round cannot be
// waited for without stalling the pipeline: refused.
Status receivesAfterSends(const std::vector<Request>& requests,
                          const std::map<ChannelKey, std::vector<PairChunk>>& channels,
                          std::map<ChannelKey, std::vector<bool>>* waits) {
  for (const auto& [key, chunks] : channels)
    if (!key.first) (*waits)[key].assign(chunks.size(), false);
  // Whole messages first: most groups overlap nowhere, and then no chunk
  // needs comparing.
  bool anyOverlap = false;
  for (const Request& recv : requests)
    for (const Request& send : requests)
      anyOverlap =
          anyOverlap || (!recv.isSend && send.isSend &&
                         overlaps(static_cast<const std::byte*>(recv.recvbuf), recv.bytes,
                                  static_cast<const std::byte*>(send.sendbuf), send.bytes));
  if (!anyOverlap) return Status::ok();
  for (const auto& [recvKey, recvChunks] : channels) {
    if (recvKey.first) continue;
    std::vector<bool>& w = (*waits)[recvKey];
    for (size_t k = 0; k < recvChunks.size(); ++k) {
      const PairChunk& rc = recvChunks[k];
      auto* dst = static_cast<const std::byte*>(rc.request->recvbuf) + rc.offset;
      for (const auto& [sendKey, sendChunks] : channels) {
        if (!sendKey.first) continue;
        for (size_t j = 0; j < sendChunks.size(); ++j) {
          const PairChunk& sc = sendChunks[j];
          auto* src = static_cast<const std::byte*>(sc.request->sendbuf) + sc.offset;
          if (!overlaps(dst, rc.bytes, src, sc.bytes)) continue;
          if (j > k)
            return invalidUsage(
                "a device receive from rank " + std::to_string(recvKey.second) +
                " overlaps bytes that a send to rank " + std::to_string(sendKey.second) +
                " of the same group reads only in a later chunk of its channel; the host-staged "
                "path orders an in-place receive only after send chunks it has already issued. "
                "Use separate buffers (or one buffer and the same count both ways).");
          w[k] = true;
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status StagedCollectives::enqueuePairs(const std::vector<Request>& requests,
                                       StagedWatchdog::Batch* batch) {
  const StageChannel& ch = *channel_;
  const StageArenaLayout& layout = ch.layout();
  constexpr uint64_t kSlots = StageArenaLayout::kPairSlots;
  const int me = comm_.rank();
  const auto channels = cutIntoChannels(requests, layout.pairChunkBytes);
  std::map<ChannelKey, std::vector<bool>> waitForSends;
  if (Status refused = receivesAfterSends(requests, channels, &waitForSends); !refused) {
    // The peers have enqueued their side of this group already: their pair
    // counters would run ahead of this rank's. The communicator cannot go on.
    comm_.fail(refused.code(), refused.message());
    return refused;
  }

  // What the watchdog names if the batch stalls: each channel's counter and
  // the value this batch waits for.
  struct Expect {
    bool isSend;
    int peer;
    uint32_t target;  // the counter value the streams wait for
    uint32_t last;    // the pair's last chunk of this batch
  };
  auto expects = std::make_shared<std::vector<Expect>>();
  batch->label = "device send/recv (host-staged) with rank(s)";
  for (const auto& [key, chunks] : channels) {
    const auto [isSend, peer] = key;
    const uint64_t done = (isSend ? pairSent_ : pairReceived_)[static_cast<size_t>(peer)];
    // The sender's streams finish once all but the last kSlots chunks were taken.
    const uint64_t last = done + chunks.size();
    const uint64_t target = isSend ? (last > kSlots ? last - kSlots : 0) : last;
    expects->push_back({isSend, peer, static_cast<uint32_t>(target), static_cast<uint32_t>(last)});
    batch->label += std::string(" ") + (isSend ? "to " : "from ") + std::to_string(peer);
  }
  const StageChannel* stage = channel_.get();
  batch->lag = [stage, expects, me] {
    std::string out;
    for (const Expect& e : *expects) {
      const uint32_t now =
          StageChannel::read(e.isSend ? stage->pairCounter(PairFlag::Acked, me, e.peer)
                                      : stage->pairCounter(PairFlag::Sent, e.peer, me));
      if (static_cast<int32_t>(now - e.target) >= 0) continue;
      if (!out.empty()) out += "; ";
      out += e.isSend ? "rank " + std::to_string(e.peer) + " has taken " + std::to_string(now) +
                            " of the " + std::to_string(e.last) +
                            " chunks this rank sends it (its streams wait for " +
                            std::to_string(e.target) + ")"
                      : "rank " + std::to_string(e.peer) + " has sent " + std::to_string(now) +
                            " of the " + std::to_string(e.last) + " chunks this rank expects";
    }
    return out.empty() ? std::string("every pair reached its last chunk") : out;
  };

  size_t rounds = 0;
  for (const auto& [key, chunks] : channels) rounds = std::max(rounds, chunks.size());
  for (size_t k = 0; k < rounds; ++k) {
    // Sends first (std::map puts receives, isSend = false, first).
    for (const bool sends : {true, false}) {
      for (const auto& [key, chunks] : channels) {
        const auto [isSend, peer] = key;
        if (isSend != sends || k >= chunks.size()) continue;
        const PairChunk& c = chunks[k];
        // Counted before anything goes on a stream: a failure from here on
        // leaves the pair's sequences out of step, so enqueue() fails the
        // communicator rather than let the next call read a stale slot.
        ++pairChunksIssued_;
        if (isSend) {
          uint64_t& q = pairSent_[static_cast<size_t>(peer)];
          const int slot = static_cast<int>(q % kSlots);
          if (q >= kSlots)
            LANES_RETURN_IF_ERROR(ch.await(down_, ch.pairCounter(PairFlag::Acked, me, peer),
                                           static_cast<uint32_t>(q + 1 - kSlots)));
          LANES_CUDA_RETURN(
              cudaMemcpyAsync(ch.pairSlot(me, peer, slot),
                              static_cast<const std::byte*>(c.request->sendbuf) + c.offset, c.bytes,
                              cudaMemcpyDefault, down_));
          ++q;
          watchdog_->noteChunk(static_cast<uint32_t>(q));
          LANES_RETURN_IF_ERROR(
              ch.post(down_, ch.pairCounter(PairFlag::Sent, me, peer), static_cast<uint32_t>(q)));
        } else {
          uint64_t& q = pairReceived_[static_cast<size_t>(peer)];
          const int slot = static_cast<int>(q % kSlots);
          if (waitForSends.at(key)[k]) {
            LANES_CUDA_RETURN(cudaEventRecord(downDone_, down_));
            LANES_CUDA_RETURN(cudaStreamWaitEvent(up_, downDone_, 0));
          }
          LANES_RETURN_IF_ERROR(ch.await(up_, ch.pairCounter(PairFlag::Sent, peer, me),
                                         static_cast<uint32_t>(q + 1)));
          LANES_CUDA_RETURN(cudaMemcpyAsync(static_cast<std::byte*>(c.request->recvbuf) + c.offset,
                                            ch.pairSlot(peer, me, slot), c.bytes, cudaMemcpyDefault,
                                            up_));
          ++q;
          watchdog_->noteChunk(static_cast<uint32_t>(q));
          LANES_RETURN_IF_ERROR(
              ch.post(up_, ch.pairCounter(PairFlag::Acked, peer, me), static_cast<uint32_t>(q)));
        }
      }
    }
  }
  // The batch ends on up_: it waits for the sends too.
  LANES_CUDA_RETURN(cudaEventRecord(downDone_, down_));
  LANES_CUDA_RETURN(cudaStreamWaitEvent(up_, downDone_, 0));
  return Status::ok();
}

}  // namespace lanes
