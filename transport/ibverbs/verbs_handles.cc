#include "transport/ibverbs/verbs_handles.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "transport/ibverbs/verbs_library.h"

namespace lanes::ib {

void RegisteredBuffer::FreeMemory::operator()(std::byte* p) const { std::free(p); }

bool RegisteredBuffer::make(ibv_pd* pd, size_t bytes, RegisteredBuffer* out, int* err) {
  constexpr size_t kPage = 4096;
  const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void* p = std::aligned_alloc(kPage, rounded);
  if (p == nullptr) {
    *err = ENOMEM;
    return false;
  }
  std::memset(p, 0, rounded);
  RegisteredBuffer b;
  b.memory_.reset(static_cast<std::byte*>(p));
  b.bytes_ = rounded;
  const VerbsLibrary& v = VerbsLibrary::get();
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  b.mr_ = owned(v.regMr(pd, p, rounded, access), v.deregMr);
  if (!b.mr_) {
    *err = errno != 0 ? errno : ENOMEM;
    return false;
  }
  *out = std::move(b);
  return true;
}

}  // namespace lanes::ib
