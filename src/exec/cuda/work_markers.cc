// The flight recorder's completion markers: a ring of events recorded after
// each batch of device work, read when a dump asks what has passed.
#include <cuda_runtime.h>

#include <mutex>
#include <vector>

#include "exec/comm_config.h"
#include "exec/comm_view.h"
#include "exec/cuda/device_scope.h"
#include "exec/device_path.h"

namespace lanes {
namespace {

// Enough for the batches a stream holds at once; an entry whose marker was
// taken again is settled by the order of its stream (flight_recorder.h).
constexpr size_t kMarkers = 64;

class CudaWorkMarkers final : public WorkMarkers {
 public:
  explicit CudaWorkMarkers(int device) : device_(device) {}
  ~CudaWorkMarkers() override {
    DeviceScope scope(device_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  Status create() {
    for (size_t i = 0; i < kMarkers; ++i) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        return cudaError("creating the flight recorder's completion events failed");
      }
      events_.push_back(e);
    }
    used_.assign(kMarkers, false);
    return Status::ok();
  }
  DeviceMarker mark(cudaStream_t stream) {
    DeviceMarker m;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
      cudaGetLastError();
      return m;
    }
    if (capture != cudaStreamCaptureStatusNone) {
      m.captured = true;
      return m;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t i = next_++ % events_.size();
    DeviceScope scope(device_);
    if (cudaEventRecord(events_[i], stream) != cudaSuccess) {
      cudaGetLastError();
      return m;
    }
    used_[i] = true;
    m.marker = static_cast<int32_t>(i);
    return m;
  }
  bool passedMarker(int32_t marker) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (marker < 0 || static_cast<size_t>(marker) >= events_.size() || !used_[marker]) return false;
    DeviceScope scope(device_);
    return passed(static_cast<size_t>(marker));
  }

 private:
  // A query during another thread's global-mode capture would invalidate
  // that capture; this one touches no captured stream.
  bool passed(size_t i) {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    const bool exchanged = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
    const cudaError_t e = cudaEventQuery(events_[i]);
    if (exchanged) cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess && e != cudaErrorNotReady) cudaGetLastError();
    return e == cudaSuccess;
  }
  int device_;
  std::mutex mutex_;
  std::vector<cudaEvent_t> events_;
  std::vector<bool> used_;
  size_t next_ = 0;
};

// Made at init before any call and kept until the communicator goes, so
// read without the paths' lock (a dump may run while a call holds it).
CudaWorkMarkers* markersOf(lanesComm* handle) {
  const CommView comm(handle);
  return static_cast<CudaWorkMarkers*>(comm.paths().markers.get());
}

}  // namespace

Status setUpWorkMarkers(lanesComm* handle) {
  const CommView comm(handle);
  if (comm.config().flightEntries == 0) return Status::ok();
  DeviceScope scope(comm.cudaDev());
  auto markers = std::make_unique<CudaWorkMarkers>(comm.cudaDev());
  LANES_RETURN_IF_ERROR(markers->create());
  std::lock_guard<std::mutex> lock(comm.paths().mutex);
  comm.paths().markers = std::move(markers);
  return Status::ok();
}

DeviceMarker markDeviceWork(lanesComm* comm, cudaStream_t stream) {
  CudaWorkMarkers* markers = markersOf(comm);
  return markers != nullptr ? markers->mark(stream) : DeviceMarker{};
}

bool deviceWorkPassed(lanesComm* comm, int32_t marker) {
  CudaWorkMarkers* markers = markersOf(comm);
  return markers != nullptr && markers->passedMarker(marker);
}

}  // namespace lanes
