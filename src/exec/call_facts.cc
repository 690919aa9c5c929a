#include "exec/call_facts.h"

#include "algorithms/algorithm.h"
#include "base/env.h"

namespace lanes {
namespace {

const std::vector<std::string>& devicePathNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (int p = 0; p < kDevicePaths; ++p)
      n.emplace_back(devicePathName(static_cast<DevicePath>(p)));
    return n;
  }();
  return names;
}

const std::vector<std::string>& hostAlgoNames() {
  static const std::vector<std::string> names = {
      algoName(AlgoId::Ring), algoName(AlgoId::RecursiveDoubling), algoName(AlgoId::Chain),
      algoName(AlgoId::Pairwise), algoName(AlgoId::Direct)};
  return names;
}

// An unset or bad list allows the defaults; a bad one says so once.
NameList listFromEnv(const char* var, const std::vector<std::string>& known) {
  NameList list;
  auto text = envString(var);
  if (!text) return list;
  Status s = NameList::parse(*text, known, &list);
  if (!s) {
    envWarnOnce(var, *text, s.message(), "the default choice");
    return NameList();
  }
  return list;
}

}  // namespace

const char* devicePathName(DevicePath p) {
  switch (p) {
    case DevicePath::SharedContext:
      return "shared_context";
    case DevicePath::Ll:
      return "ll";
    case DevicePath::LlThreads:
      return "ll_threads";
    case DevicePath::Staged:
      return "staged";
    case DevicePath::Proxy:
      return "proxy";
  }
  return "?";
}

SelectionConfig SelectionConfig::fromEnv() {
  SelectionConfig c;
  c.proto = listFromEnv("LANES_PROTO", devicePathNames());
  c.algo = listFromEnv("LANES_ALGO", hostAlgoNames());
  c.smallBytes = static_cast<size_t>(envSize("LANES_SMALL_MSG_BYTES", c.smallBytes));
  return c;
}

bool pathAllowed(const SelectionConfig& config, DevicePath path) {
  return config.proto.allows(devicePathName(path), path != DevicePath::LlThreads);
}

}  // namespace lanes
