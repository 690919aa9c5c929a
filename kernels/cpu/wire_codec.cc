#include "kernels/cpu/wire_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_clones.h"
#include "kernels/cpu/fp_bits.h"

namespace lanes {
namespace {

// Float8 e4m3's largest finite value: a frame's largest magnitude maps to it.
constexpr float kE4m3Max = 448.0f;

}  // namespace

const char* wireFormatName(WireFormat f) {
  switch (f) {
    case WireFormat::Bf16:
      return "bf16";
    case WireFormat::Fp8:
      return "fp8";
    case WireFormat::Native:
      break;
  }
  return "native";
}

bool parseWireFormat(const std::string& text, WireFormat* out) {
  for (WireFormat f : {WireFormat::Native, WireFormat::Bf16, WireFormat::Fp8}) {
    if (text == wireFormatName(f)) {
      *out = f;
      return true;
    }
  }
  if (!text.empty()) return false;
  *out = WireFormat::Native;
  return true;
}

// bf16: frames of 512 values (1 KiB), no header. fp8: a 16-byte header (the
// scale, then padding that keeps the values 16-byte aligned) and 1008
// values, 1 KiB a frame. Native: 4-byte values, 256 to a frame.
WireCodec::WireCodec(WireFormat format) : format_(format) {
  switch (format) {
    case WireFormat::Bf16:
      frameElems_ = kMaxFrameBytes / 2, headerBytes_ = 0, elemBytes_ = 2;
      break;
    case WireFormat::Fp8:
      frameElems_ = kMaxFrameBytes - 16, headerBytes_ = 16, elemBytes_ = 1;
      break;
    case WireFormat::Native:
      frameElems_ = kMaxFrameBytes / 4, headerBytes_ = 0, elemBytes_ = 4;
      break;
  }
}

size_t WireCodec::wireBytes(size_t elems) const {
  const size_t full = elems / frameElems_, rest = elems % frameElems_;
  return full * frameBytes(frameElems_) + (rest > 0 ? frameBytes(rest) : 0);
}

namespace {

// The loops run in fixed blocks of kBlock values (a scalar tail after), so
// that they vectorise (cpu_clones.h); the conversions are the integer forms
// of kernels/cpu/fp_bits.h.
constexpr size_t kBlock = 64;

// Blocks of `n` values: `body(i, kBlock)` on each whole block, then `body(i, rest)`.
template <class Body>
[[gnu::always_inline]] inline void blocks(size_t n, Body body) {
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) body(i, std::integral_constant<size_t, kBlock>{});
  if (i < n) body(i, n - i);
}

LANES_CPU_CLONES void encodeBf16(const float* src, size_t n, std::byte* wire) {
  blocks(n, [&](size_t i, auto count) {
    uint16_t out[kBlock];
    for (size_t j = 0; j < count; ++j) out[j] = cpu::fp::floatToBf16(src[i + j]);
    std::memcpy(wire + 2 * i, out, 2 * count);
  });
}

LANES_CPU_CLONES void decodeBf16(const std::byte* wire, size_t n, const float* add, float* dst) {
  blocks(n, [&](size_t i, auto count) {
    uint16_t in[kBlock];
    float out[kBlock];
    std::memcpy(in, wire + 2 * i, 2 * count);
    for (size_t j = 0; j < count; ++j) out[j] = cpu::fp::bf16ToFloat(in[j]);
    if (add != nullptr)
      for (size_t j = 0; j < count; ++j) out[j] += add[i + j];
    std::memcpy(dst + i, out, sizeof(float) * count);
  });
}

// The largest finite magnitude of `n` values, and whether any is infinite.
LANES_CPU_CLONES float mostFinite(const float* src, size_t n, bool* infinite) {
  float most[kBlock] = {};
  bool inf = false;
  blocks(n, [&](size_t i, auto count) {
    for (size_t j = 0; j < count; ++j) {
      const float a = std::fabs(src[i + j]);
      inf |= a == std::numeric_limits<float>::infinity();
      most[j] = a <= std::numeric_limits<float>::max() && a > most[j] ? a : most[j];
    }
  });
  *infinite = inf;
  float out = 0;
  for (float m : most) out = std::max(out, m);
  return out;
}

LANES_CPU_CLONES void encodeFp8(const float* src, size_t n, float inverse, std::byte* wire) {
  blocks(n, [&](size_t i, auto count) {
    uint8_t out[kBlock];
    for (size_t j = 0; j < count; ++j)
      out[j] = cpu::fp::floatToFp8<cpu::fp::kE4m3>(src[i + j] * inverse);
    std::memcpy(wire + i, out, count);
  });
}

LANES_CPU_CLONES void decodeFp8(const std::byte* wire, size_t n, float scale, const float* add,
                                float* dst) {
  blocks(n, [&](size_t i, auto count) {
    uint8_t in[kBlock];
    float out[kBlock];
    std::memcpy(in, wire + i, count);
    for (size_t j = 0; j < count; ++j) out[j] = cpu::fp::fp8ToFloat<cpu::fp::kE4m3>(in[j]) * scale;
    if (add != nullptr)
      for (size_t j = 0; j < count; ++j) out[j] += add[i + j];
    std::memcpy(dst + i, out, sizeof(float) * count);
  });
}

}  // namespace

void WireCodec::encode(const float* src, size_t elems, std::byte* wire) const {
  switch (format_) {
    case WireFormat::Bf16:
      encodeBf16(src, elems, wire);
      return;
    case WireFormat::Fp8: {
      // The scale maps the frame's largest finite magnitude to e4m3's largest
      // value; a frame of zeros (or of non-finite values only) keeps scale 1.
      bool infinite = false;
      const float most = mostFinite(src, elems, &infinite);
      const float scale = most > 0 ? most / kE4m3Max : 1.0f;
      std::memset(wire, 0, headerBytes_);
      std::memcpy(wire, &scale, sizeof(scale));
      encodeFp8(src, elems, 1.0f / scale, wire + headerBytes_);
      // Infinities have no e4m3 code (they would saturate): they travel as NaN.
      if (infinite) {
        auto* codes = reinterpret_cast<uint8_t*>(wire + headerBytes_);
        for (size_t i = 0; i < elems; ++i)
          if (std::isinf(src[i])) codes[i] = 0x7f;
      }
      return;
    }
    case WireFormat::Native:
      std::memcpy(wire, src, elems * sizeof(float));
      return;
  }
}

void WireCodec::decode(const std::byte* wire, size_t elems, const float* add, float* dst) const {
  switch (format_) {
    case WireFormat::Bf16:
      decodeBf16(wire, elems, add, dst);
      return;
    case WireFormat::Fp8: {
      float scale;
      std::memcpy(&scale, wire, sizeof(scale));
      decodeFp8(wire + headerBytes_, elems, scale, add, dst);
      return;
    }
    case WireFormat::Native:
      if (add == nullptr) {
        std::memmove(dst, wire, elems * sizeof(float));
        return;
      }
      blocks(elems, [&](size_t i, auto count) {
        float in[kBlock];
        std::memcpy(in, wire + sizeof(float) * i, sizeof(float) * count);
        for (size_t j = 0; j < count; ++j) dst[i + j] = add[i + j] + in[j];
      });
      return;
  }
}

}  // namespace lanes
