// Datatypes and reduction ops as the internals see them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lanes/lanes.h"

namespace lanes {

size_t datatypeSize(lanesDataType_t t);  // 0 for an unknown type
const char* datatypeName(lanesDataType_t t);
bool isFloatingType(lanesDataType_t t);

enum class RedOpKind : uint8_t { Sum, Prod, Max, Min, Avg, PreMulSum };
const char* redOpName(RedOpKind k);

// A resolved reduction: built-in, or pre-multiplied sum with its scalar
// already read (as double; converted to the datatype when applied).
struct RedOp {
  RedOpKind kind = RedOpKind::Sum;
  double scalar = 1.0;
};

}  // namespace lanes
