// StageArena: the host-staged transport's shared memory. One POSIX shm
// segment per communicator (all ranks on one host), mapped by every rank and
// registered with CUDA, holding
//   - a flags page: per rank three counters (ready, reduced, consumed), each
//     on its own 64-byte line, written and awaited by GPU streams;
//   - input slots: nranks x slots x chunkBytes (what a rank stages: its
//     chunk, or for the reductions, rank s's slot is its inbox where every
//     rank puts its piece of segment s);
//   - result slots: slots x chunkBytes (each rank writes its reduced segment);
//   - pair slots for send/recv: for every ordered pair (sender, receiver)
//     kPairSlots x pairChunkBytes, with two counters per pair (sent, acked)
//     in the flags page; in host memory unless P2P holds them too
//     (pairHostData).
// Which of these a communicator uses, and how, is its staged channel's
// business (transport/channel/stage_channel.h), which also owns the arena.
// The segment is a HostArena (host_arena.h: created, mapped, registered and
// agreed on like the LL kernel's lines); its pages are placed on NUMA nodes
// by arena_placement.h before they are allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "transport/hoststage/host_arena.h"

namespace lanes {

enum class StageFlag : int { Ready = 0, Reduced = 1, Consumed = 2 };
// A pair's counters: chunks the sender has put into the pair's slots, and
// chunks the receiver has taken out of them.
enum class PairFlag : int { Sent = 0, Acked = 1 };

struct StageArenaConfig {
  size_t chunkBytes = size_t{16} << 20;  // LANES_STAGE_CHUNK_BYTES
  int slots = 4;                         // LANES_STAGE_SLOTS
  // LANES_STAGE_PAIR_CHUNK_BYTES (2 MiB when read from it); 0: no pair
  // slots, so device send/recv go through the proxy.
  size_t pairChunkBytes = 0;
  // false: the pair slots live in the receivers' GPU memory (transport/p2p,
  // LANES_PROTO naming p2p_pairs) and the segment holds their counters only.
  bool pairHostData = true;
  // false: the slots live in GPU memory (transport/p2p) and the segment holds
  // the flags page only; input() and result() must not be used then.
  bool hostData = true;
};

// Offsets inside the segment; identical on every rank.
struct StageArenaLayout {
  static constexpr size_t kFlagLine = 64;
  static constexpr size_t kPage = 4096;
  // Two slots per pair: the sender fills one while the receiver empties the other.
  static constexpr int kPairSlots = 2;
  int nranks = 0;
  int slots = 0;
  size_t chunkBytes = 0;
  size_t pairChunkBytes = 0;
  bool pairHostData = true;
  size_t flagsBytes = 0;  // whole pages

  bool hostData = true;

  // Inline (no CUDA): the placement unit tests build it without the GPU path.
  StageArenaLayout(int n, const StageArenaConfig& config)
      : nranks(n),
        slots(config.slots),
        chunkBytes(config.chunkBytes),
        pairChunkBytes(config.pairChunkBytes),
        pairHostData(config.pairHostData),
        hostData(config.hostData) {
    const size_t lines = static_cast<size_t>(n) * 3 + pairs() * 2;
    flagsBytes = (lines * kFlagLine + kPage - 1) / kPage * kPage;
  }
  size_t flagOffset(StageFlag f, int rank) const {
    return (static_cast<size_t>(rank) * 3 + static_cast<size_t>(f)) * kFlagLine;
  }
  // Ordered pairs with slots (none without pair chunks), numbered sender-major.
  size_t pairs() const {
    return pairChunkBytes == 0 ? 0 : static_cast<size_t>(nranks) * static_cast<size_t>(nranks - 1);
  }
  size_t pairIndex(int sender, int receiver) const {
    return static_cast<size_t>(sender) * static_cast<size_t>(nranks - 1) +
           static_cast<size_t>(receiver < sender ? receiver : receiver - 1);
  }
  size_t pairFlagOffset(PairFlag f, int sender, int receiver) const {
    return (static_cast<size_t>(nranks) * 3 + pairIndex(sender, receiver) * 2 +
            static_cast<size_t>(f)) *
           kFlagLine;
  }
  // The pair slots follow the collective slots (or the flags, without them).
  size_t pairsOffset() const { return hostData ? resultOffset(slots) : flagsBytes; }
  size_t pairSlotOffset(int sender, int receiver, int slot) const {
    return pairsOffset() +
           (pairIndex(sender, receiver) * kPairSlots + static_cast<size_t>(slot)) * pairChunkBytes;
  }
  size_t pairBytes() const { return pairHostData ? pairs() * kPairSlots * pairChunkBytes : 0; }
  size_t inputOffset(int rank, int slot) const {
    return flagsBytes + (static_cast<size_t>(rank) * slots + slot) * chunkBytes;
  }
  size_t resultOffset(int slot) const {
    return flagsBytes + (static_cast<size_t>(nranks) * slots + slot) * chunkBytes;
  }
  // Input and result slots, as one block (the same layout in host or GPU memory).
  size_t dataBytes() const { return resultOffset(slots) - flagsBytes; }
  size_t totalBytes() const { return pairsOffset() + pairBytes(); }
};

class StageArena {
 public:
  // Collective over the communicator's bootstrap. On failure every rank
  // returns an error (the same decision everywhere); *fatal is set when the
  // bootstrap itself failed (a peer died or timed out), i.e. when the ranks
  // may not agree and the communicator must be failed rather than fall back.
  // rankNodes: every rank's GPU NUMA node (-1 unknown), size nranks or empty;
  // the creator places the pages by stageArenaPlacement before they exist.
  static Status create(Bootstrap& bootstrap, const std::string& commTag,
                       const StageArenaConfig& config, const std::vector<int>& rankNodes,
                       Deadline deadline, std::unique_ptr<StageArena>* out, bool* fatal);
  StageArena(const StageArena&) = delete;
  StageArena& operator=(const StageArena&) = delete;

  const StageArenaLayout& layout() const { return layout_; }
  std::byte* input(int rank, int slot) const { return base() + layout_.inputOffset(rank, slot); }
  std::byte* result(int slot) const { return base() + layout_.resultOffset(slot); }
  std::byte* pairSlot(int sender, int receiver, int slot) const {
    return base() + layout_.pairSlotOffset(sender, receiver, slot);
  }
  volatile uint32_t* flag(StageFlag f, int rank) const {
    return reinterpret_cast<volatile uint32_t*>(base() + layout_.flagOffset(f, rank));
  }
  volatile uint32_t* pairFlag(PairFlag f, int sender, int receiver) const {
    return reinterpret_cast<volatile uint32_t*>(base() +
                                                layout_.pairFlagOffset(f, sender, receiver));
  }
  // The arena is given up without unregistering or unmapping: used when a
  // stream may still touch it after the destroy deadline.
  void leak() { memory_->leak(); }

 private:
  StageArena(const StageArenaLayout& layout, std::unique_ptr<HostArena> memory)
      : layout_(layout), memory_(std::move(memory)) {}
  std::byte* base() const { return memory_->host(); }

  StageArenaLayout layout_;
  std::unique_ptr<HostArena> memory_;
};

}  // namespace lanes
