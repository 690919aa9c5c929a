// ByteRing: a single-producer single-consumer ring of bytes living in memory
// the caller provides (POSIX shared memory between processes, or private
// memory between a socket thread and the executor).
//
// Everything crossing a ring is a multiple of kRingGranule bytes, so a reader
// never sees an element split across the wrap point (the executor pads each
// op's bytes up to the granule).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace lanes {

inline constexpr size_t kRingGranule = 16;
// Largest piece write() publishes at once (a multiple of the granule).
inline constexpr size_t kRingCommitBytes = 64 * 1024;

inline size_t padToGranule(size_t bytes) {
  return (bytes + kRingGranule - 1) & ~(kRingGranule - 1);
}

// Header at the start of the ring's memory; head and tail on their own cache
// lines so producer and consumer do not false-share.
struct alignas(64) ByteRingHeader {
  uint64_t magic;
  uint64_t capacity;                         // bytes of data area, a multiple of kRingGranule
  alignas(64) std::atomic<uint64_t> head;    // bytes ever written (producer)
  alignas(64) std::atomic<uint64_t> tail;    // bytes ever consumed (consumer)
  alignas(64) std::atomic<uint32_t> closed;  // set by either side on teardown/abort
};

class ByteRing {
 public:
  static constexpr uint64_t kMagic = 0x4c414e4552494e47ull;  // "LANERING"
  ByteRing() = default;
  // Wraps memory of `bytes` total (header + data). `initialise` resets it.
  ByteRing(void* memory, size_t bytes, bool initialise);

  static size_t bytesFor(size_t capacity) { return sizeof(ByteRingHeader) + capacity; }
  bool valid() const { return header_ != nullptr; }
  size_t capacity() const { return capacity_; }

  // Producer: copies up to `bytes` (rounded down to the granule unless it is
  // the whole remainder already padded) and returns how many were taken.
  size_t write(const void* src, size_t bytes);
  // Producer zero-copy: writable contiguous region (granule multiple), then commit.
  std::span<std::byte> writable();
  void commit(size_t bytes);

  // Consumer: contiguous readable bytes (granule multiple), possibly empty.
  std::span<const std::byte> readable() const;
  void consume(size_t bytes);

  // Bytes written and not yet consumed.
  size_t unread() const {
    return static_cast<size_t>(header_->head.load(std::memory_order_acquire) -
                               header_->tail.load(std::memory_order_acquire));
  }

  void close() { header_->closed.store(1, std::memory_order_release); }
  bool closed() const { return header_->closed.load(std::memory_order_acquire) != 0; }

 private:
  ByteRingHeader* header_ = nullptr;
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace lanes
