// Tiny kernels the device-path tests put on a rank's stream before and after
// a collective, so that ordering is checked by the GPU itself (no host
// synchronisation in between). Declared without CUDA headers' device parts so
// plain C++ test files can call them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace lanes::test {

// Exact small-integer input of `rank` at `index` for the float32 ordering
// tests (|value| <= 31, so sums over 8 ranks, times 8, stay exact).
inline float orderingInput(int rank, size_t index, int salt) {
  return static_cast<float>(
      static_cast<int>(
          (index * 7 + static_cast<size_t>(rank) * 13 + static_cast<size_t>(salt) * 5) % 63) -
      31);
}

// Blocks `stream` until *open (device memory, written by a copy on another
// stream) becomes non-zero, or until `limitNs` nanoseconds passed; then sets
// *timedOut to 1.
// Loads the kernels below now: a lazily loaded kernel launched while another
// stream is held (a closed gate, a collective waiting for a peer) may wait for
// the whole context before it is even enqueued.
cudaError_t preloadTestKernels();

cudaError_t launchGate(cudaStream_t stream, const int* open, int* timedOut,
                       unsigned long long limitNs);
// out[i] = orderingInput(rank, i, salt) * scale, for i < count.
cudaError_t launchFillOrdering(cudaStream_t stream, float* out, size_t count, int rank, int salt,
                               float scale);
// Counts elements i < count with got[i] != scale * sum over ranks r < nranks
// of orderingInput(r, i, salt): adds the count to *wrong and lowers
// *firstWrong to the smallest wrong index (both device memory).
cudaError_t launchCheckOrderingSum(cudaStream_t stream, const float* got, size_t count, int nranks,
                                   int salt, float scale, unsigned long long* wrong,
                                   unsigned long long* firstWrong);

}  // namespace lanes::test
