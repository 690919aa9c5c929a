// One client for bench/gpu/mps_clients.sh: creates a context on device 0, takes some
// device and pinned host memory, runs a kernel, holds all of it while the other
// clients start, and prints what it got, so a failure names the step and the error.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

__global__ void touch(int* p) { p[threadIdx.x] = static_cast<int>(threadIdx.x); }

bool ok(cudaError_t e, const char* step) {
  if (e == cudaSuccess) return true;
  std::printf("client %d: %s failed: %s (%s)\n", static_cast<int>(getpid()), step,
              cudaGetErrorName(e), cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int holdMs = argc > 1 ? std::atoi(argv[1]) : 3000;
  const size_t bytes = size_t{64} << 20;
  if (!ok(cudaSetDevice(0), "cudaSetDevice") || !ok(cudaFree(nullptr), "context creation"))
    return 1;
  void* dev = nullptr;
  void* host = nullptr;
  if (!ok(cudaMalloc(&dev, bytes), "cudaMalloc 64 MiB") ||
      !ok(cudaHostAlloc(&host, bytes, cudaHostAllocPortable), "cudaHostAlloc 64 MiB"))
    return 1;
  touch<<<1, 32>>>(static_cast<int*>(dev));
  if (!ok(cudaDeviceSynchronize(), "kernel")) return 1;
  size_t freeBytes = 0, total = 0;
  cudaMemGetInfo(&freeBytes, &total);
  usleep(static_cast<useconds_t>(holdMs) * 1000);
  const char* conns = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf("client %d: ok (CUDA_DEVICE_MAX_CONNECTIONS=%s, %zu of %zu MiB free)\n",
              static_cast<int>(getpid()), conns != nullptr ? conns : "unset", freeBytes >> 20,
              total >> 20);
  cudaFreeHost(host);
  cudaFree(dev);
  return 0;
}
