// Element-wise reduction ops, one per (datatype, op), each a struct with
// `Storage` (the element as stored) and a static or const `apply`. The
// loops in reduce.cc inline them so GCC vectorises the whole body.
//
// Floats: a codec widens the stored element to a compute type (float for
// the narrow types, as NCCL does without native half math), the op
// combines, and the codec rounds back (RNE) and canonicalises NaN.
//
// NaN in max/min. NCCL (src/device/reduce_kernel.h, FuncMinMax) uses
// fminf/fmaxf for float, fmin/fmax for double, __hmin/__hmax for half and
// bfloat16 on sm_80+ (fminf/fmaxf on the float-widened value before), and
// __hmin/__hmax on half-widened values for fp8. All of these are IEEE
// minNum/maxNum: a NaN loses to a number, two NaNs give the canonical NaN,
// and (documented for __hmax/__hmin) +0 > -0. We do the same, with +0/-0
// ordered so that the result never depends on argument order. Sum/prod
// results that are NaN come out canonical too (as the GPU's add/mul do):
// x86 would otherwise keep the first operand's payload, and
// recursive-doubling all-reduce needs op(a,b) == op(b,a) bit for bit.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "fp_bits.h"

namespace lanes::cpu::ops {

// ---- codecs: stored element <-> compute type ----

struct F32Codec {
  using Storage = float;
  using Compute = float;
  static float load(float x) { return x; }
  static float store(float x) { return x != x ? std::bit_cast<float>(fp::kCanonicalNanF32) : x; }
};
struct F64Codec {
  using Storage = double;
  using Compute = double;
  static double load(double x) { return x; }
  static double store(double x) { return x != x ? std::bit_cast<double>(fp::kCanonicalNanF64) : x; }
};
struct F16Codec {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t x) { return fp::halfToFloat(x); }
  static uint16_t store(float x) { return fp::floatToHalf(x); }
};
struct Bf16Codec {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t x) { return fp::bf16ToFloat(x); }
  static uint16_t store(float x) { return fp::floatToBf16(x); }
};
struct E4m3Codec {
  using Storage = uint8_t;
  using Compute = float;
  static float load(uint8_t x) { return fp::fp8ToFloat<fp::kE4m3>(x); }
  static uint8_t store(float x) { return fp::floatToFp8<fp::kE4m3>(x); }
};
struct E5m2Codec {
  using Storage = uint8_t;
  using Compute = float;
  static float load(uint8_t x) { return fp::fp8ToFloat<fp::kE5m2>(x); }
  static uint8_t store(float x) { return fp::floatToFp8<fp::kE5m2>(x); }
};

// Same-width unsigned integer for a float type, to merge the signs of +0/-0.
template <class T>
using BitsOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// maxNum/minNum, commutative bit for bit (the caller canonicalises NaN).
template <class T>
T maxNum(T a, T b) {
  T m = a > b ? a : b;
  m = b != b ? a : m;  // a NaN b loses
  // Equal values differ only for +0/-0: AND of the bits keeps +0.
  const T both =
      std::bit_cast<T>(BitsOf<T>(std::bit_cast<BitsOf<T>>(a) & std::bit_cast<BitsOf<T>>(b)));
  return a == b ? both : m;
}
template <class T>
T minNum(T a, T b) {
  T m = a < b ? a : b;
  m = b != b ? a : m;
  const T both =
      std::bit_cast<T>(BitsOf<T>(std::bit_cast<BitsOf<T>>(a) | std::bit_cast<BitsOf<T>>(b)));
  return a == b ? both : m;  // OR keeps -0
}

// The four combines on the compute type.
struct SumOp {
  template <class T>
  static T apply(T a, T b) {
    return a + b;
  }
};
struct ProdOp {
  template <class T>
  static T apply(T a, T b) {
    return a * b;
  }
};
struct MaxOp {
  template <class T>
  static T apply(T a, T b) {
    return maxNum(a, b);
  }
};
struct MinOp {
  template <class T>
  static T apply(T a, T b) {
    return minNum(a, b);
  }
};

// Widen, combine, round back.
template <class C, class Combine>
struct FloatOp {
  using Storage = typename C::Storage;
  static Storage apply(Storage a, Storage b) {
    return C::store(Combine::apply(C::load(a), C::load(b)));
  }
};

// dst = src * scalar, the scalar already rounded to the datatype and widened.
template <class C>
struct FloatScale {
  using Storage = typename C::Storage;
  typename C::Compute scalar;
  Storage apply(Storage x) const { return C::store(C::load(x) * scalar); }
};
template <class C>
struct FloatDivide {
  using Storage = typename C::Storage;
  typename C::Compute divisor;
  Storage apply(Storage x) const { return C::store(C::load(x) / divisor); }
};

// ---- integers: wrap-around sum/prod done in unsigned arithmetic (no UB for
// signed types); at least 32 bits wide so small types never promote to int ----

template <class T>
using WideUnsigned = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

template <class T>
struct IntSum {
  using Storage = T;
  static T apply(T a, T b) { return T(WideUnsigned<T>(a) + WideUnsigned<T>(b)); }
};
template <class T>
struct IntProd {
  using Storage = T;
  static T apply(T a, T b) { return T(WideUnsigned<T>(a) * WideUnsigned<T>(b)); }
};
template <class T>
struct IntMax {
  using Storage = T;
  static T apply(T a, T b) { return a > b ? a : b; }
};
template <class T>
struct IntMin {
  using Storage = T;
  static T apply(T a, T b) { return a < b ? a : b; }
};

// PreMulSum on integers: widen to 64 bits (sign-extending signed types),
// multiply modulo 2^64, truncate to T.
template <class T>
struct IntScale {
  using Storage = T;
  uint64_t scalar;
  T apply(T x) const {
    using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    return T(uint64_t(Wide(x)) * scalar);
  }
};

// Truncating division by a positive divisor for 8/32-bit types through
// double: the quotient's rounding error (< |q| * 2^-53) is below the gap
// 1/divisor to the next integer, so truncation gives the exact integer
// quotient, and the double division vectorises where integer division does not.
template <class T>
struct IntDivideViaDouble {
  using Storage = T;
  double divisor;
  T apply(T x) const { return T(double(x) / divisor); }
};
template <class T>
struct IntDivide {
  using Storage = T;
  T divisor;
  T apply(T x) const { return T(x / divisor); }
};

}  // namespace lanes::cpu::ops
