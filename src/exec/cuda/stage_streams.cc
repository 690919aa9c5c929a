#include "exec/cuda/stage_streams.h"

#include "base/cuda_check.h"

namespace lanes {

Status StageStreams::create(std::unique_ptr<StageStreams>* out) {
  std::unique_ptr<StageStreams> s(new StageStreams());
  for (cudaStream_t* stream : {&s->down, &s->upload, &s->reduce, &s->up})
    LANES_CUDA_RETURN(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
  *out = std::move(s);
  return Status::ok();
}

StageStreams::~StageStreams() {
  // Deferred by CUDA until the work on them has run.
  for (cudaStream_t s : {down, upload, reduce, up})
    if (s != nullptr) cudaStreamDestroy(s);
}

Status SharedStageStreams::get(int device, StageStreams** out) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<StageStreams>& set = byDevice_[device];
  if (!set) LANES_RETURN_IF_ERROR(StageStreams::create(&set));
  *out = set.get();
  return Status::ok();
}

}  // namespace lanes
