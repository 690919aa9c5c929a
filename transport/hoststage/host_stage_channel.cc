// The host-staged channel (transport/channel/stage_channel.h): every slot and
// counter in the shared arena (arena.h). Rank s's input slot is its inbox: a
// reduction's writers each put their piece for s there, so s uploads them in
// two copies whatever the rank count; the owners' reduced segments share one
// result slot, so each rank brings the others' up in two copies too.
#include <memory>
#include <string>
#include <utility>

#include "transport/channel/stage_channel.h"
#include "transport/hoststage/arena.h"

namespace lanes {
namespace {

class HostStageChannel final : public StageChannel {
 public:
  HostStageChannel(std::unique_ptr<StageArena> arena, StageChannelContext context)
      : StageChannel(arena.get(), std::move(context)), arena_(std::move(arena)) {}

  std::byte* inputSlot(int rank, int slot) const override { return arena_->input(rank, slot); }
  std::byte* resultSlot(int, int slot) const override { return arena_->result(slot); }
  std::byte* pairSlot(int sender, int receiver, int slot) const override {
    return arena_->pairSlot(sender, receiver, slot);
  }
  bool inbox() const override { return true; }
  bool sharedResultSlot() const override { return true; }
  bool slotsInGpuMemory() const override { return false; }
  std::string route(int) const override { return "host staging in shared memory"; }

  void release(const StageChannelEnd& end) override {
    // Peers' streams use their own mappings of the segment, which outlive
    // this one: only this rank's streams may still touch this mapping.
    if (!end.drained) leakArena();
  }

 private:
  std::unique_ptr<StageArena> arena_;
};

}  // namespace

std::unique_ptr<StageChannel> makeHostStageChannel(std::unique_ptr<StageArena> arena,
                                                   StageChannelContext context) {
  return std::make_unique<HostStageChannel>(std::move(arena), std::move(context));
}

}  // namespace lanes
