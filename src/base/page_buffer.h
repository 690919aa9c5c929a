// Anonymous private memory of its own pages (mmap), returned with munmap.
// Pages the kernel still holds when the buffer goes (a MSG_ZEROCOPY send in
// flight) keep their contents until it lets them go, and are never handed to
// a later allocation, as freed heap memory would be. Pages become resident
// only as the buffer's user reaches them (prefault()).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <utility>

#include "base/populate_pages.h"

namespace lanes {

class PageBuffer {
 public:
  PageBuffer() = default;
  // Empty (valid() false) where the mapping fails; error() is mmap's errno.
  explicit PageBuffer(size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      error_ = errno;
      return;
    }
    data_ = static_cast<std::byte*>(p);
    bytes_ = bytes;
  }
  ~PageBuffer() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  PageBuffer(PageBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)),
        error_(std::exchange(o.error_, 0)),
        resident_(o.resident_.exchange(0, std::memory_order_relaxed)) {}
  PageBuffer& operator=(PageBuffer&& o) noexcept {
    if (this != &o) {
      this->~PageBuffer();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      error_ = std::exchange(o.error_, 0);
      resident_.store(o.resident_.exchange(0, std::memory_order_relaxed),
                      std::memory_order_relaxed);
    }
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  bool valid() const { return data_ != nullptr; }
  int error() const { return error_; }
  std::byte* get() const { return data_; }

  // Makes the pages before byte `end` resident before they are written,
  // kPrefaultBytes or more at a time: one madvise(MADV_POPULATE_WRITE)
  // where each page would otherwise fault on its own, which on a virtual
  // machine costs about as much as sending the page over TCP. Safe from
  // several threads (a page made resident twice costs a page-table walk).
  // Where the kernel lacks it (Linux < 5.14) the pages fault as reached.
  static constexpr size_t kPrefaultBytes = size_t{256} << 10;
  void prefault(size_t end) {
    size_t have = resident_.load(std::memory_order_relaxed);
    if (end <= have || data_ == nullptr) return;
    const size_t page = pageBytes();
    const size_t want =
        std::min(bytes_, (std::max(end, have + kPrefaultBytes) + page - 1) / page * page);
    if (!populatePages(data_ + have, want - have)) {
      resident_.store(bytes_, std::memory_order_relaxed);  // not again
      return;
    }
    while (have < want && !resident_.compare_exchange_weak(have, want, std::memory_order_relaxed)) {
    }
  }

 private:
  static size_t pageBytes() {
    static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return page;
  }

  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
  int error_ = 0;
  // Bytes from the start that prefault() made resident (page-aligned, or
  // bytes_); only ever grows.
  std::atomic<size_t> resident_{0};
};

}  // namespace lanes
