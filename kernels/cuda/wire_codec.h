// The compressed wire formats of kernels/cpu/wire_codec.h on the GPU, for
// host summation of device buffers (exec/cuda/staged_host_sum.cc): a rank's
// float32 chunk is encoded in GPU memory before its one download, and the
// frames of the sum are decoded there after their one upload, so fewer bytes
// cross PCIe. The frames are byte for byte those of WireCodec (frame k of a
// call at k x WireCodec::kMaxFrameBytes, the last one shorter): the CPU's
// reducers decode what these encode and the other way round, and both round
// alike (round-to-nearest-even, e4m3 saturating, NaN canonical, infinities
// as NaN in e4m3), so GPU and CPU encodings of the same values are equal.
//
// Plain C++ for callers; each returns a cudaError_t as int (0: enqueued),
// cudaErrorInvalidValue for a native format or a misaligned pointer (`wire`
// 16-byte aligned, `src`/`dst` 4-byte). elems == 0 enqueues nothing.
#pragma once

#include <cstddef>

#include "kernels/cpu/wire_codec.h"
#include "lanes/lanes.h"

namespace lanes::cuda {

// `elems` float32 values of `src` (device memory) as frames into `wire`
// (device memory, WireCodec(format).wireBytes(elems) bytes).
int launchWireEncode(WireFormat format, const float* src, size_t elems, void* wire,
                     cudaStream_t stream);
// The frames of `elems` values in `wire` back into `dst` (device memory).
int launchWireDecode(WireFormat format, const void* wire, size_t elems, float* dst,
                     cudaStream_t stream);

// Loads the kernels now (see preloadReduceKernels in reduce.h).
int preloadWireKernels();

}  // namespace lanes::cuda
