// CPU reductions over host memory, vectorised with run-time dispatch.
//
// Half, bfloat16 and float8 values are widened to float, combined, and
// rounded back (round-to-nearest-even) after every binary op, as NCCL's
// kernels do, so a given reduction order gives the same bits everywhere.
// max/min: see reduce_ops.h for NaN and +-0 handling (matches NCCL).
// Pointers must be aligned to the element size; dst may alias a or b exactly
// but must not overlap them partially.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/datatype.h"

namespace lanes::cpu {

// dst[i] = a[i] (op) b[i] for i < count. dst may alias a or b exactly.
// For Avg and PreMulSum the combine is a plain sum; see finishAvg/premultiply.
void reduce(void* dst, const void* a, const void* b, size_t count, lanesDataType_t type,
            RedOpKind op);

// dst[i] = src[i] * scalar (PreMulSum's pre-multiplication). dst may alias src.
void premultiply(void* dst, const void* src, size_t count, lanesDataType_t type, double scalar);

// dst[i] = dst[i] / nranks (Avg's last step; integer types divide truncating, as NCCL).
void finishAvg(void* dst, size_t count, lanesDataType_t type, int nranks);

// Scalar conversions, exposed for tests and references.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);
float e4m3ToFloat(uint8_t v);
uint8_t floatToE4m3(float f);  // saturates to +-448, NaN stays NaN
float e5m2ToFloat(uint8_t v);
uint8_t floatToE5m2(float f);  // saturates to +-57344, NaN stays NaN

}  // namespace lanes::cpu
