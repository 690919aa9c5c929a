#include "exec/call_facts.h"

namespace lanes {

const char* devicePathName(DevicePath p) {
  switch (p) {
    case DevicePath::SharedContext:
      return "shared_context";
    case DevicePath::Ll:
      return "ll";
    case DevicePath::LlThreads:
      return "ll_threads";
    case DevicePath::Simple:
      return "simple";
    case DevicePath::Staged:
      return "staged";
    case DevicePath::HostSum:
      return "host_sum";
    case DevicePath::Pairs:
      return "pairs";
    case DevicePath::P2pPairs:
      return "p2p_pairs";
    case DevicePath::LlPairs:
      return "ll_pairs";
    case DevicePath::Proxy:
      return "proxy";
  }
  return "?";
}

bool pathAllowed(const SelectionConfig& config, DevicePath path) {
  const bool onByDefault = path != DevicePath::LlThreads && path != DevicePath::P2pPairs;
  return config.proto.allows(devicePathName(path), onByDefault);
}

}  // namespace lanes
