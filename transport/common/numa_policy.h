// NUMA placement of shared host memory (staging arenas, pinned pools): which
// page of a mapping should come from which node, set with the raw mbind /
// get_mempolicy syscalls (no libnuma). Placement is a hint: a failure is
// reported to the caller, who logs it and keeps the memory where the kernel
// put it. CPU-only (no CUDA), so the unit tests run in every build.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace lanes {

// The online NUMA nodes, from /sys/devices/system/node/online ("0", "0-1",
// "0,2-3"). Empty when the file is missing or unreadable (no NUMA support).
std::vector<int> onlineNumaNodes();
// Parses a sysfs node list; false on malformed text.
bool parseNodeList(const std::string& text, std::vector<int>* nodes);

// Makes `node` the preferred node of [addr, addr + bytes) (MPOL_PREFERRED):
// pages allocated afterwards come from it while it has free memory. For a
// MAP_SHARED mapping of a tmpfs (/dev/shm) file the policy is the file's own
// (shared policy), so it also steers pages allocated later by fallocate or by
// another process's mapping. `addr` must be page-aligned. node < 0 (unknown)
// or a host with one online node: nothing to do, OK. A node that is not
// online: invalidArgument.
Status preferNode(void* addr, size_t bytes, int node);
// preferNode without the one-node shortcut: always issues mbind (tests use it
// on one-node hosts; callers want preferNode).
Status applyPreferredNode(void* addr, size_t bytes, int node);
// The node that holds the page at `addr` (faulting it in if needed); -1 when
// the kernel cannot say (no NUMA support, mempolicy syscalls refused).
int nodeOfPage(const void* addr);

// A byte range of a mapping and the node it should live on (-1: no preference).
struct NumaRange {
  size_t offset = 0;
  size_t bytes = 0;
  int node = -1;
  bool operator==(const NumaRange&) const = default;
};

// Turns per-owner byte ranges (non-overlapping, any order, any alignment)
// into page-aligned ranges of a `totalBytes` mapping: a page goes to the range
// that holds its first byte; neighbours on the same node merge; pages with no
// preference are left out.
std::vector<NumaRange> pageAlignedRanges(std::vector<NumaRange> wanted, size_t totalBytes,
                                         size_t pageBytes);

// Applies every range on `base` (preferNode each). Returns the first failure,
// having tried them all.
Status applyRanges(void* base, const std::vector<NumaRange>& ranges);

// "rank 0 on NUMA node 1, rank 1 on NUMA node 0" style text for logs:
// one entry per rank in `rankNodes` ("unknown" for -1).
std::string describeRankNodes(const std::vector<int>& rankNodes, const char* what);

// The node most entries of `nodes` name (ignoring -1); ties go to `prefer`
// when it is among them, else to the lowest node. -1 when none is known.
int mostCommonNode(const std::vector<int>& nodes, int prefer);

}  // namespace lanes
