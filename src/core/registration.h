// A buffer or window registered on a communicator (lanesCommRegister,
// lanesCommWindowRegister). Registration is a promise about a buffer, never a
// requirement: every path works on unregistered memory, so a record only has
// to name the buffer until it is deregistered.
#pragma once

#include <cstddef>

namespace lanes {

struct Registration {
  enum class Kind { Buffer, Window };
  Kind kind = Kind::Buffer;
  void* base = nullptr;
  size_t bytes = 0;
  int flags = 0;  // window flags as given
};

}  // namespace lanes
