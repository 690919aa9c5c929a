// Anonymous private memory of its own pages (mmap), returned with munmap.
// Pages the kernel still holds when the buffer goes (a MSG_ZEROCOPY send in
// flight) keep their contents until it lets them go, and are never handed to
// a later allocation, as freed heap memory would be. Pages are touched only
// as the buffer's user reaches them.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <utility>

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
        error_(std::exchange(o.error_, 0)) {}
  PageBuffer& operator=(PageBuffer&& o) noexcept {
    if (this != &o) {
      this->~PageBuffer();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      error_ = std::exchange(o.error_, 0);
    }
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  bool valid() const { return data_ != nullptr; }
  int error() const { return error_; }
  std::byte* get() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
  int error_ = 0;
};

}  // namespace lanes
