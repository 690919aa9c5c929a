// The P2P channel (transport/channel/stage_channel.h): each rank's slots in
// its own GPU memory (ipc_slots.h), which its peers read and write with
// copy-engine copies; the counters stay in the host-staging arena's flags
// page (arena.h). Each rank's slot holds its own pieces of a reduction and
// its own reduced segment: readers copy from every peer's block.
#include <memory>
#include <string>
#include <utility>

#include "base/log.h"
#include "transport/channel/stage_channel.h"
#include "transport/hoststage/arena.h"
#include "transport/p2p/ipc_slots.h"

namespace lanes {
namespace {

// Bytes of the pair slots one receiver holds in GPU memory
// (LANES_PROTO naming p2p_pairs): kPairSlots per sender.
size_t pairSlotsPerReceiver(const StageArenaLayout& l) {
  return static_cast<size_t>(l.nranks - 1) * StageArenaLayout::kPairSlots * l.pairChunkBytes;
}

class P2pStageChannel final : public StageChannel {
 public:
  P2pStageChannel(std::unique_ptr<StageArena> arena, std::unique_ptr<IpcSlots> slots,
                  StageChannelContext context)
      : StageChannel(arena.get(), std::move(context)),
        arena_(std::move(arena)),
        slots_(std::move(slots)) {}

  // A rank's block: its K input slots, its K result slots, then (pair slots
  // in GPU memory) kPairSlots per sender to it, in rank order without itself.
  std::byte* inputSlot(int rank, int slot) const override {
    return slots_->base(rank) + static_cast<size_t>(slot) * layout().chunkBytes;
  }
  std::byte* resultSlot(int owner, int slot) const override {
    const StageArenaLayout& l = layout();
    return slots_->base(owner) + static_cast<size_t>(l.slots + slot) * l.chunkBytes;
  }
  std::byte* pairSlot(int sender, int receiver, int slot) const override {
    const StageArenaLayout& l = layout();
    if (l.pairHostData) return arena_->pairSlot(sender, receiver, slot);
    const size_t senderIndex = static_cast<size_t>(sender < receiver ? sender : sender - 1);
    return slots_->base(receiver) + 2 * static_cast<size_t>(l.slots) * l.chunkBytes +
           (senderIndex * StageArenaLayout::kPairSlots + static_cast<size_t>(slot)) *
               l.pairChunkBytes;
  }
  bool inbox() const override { return false; }
  bool sharedResultSlot() const override { return false; }
  bool slotsInGpuMemory() const override { return true; }
  std::string route(int peer) const override { return slots_->route(peer); }

  void release(const StageChannelEnd& end) override {
    const int rank = context().rank;
    if (end.drained && !end.failed &&
        !peersConsumed(end.lastChunk, Deadline::after(context().timeoutSeconds))) {
      LANES_WARN(Init, rank,
                 "destroying the communicator before every peer finished reading this rank's GPU "
                 "slots; keeping them allocated");
      slots_->leak();
    }
    if (end.failed || !end.drained) slots_->leak();  // a peer may still read them
    if (pairSlotsInGpuMemory() && !sendersFinished(*end.received)) {
      // Senders write into this block: one that sent more than this rank took
      // (or a poisoned counter) may still be writing. Keep it allocated.
      LANES_WARN(Init, rank,
                 "destroying the communicator while a peer's send into this rank's GPU pair "
                 "slots was not received; keeping them allocated");
      slots_->leak();
    }
    if (!end.drained) leakArena();
  }

 private:
  // Declared first, destroyed last: the IPC block goes before the arena.
  std::unique_ptr<StageArena> arena_;
  std::unique_ptr<IpcSlots> slots_;
};

}  // namespace

size_t p2pStageBlockBytes(const StageArenaLayout& layout, bool pairSlots) {
  return 2 * static_cast<size_t>(layout.slots) * layout.chunkBytes +
         (pairSlots ? pairSlotsPerReceiver(layout) : 0);
}

std::unique_ptr<StageChannel> makeP2pStageChannel(std::unique_ptr<StageArena> arena,
                                                  std::unique_ptr<IpcSlots> slots,
                                                  StageChannelContext context) {
  return std::make_unique<P2pStageChannel>(std::move(arena), std::move(slots), std::move(context));
}

}  // namespace lanes
