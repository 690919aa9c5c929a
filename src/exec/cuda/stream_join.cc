#include "exec/cuda/stream_join.h"

#include <algorithm>

#include "base/cuda_check.h"

namespace lanes {

std::vector<cudaStream_t> otherStreams(const std::vector<Request>& requests, cudaStream_t stream) {
  std::vector<cudaStream_t> others;
  for (const Request& r : requests)
    if (r.stream != stream && std::find(others.begin(), others.end(), r.stream) == others.end())
      others.push_back(r.stream);
  return others;
}

Status streamWaits(cudaStream_t to, cudaStream_t from) {
  cudaEvent_t ev = nullptr;
  LANES_CUDA_RETURN(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaError_t err = cudaEventRecord(ev, from);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(to, ev, 0);
  cudaEventDestroy(ev);  // deferred by CUDA until the recorded work is done
  return cudaStatus(err, "cudaEventRecord / cudaStreamWaitEvent (joining a group's streams)");
}

Status joinStreams(cudaStream_t stream, const std::vector<cudaStream_t>& others) {
  for (cudaStream_t s : others) LANES_RETURN_IF_ERROR(streamWaits(stream, s));
  return Status::ok();
}

Status forkStreams(cudaStream_t stream, const std::vector<cudaStream_t>& others) {
  for (cudaStream_t s : others) LANES_RETURN_IF_ERROR(streamWaits(s, stream));
  return Status::ok();
}

}  // namespace lanes
