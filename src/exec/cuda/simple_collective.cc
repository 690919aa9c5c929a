// A mid-size device collective on the simple kernel (kernels/cuda/simple_collective.h):
// one launch on the caller's stream through the LL arena's simple slots, no
// host thread, no copy engine (docs/gpu_data_path.md, "Mid-size messages").
#include "kernels/cuda/simple_collective.h"

#include "exec/cuda/device_scope.h"
#include "exec/cuda/ll_allreduce.h"

namespace lanes {

Status LlAllReduce::enqueueSimple(const Request& r, cudaStream_t stream) {
  DeviceScope device(comm_.cudaDev());
  bool capturing = false;
  LANES_RETURN_IF_ERROR(orderAfterLast(stream, &capturing));
  cuda::LlAllReduceArgs a = argsOf(r);
  a.slots = arena_ ? static_cast<unsigned char*>(arena_->device()) + simpleRegion_ : nullptr;
  a.slotBytes = simpleSlotBytes_;
  a.maxBlocks = simpleMaxBlocks_;
  LANES_RETURN_IF_ERROR(noteLaunch(cuda::launchSimpleCollective(a, simpleFlagBytes_, stream),
                                   stream, capturing, "simple collective kernel"));
  ++simpleCalls_[static_cast<size_t>(r.args.coll)];
  return Status::ok();
}

}  // namespace lanes
