// Compressed wire formats (LANES_WIRE): float32 values cross the transports
// as bfloat16, or as float8 e4m3 with one scale per frame, and are summed in
// float32 where they arrive. A call's bytes on the wire are frames of
// `frameElems` values, each after a `headerBytes` header (fp8: the frame's
// scale), the last frame shorter. Opt-in, float32 sums on the ring only
// (docs/wire_formats.md has the error bound and why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lanes {

enum class WireFormat : uint8_t { Native, Bf16, Fp8 };
const char* wireFormatName(WireFormat f);
// "native" (or ""), "bf16", "fp8"; false for anything else.
bool parseWireFormat(const std::string& text, WireFormat* out);

class WireCodec {
 public:
  // The largest frame of any format, for a receiver's partial-frame buffer.
  static constexpr size_t kMaxFrameBytes = 1024;

  explicit WireCodec(WireFormat format);
  WireFormat format() const { return format_; }
  size_t frameElems() const { return frameElems_; }
  // Wire bytes of a frame of `elems` values (at most frameElems()).
  size_t frameBytes(size_t elems) const { return headerBytes_ + elems * elemBytes_; }
  // Wire bytes of `elems` values.
  size_t wireBytes(size_t elems) const;

  // One frame of `elems` values from `src` into `wire`.
  void encode(const float* src, size_t elems, std::byte* wire) const;
  // One frame back: dst = add + value (add may be null: dst = value).
  void decode(const std::byte* wire, size_t elems, const float* add, float* dst) const;

 private:
  WireFormat format_;
  size_t frameElems_ = 0, headerBytes_ = 0, elemBytes_ = 0;
};

}  // namespace lanes
