// Making a mapping's pages present in this process's page tables in one call,
// ahead of their first use. Each first touch of a page otherwise takes a page
// fault of its own, and on a virtual machine a fault costs microseconds:
// about as much as moving the page's bytes.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>

#ifndef MADV_POPULATE_WRITE  // C libraries older than the call (glibc < 2.34)
#define MADV_POPULATE_WRITE 23
#endif

namespace lanes {

// Populates [start, start + bytes) for writing (madvise MADV_POPULATE_WRITE;
// `start` page-aligned). False, with errno set, where the kernel refused
// (Linux < 5.14: EINVAL); the pages then fault in as they are reached.
inline bool populatePages(void* start, size_t bytes) {
  return bytes == 0 || ::madvise(start, bytes, MADV_POPULATE_WRITE) == 0;
}

// Whether this kernel has the call (tests skip where it has not).
inline bool populatePagesSupported() {
  void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return true;  // not the kernel's answer: let the caller find out
  const bool supported = populatePages(page, 4096) || errno != EINVAL;
  ::munmap(page, 4096);
  return supported;
}

}  // namespace lanes
