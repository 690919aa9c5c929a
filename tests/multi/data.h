// Test data for collectives: per-(datatype, rank, index) inputs whose
// reductions are exact in every datatype, the expected results computed with
// the test's own arithmetic (never the library's kernels), a codec for the
// narrow float formats, and guarded buffers that catch out-of-bounds writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lanes/lanes.h"

namespace lanes::test {

inline constexpr lanesDataType_t kAllTypes[] = {
    lanesInt8,    lanesUint8,   lanesInt32,   lanesUint32,   lanesInt64,      lanesUint64,
    lanesFloat16, lanesFloat32, lanesFloat64, lanesBfloat16, lanesFloat8e4m3, lanesFloat8e5m2};

// The reduction a test asks for; PreMulSum is built with lanesRedOpCreatePreMulSum.
enum class Reduction { Sum, Prod, Max, Min, Avg, PreMulSum };
inline constexpr Reduction kAllReductions[] = {Reduction::Sum, Reduction::Prod,
                                               Reduction::Max, Reduction::Min,
                                               Reduction::Avg, Reduction::PreMulSum};
// The host-immediate scalar every PreMulSum test uses: scaling by 2 is exact.
inline constexpr double kPreMulScalar = 2.0;

const char* typeName(lanesDataType_t t);
const char* reductionName(Reduction r);
size_t typeSize(lanesDataType_t t);
bool isFloat(lanesDataType_t t);
bool isSigned(lanesDataType_t t);
// Machine epsilon (2^-mantissa bits) of a float type; 0 for integers.
double typeEpsilon(lanesDataType_t t);

// Narrow float codec (round to nearest even), written here so the test does
// not trust the library's conversions.
uint16_t encodeHalf(double v);
uint16_t encodeBfloat16(double v);
uint8_t encodeE4m3(double v);
uint8_t encodeE5m2(double v);
double decodeHalf(uint16_t bits);
double decodeBfloat16(uint16_t bits);
double decodeE4m3(uint8_t bits);
double decodeE5m2(uint8_t bits);

// Element `index` of a buffer of `t`, as double / from double.
double loadElement(lanesDataType_t t, const void* base, size_t index);
void storeElement(lanesDataType_t t, void* base, size_t index, double value);
// The scalar `value` encoded as one element of `t` (for lanesRedOpCreatePreMulSum).
std::vector<std::byte> scalarBytes(lanesDataType_t t, double value);

// Input of `rank` at `index` for a reduction: a small integer chosen so every
// partial result, in any order, is exact in `t` with up to `nranks` ranks.
double reductionInput(lanesDataType_t t, Reduction r, int rank, int nranks, size_t index,
                      uint32_t salt);
// The exact result at `index`, from every rank's reductionInput.
double reductionExpected(lanesDataType_t t, Reduction r, int nranks, size_t index, uint32_t salt,
                         double* sumAbs = nullptr);
// Whether `got` is right: exact, except Avg on float types may be an ulp off
// (dividing by n first with a rounded 1/n). `sumAbs` comes from
// reductionExpected.
bool reductionMatches(lanesDataType_t t, Reduction r, double got, double expected, double sumAbs);

// Fills `count` elements of `t` at `base` with rank's inputs for indices
// firstIndex.. (firstIndex shifts a block of a larger logical vector).
void fillReductionInput(lanesDataType_t t, Reduction r, int rank, int nranks, void* base,
                        size_t count, size_t firstIndex, uint32_t salt);
// Checks `count` elements against the expected results for indices
// firstIndex..; returns "" or a description of the first mismatch and how
// many there were.
std::string checkReductionOutput(lanesDataType_t t, Reduction r, int nranks, const void* base,
                                 size_t count, size_t firstIndex, uint32_t salt);

// Raw byte patterns for data-movement collectives (no arithmetic involved):
// the bytes `src` sends to `dst`.
void fillPattern(void* base, size_t bytes, int src, int dst, uint32_t salt);
// "" or the first differing byte offset with got/expected values.
std::string checkPattern(const void* base, size_t bytes, int src, int dst, uint32_t salt);

// A heap buffer with guard zones on both sides; checkGuards() says whether
// anything wrote outside [data, data + bytes).
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes);
  std::byte* data() { return storage_.data() + kGuard; }
  const std::byte* data() const { return storage_.data() + kGuard; }
  size_t bytes() const { return bytes_; }
  // "" or which guard was overwritten.
  std::string checkGuards() const;

 private:
  static constexpr size_t kGuard = 64;
  static constexpr std::byte kSentinel{0xA5};
  std::vector<std::byte> storage_;
  size_t bytes_;
};

}  // namespace lanes::test
