// Whether the thread ranks of one GPU share one set of the host-staged path's
// internal streams (exec/cuda/stage_streams.h), from LANES_STAGE_SHARED_STREAMS.
// Pure, so it is tested without a GPU.
#pragma once

#include <cstddef>
#include <string_view>

namespace lanes {

enum class SharedStreamsMode { Auto, Always, Never, Invalid };

// Unset (null) or empty: Auto; "auto", "1", "0"; anything else: Invalid
// (the caller warns and uses Auto).
inline SharedStreamsMode parseSharedStreamsMode(const char* value) {
  const std::string_view v = value != nullptr ? value : "";
  if (v.empty() || v == "auto") return SharedStreamsMode::Auto;
  if (v == "1") return SharedStreamsMode::Always;
  if (v == "0") return SharedStreamsMode::Never;
  return SharedStreamsMode::Invalid;
}

// `ranksOnMyGpu`: this communicator's ranks in this process on this GPU
// (this one included). Auto shares where the slots are in host memory: with
// P2P slots a shared set is slower than a set each (docs/gpu_data_path.md
// has the measurements).
inline bool shareStageStreams(SharedStreamsMode mode, bool p2pSlots, size_t ranksOnMyGpu) {
  if (ranksOnMyGpu < 2) return false;
  switch (mode) {
    case SharedStreamsMode::Always:
      return true;
    case SharedStreamsMode::Never:
      return false;
    case SharedStreamsMode::Auto:
    case SharedStreamsMode::Invalid:
      return !p2pSlots;
  }
  return false;
}

}  // namespace lanes
