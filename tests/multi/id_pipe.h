// Hands a unique id made after the fork to forked ranks. Ranks are forked
// before the parent starts a bootstrap root (a thread) and wait here until
// every fork is done: a fork copies the allocator with any lock another
// thread holds at that moment, held forever in the child (sanitizer
// allocators have no fork handler; docs/testing.md, "Forks and threads").
#pragma once

#include <cstddef>
#include <string>

#include "lanes/lanes.h"

namespace lanes::test {

class IdPipe {
 public:
  IdPipe() = default;
  ~IdPipe();
  IdPipe(const IdPipe&) = delete;
  IdPipe& operator=(const IdPipe&) = delete;

  // Before the forks; false (with the reason in *error) if no pipe.
  bool open(std::string* error);
  // In a rank: blocks for the id; false when the parent sent none.
  bool receive(lanesUniqueId* id);
  // In the parent after the forks: `id` to each of `ranks` ranks, or, with a
  // null id, nothing (each rank's receive then fails). False on a failed write.
  bool send(const lanesUniqueId* id, size_t ranks);

 private:
  int read_ = -1;
  int write_ = -1;
};

}  // namespace lanes::test
