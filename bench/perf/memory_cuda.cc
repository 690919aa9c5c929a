// Device-memory ranks (--memory device): cudaMalloc'd buffers on the rank's
// GPU, pinned host mirrors for the data check, one non-blocking stream per
// rank. Only stream-ordered calls between setup and teardown: a device-wide
// synchronisation (cudaMemcpy, cudaFree) while a peer rank of this process
// has a collective in flight could wait on that peer's parked stream
// (docs/gpu_data_path.md, "Several ranks on one GPU").
#include <cstdlib>
#include <cstring>
#include <string>

#include "perf/memory.h"

#if LANES_PERF_CUDA
#include <cuda_runtime.h>

#include "perf/cuda_owners.h"
#endif

namespace lanes::perf {

void requestDeviceConnections(int ranksInProcess) {
  if (ranksInProcess > 1) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
}

#if LANES_PERF_CUDA

namespace {

Status check(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::ok();
  return cudaError(std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                   cudaGetErrorString(err) + ")");
}
#define PERF_CUDA(call) LANES_RETURN_IF_ERROR(check((call), #call))

struct GraphExecDestroy {
  void operator()(CUgraphExec_st* g) const { cudaGraphExecDestroy(g); }
};

class DeviceMemory final : public RankMemory {
 public:
  Status init(size_t sendBytes, size_t recvBytes, bool nullStream) {
    onDevice_ = true;
    nullStream_ = nullStream;
    PERF_CUDA(cudaGetDevice(&device_));
    cudaStream_t s = nullptr;
    PERF_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    stream_.reset(s);
    LANES_RETURN_IF_ERROR(allocate(sendBytes, &sendDev_, &sendHost_));
    LANES_RETURN_IF_ERROR(allocate(recvBytes, &recvDev_, &recvHost_));
    send_ = sendDev_.get();
    recv_ = recvDev_.get();
    hostSend_ = sendHost_.get();
    hostRecv_ = recvHost_.get();
    PERF_CUDA(cudaStreamSynchronize(stream()));
    return Status::ok();
  }

  ~DeviceMemory() override {
    // Teardown must not leave work of ours running; the driver ended with a
    // barrier, so no peer has a collective in flight either.
    if (stream_) cudaStreamSynchronize(stream_.get());
    graph_.reset();
  }

  cudaStream_t stream() const override { return nullStream_ ? nullptr : stream_.get(); }

  Status copy(void* dst, const void* src, size_t bytes) override {
    PERF_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
    return Status::ok();
  }

  Status upload(size_t sendBytes, size_t recvBytes) override {
    if (sendBytes > 0) {
      PERF_CUDA(cudaMemcpyAsync(send_, hostSend_, sendBytes, cudaMemcpyHostToDevice, stream()));
    }
    if (recvBytes > 0) {
      PERF_CUDA(cudaMemcpyAsync(recv_, hostRecv_, recvBytes, cudaMemcpyHostToDevice, stream()));
    }
    return wait();
  }

  Status download(size_t recvBytes) override {
    if (recvBytes > 0) {
      PERF_CUDA(cudaMemcpyAsync(hostRecv_, recv_, recvBytes, cudaMemcpyDeviceToHost, stream()));
    }
    return wait();
  }

  Status wait() override {
    PERF_CUDA(cudaStreamSynchronize(stream()));
    return Status::ok();
  }

  Status beginCapture() override {
    graph_.reset();
    // Thread-local: the other rank threads keep making their own calls.
    PERF_CUDA(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    return Status::ok();
  }

  Status endCapture(bool keep) override {
    cudaGraph_t graph = nullptr;
    PERF_CUDA(cudaStreamEndCapture(stream(), &graph));
    Status st = Status::ok();
    if (keep && graph != nullptr) {
      cudaGraphExec_t exec = nullptr;
      st = check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
      if (st) graph_.reset(exec);
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    return st;
  }

  Status launchGraph() override {
    if (!graph_) return invalidUsage("no captured graph to launch");
    PERF_CUDA(cudaGraphLaunch(graph_.get(), stream()));
    return Status::ok();
  }

 private:
  template <typename DevPtr, typename HostPtr>
  Status allocate(size_t bytes, DevPtr* dev, HostPtr* host) {
    const size_t n = bytes > 0 ? bytes : 256;  // a valid pointer even for 0 bytes
    void* d = nullptr;
    cudaError_t err = cudaMalloc(&d, n);
    if (err != cudaSuccess) {
      return cudaError("cudaMalloc of " + std::to_string(n) + " bytes on GPU " +
                       std::to_string(device_) + " failed: " + cudaGetErrorString(err) +
                       "; lower -e (maxbytes) or run fewer ranks per GPU.");
    }
    dev->reset(static_cast<uint8_t*>(d));
    void* h = nullptr;
    err = cudaMallocHost(&h, n);
    if (err != cudaSuccess) {
      return cudaError("cudaMallocHost of " + std::to_string(n) +
                       " bytes failed: " + cudaGetErrorString(err) + "; lower -e (maxbytes).");
    }
    host->reset(static_cast<uint8_t*>(h));
    std::memset(h, 0, n);
    PERF_CUDA(cudaMemsetAsync(d, 0, n, stream()));
    return Status::ok();
  }

  int device_ = -1;
  bool nullStream_ = false;
  Stream stream_;
  std::unique_ptr<uint8_t, DeviceFree> sendDev_, recvDev_;
  std::unique_ptr<uint8_t, PinnedFree> sendHost_, recvHost_;
  std::unique_ptr<CUgraphExec_st, GraphExecDestroy> graph_;
};

}  // namespace

bool deviceMemoryBuilt() { return true; }

int visibleGpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // "no driver" / "no device" is an answer, not an error
    return 0;
  }
  return n;
}

Status selectGpu(int gpu) {
  if (gpu < 0) return Status::ok();
  PERF_CUDA(cudaSetDevice(gpu));
  return Status::ok();
}

std::string gpuLabel(int gpu) {
  if (gpu < 0) return "[host] host memory";
  char bus[32] = "?";
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), gpu) != cudaSuccess) cudaGetLastError();
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, gpu) != cudaSuccess) {
    cudaGetLastError();
    return std::string("[") + bus + "] ?";
  }
  return std::string("[") + bus + "] " + prop.name;
}

Status makeDeviceMemory(size_t sendBytes, size_t recvBytes, std::unique_ptr<RankMemory>* out,
                        bool nullStream) {
  auto m = std::make_unique<DeviceMemory>();
  LANES_RETURN_IF_ERROR(m->init(sendBytes, recvBytes, nullStream));
  *out = std::move(m);
  return Status::ok();
}

#else  // no CUDA data path in this build

bool deviceMemoryBuilt() { return false; }
int visibleGpus() { return 0; }
Status selectGpu(int gpu) {
  if (gpu < 0) return Status::ok();
  return invalidUsage("this build has no CUDA data path, so GPU " + std::to_string(gpu) +
                      " cannot be used; use --memory host.");
}
std::string gpuLabel(int) { return "[host] host memory"; }
Status makeDeviceMemory(size_t, size_t, std::unique_ptr<RankMemory>*, bool) {
  return invalidUsage(
      "--memory device needs the CUDA data path, which this build does not have (configure with "
      "nvcc available and LANES_ENABLE_CUDA=ON); use --memory host.");
}

#endif

}  // namespace lanes::perf
