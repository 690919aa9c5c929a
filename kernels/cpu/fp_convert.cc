// Out-of-line scalar conversions (reduce.h), for tests and references; the
// reduce loops use the inline versions in fp_bits.h directly.
#include "fp_bits.h"
#include "reduce.h"

namespace lanes::cpu {

float halfToFloat(uint16_t h) { return fp::halfToFloat(h); }
uint16_t floatToHalf(float f) { return fp::floatToHalf(f); }
float bf16ToFloat(uint16_t b) { return fp::bf16ToFloat(b); }
uint16_t floatToBf16(float f) { return fp::floatToBf16(f); }
float e4m3ToFloat(uint8_t v) { return fp::kE4m3ToFloat[v]; }
uint8_t floatToE4m3(float f) { return fp::floatToFp8<fp::kE4m3>(f); }
float e5m2ToFloat(uint8_t v) { return fp::kE5m2ToFloat[v]; }
uint8_t floatToE5m2(float f) { return fp::floatToFp8<fp::kE5m2>(f); }

}  // namespace lanes::cpu
