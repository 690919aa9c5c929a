// Buffers of valid, finite values for every datatype, shared by the reduction
// micro-benchmarks: random bytes would hold NaNs and subnormals, which take
// other paths than the data a collective normally sees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/datatype.h"
#include "kernels/cpu/reduce.h"

namespace lanes::micro {

// Every datatype, in lanesDataType_t order (the aliases lanesChar, lanesInt,
// lanesHalf, lanesFloat and lanesDouble are the same values).
inline constexpr lanesDataType_t kAllTypes[] = {
    lanesInt8,    lanesUint8,   lanesInt32,   lanesUint32,   lanesInt64,      lanesUint64,
    lanesFloat16, lanesFloat32, lanesFloat64, lanesBfloat16, lanesFloat8e4m3, lanesFloat8e5m2};

// The three sizes the issue asks for: L1-resident, L2/LLC-sized, DRAM-bound.
inline constexpr size_t kSizes[] = {4u << 10, 1u << 20, 64u << 20};

// bytes/elemSize elements of small positive values (1..8) in `type`'s encoding.
inline std::vector<unsigned char> filledBuffer(lanesDataType_t type, size_t bytes, int seed) {
  const size_t elem = datatypeSize(type);
  std::vector<unsigned char> buf(bytes);
  for (size_t i = 0; i < bytes / elem; ++i) {
    const int v = static_cast<int>((i + static_cast<size_t>(seed)) % 8) + 1;
    unsigned char* p = buf.data() + i * elem;
    auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
    switch (type) {
      case lanesInt8:
        put(static_cast<int8_t>(v));
        break;
      case lanesUint8:
        put(static_cast<uint8_t>(v));
        break;
      case lanesInt32:
        put(static_cast<int32_t>(v));
        break;
      case lanesUint32:
        put(static_cast<uint32_t>(v));
        break;
      case lanesInt64:
        put(static_cast<int64_t>(v));
        break;
      case lanesUint64:
        put(static_cast<uint64_t>(v));
        break;
      case lanesFloat16:
        put(cpu::floatToHalf(static_cast<float>(v)));
        break;
      case lanesFloat32:
        put(static_cast<float>(v));
        break;
      case lanesFloat64:
        put(static_cast<double>(v));
        break;
      case lanesBfloat16:
        put(cpu::floatToBf16(static_cast<float>(v)));
        break;
      case lanesFloat8e4m3:
        put(cpu::floatToE4m3(static_cast<float>(v)));
        break;
      case lanesFloat8e5m2:
        put(cpu::floatToE5m2(static_cast<float>(v)));
        break;
      default:
        break;
    }
  }
  return buf;
}

}  // namespace lanes::micro
