// Scratch memory of schedules, kept for the next call. A schedule's scratch
// (a chain's partial sums, a ring's partial blocks, a recursive doubling's
// incoming halves) is written before it is read, and large calls repeat: a
// fresh allocation per call would page-fault (and, value-initialised, zero)
// the whole buffer every time, which costs as much as moving it.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace lanes {

class ScratchPool;

// One buffer on loan: it goes back to its pool (or is freed) when dropped.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(std::unique_ptr<std::byte[]> mem, size_t bytes, ScratchPool* pool)
      : mem_(std::move(mem)), bytes_(bytes), pool_(pool) {}
  ScratchBuffer(ScratchBuffer&&) noexcept = default;
  ScratchBuffer& operator=(ScratchBuffer&& other) noexcept;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer();

  std::byte* data() const { return mem_.get(); }

 private:
  void giveBack();
  std::unique_ptr<std::byte[]> mem_;
  size_t bytes_ = 0;
  ScratchPool* pool_ = nullptr;
};

// A communicator's free scratch buffers. take() lends the smallest kept
// buffer that holds `bytes` without wasting more than as much again, else a
// new one (uninitialised); the pool keeps at most kKeptBuffers of at most
// kKeptBytes together, so a communicator idle after a huge call does not
// hold its scratch for good.
class ScratchPool {
 public:
  static constexpr size_t kKeptBuffers = 8;
  static constexpr size_t kKeptBytes = size_t{512} << 20;
  ScratchBuffer take(size_t bytes);
  size_t keptBuffers() const;

 private:
  friend class ScratchBuffer;
  void keep(std::unique_ptr<std::byte[]> mem, size_t bytes);

  mutable std::mutex mutex_;
  std::multimap<size_t, std::unique_ptr<std::byte[]>> free_;
  size_t keptBytes_ = 0;
};

}  // namespace lanes
