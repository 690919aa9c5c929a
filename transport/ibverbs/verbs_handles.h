// Owning handles for verbs objects, each freed by the library's own destroy
// function, and memory registered with a protection domain.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>

namespace lanes::ib {

template <class T>
using Owned = std::unique_ptr<T, int (*)(T*)>;

template <class T>
Owned<T> owned(T* object, int (*destroy)(T*)) {
  return Owned<T>(object, destroy);
}

// Page-aligned, zeroed host memory and its registration (local and remote
// write). The registration goes before the memory.
class RegisteredBuffer {
 public:
  static bool make(ibv_pd* pd, size_t bytes, RegisteredBuffer* out, int* err);
  RegisteredBuffer() = default;
  std::byte* data() const { return memory_.get(); }
  size_t size() const { return bytes_; }
  uint32_t lkey() const { return mr_ ? mr_->lkey : 0; }
  uint32_t rkey() const { return mr_ ? mr_->rkey : 0; }

 private:
  struct FreeMemory {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, FreeMemory> memory_;
  size_t bytes_ = 0;
  Owned<ibv_mr> mr_{nullptr, nullptr};
};

}  // namespace lanes::ib
