#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "kernels/cuda/wire_codec.h"

namespace lanes::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kFrameBytes = WireCodec::kMaxFrameBytes;
// e4m3: a 16-byte header (the float scale, then zeros) and 1008 values a frame.
constexpr size_t kFp8Header = 16;
constexpr size_t kFp8FrameElems = kFrameBytes - kFp8Header;
constexpr float kE4m3Max = 448.0f;
constexpr uint8_t kE4m3Nan = 0x7f;

// bfloat16 frames have no header: the wire is the values, two bytes each.
__global__ void encodeBf16Kernel(const float* __restrict__ src, size_t n,
                                 __nv_bfloat16* __restrict__ wire) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    wire[i] = __float2bfloat16_rn(src[i]);
}

__global__ void decodeBf16Kernel(const uint16_t* __restrict__ wire, size_t n,
                                 float* __restrict__ dst) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = __uint_as_float(uint32_t{wire[i]} << 16);
}

// One block per frame: the frame's largest finite magnitude sets its scale
// (most / 448, or 1 for a frame of zeros or non-finite values only), then
// every value is scaled by the scale's inverse and rounded, saturating.
__global__ void encodeFp8Kernel(const float* __restrict__ src, size_t n,
                                uint8_t* __restrict__ wire) {
  __shared__ float warpMost[kThreads / 32];
  const size_t first = blockIdx.x * kFp8FrameElems;
  const int elems = static_cast<int>(min(kFp8FrameElems, n - first));
  const float* in = src + first;
  float most = 0;
  for (int i = threadIdx.x; i < elems; i += kThreads) {
    const float a = fabsf(in[i]);
    if (a <= FLT_MAX && a > most) most = a;  // NaN and infinity fail both tests
  }
  for (int d = 16; d > 0; d /= 2) most = fmaxf(most, __shfl_xor_sync(0xffffffffu, most, d));
  if (threadIdx.x % 32 == 0) warpMost[threadIdx.x / 32] = most;
  __syncthreads();
  most = 0;
  for (int w = 0; w < kThreads / 32; ++w) most = fmaxf(most, warpMost[w]);
  const float scale = most > 0 ? __fdiv_rn(most, kE4m3Max) : 1.0f;
  const float inverse = __fdiv_rn(1.0f, scale);
  uint8_t* frame = wire + blockIdx.x * kFrameBytes;
  if (threadIdx.x < kFp8Header / 4)
    reinterpret_cast<float*>(frame)[threadIdx.x] = threadIdx.x == 0 ? scale : 0.0f;
  uint8_t* codes = frame + kFp8Header;
  for (int i = threadIdx.x; i < elems; i += kThreads) {
    const float v = in[i];
    codes[i] = isinf(v) ? kE4m3Nan
                        : static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(v, inverse),
                                                                     __NV_SATFINITE, __NV_E4M3));
  }
}

__global__ void decodeFp8Kernel(const uint8_t* __restrict__ wire, size_t n,
                                float* __restrict__ dst) {
  const size_t first = blockIdx.x * kFp8FrameElems;
  const int elems = static_cast<int>(min(kFp8FrameElems, n - first));
  const uint8_t* frame = wire + blockIdx.x * kFrameBytes;
  const float scale = *reinterpret_cast<const float*>(frame);
  const uint8_t* codes = frame + kFp8Header;
  for (int i = threadIdx.x; i < elems; i += kThreads) {
    const __half h(__nv_cvt_fp8_to_halfraw(codes[i], __NV_E4M3));
    dst[first + i] = __fmul_rn(__half2float(h), scale);
  }
}

bool aligned(const void* p, size_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; }

// Element-wise kernels: enough blocks to fill the GPU, each thread a few values.
unsigned streamingBlocks(size_t n) {
  const size_t blocks = (n + kThreads * 4 - 1) / (kThreads * 4);
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

unsigned frames(size_t n) {
  return static_cast<unsigned>((n + kFp8FrameElems - 1) / kFp8FrameElems);
}

}  // namespace

int launchWireEncode(WireFormat format, const float* src, size_t elems, void* wire,
                     cudaStream_t stream) {
  if (elems == 0) return cudaSuccess;
  if (src == nullptr || wire == nullptr || !aligned(src, 4) || !aligned(wire, kFp8Header))
    return cudaErrorInvalidValue;
  switch (format) {
    case WireFormat::Bf16:
      encodeBf16Kernel<<<streamingBlocks(elems), kThreads, 0, stream>>>(
          src, elems, static_cast<__nv_bfloat16*>(wire));
      break;
    case WireFormat::Fp8:
      encodeFp8Kernel<<<frames(elems), kThreads, 0, stream>>>(src, elems,
                                                              static_cast<uint8_t*>(wire));
      break;
    case WireFormat::Native:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

int launchWireDecode(WireFormat format, const void* wire, size_t elems, float* dst,
                     cudaStream_t stream) {
  if (elems == 0) return cudaSuccess;
  if (dst == nullptr || wire == nullptr || !aligned(dst, 4) || !aligned(wire, kFp8Header))
    return cudaErrorInvalidValue;
  switch (format) {
    case WireFormat::Bf16:
      decodeBf16Kernel<<<streamingBlocks(elems), kThreads, 0, stream>>>(
          static_cast<const uint16_t*>(wire), elems, dst);
      break;
    case WireFormat::Fp8:
      decodeFp8Kernel<<<frames(elems), kThreads, 0, stream>>>(static_cast<const uint8_t*>(wire),
                                                              elems, dst);
      break;
    case WireFormat::Native:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

int preloadWireKernels() {
  cudaFuncAttributes attr{};
  for (const void* kernel : {reinterpret_cast<const void*>(encodeBf16Kernel),
                             reinterpret_cast<const void*>(decodeBf16Kernel),
                             reinterpret_cast<const void*>(encodeFp8Kernel),
                             reinterpret_cast<const void*>(decodeFp8Kernel)})
    if (cudaError_t e = cudaFuncGetAttributes(&attr, kernel); e != cudaSuccess) return e;
  return cudaSuccess;
}

}  // namespace lanes::cuda
