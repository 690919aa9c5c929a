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

// Each name of a LANES_ALGO list as algoName spells it (parseAlgoName also
// takes "rd" and "recursivedoubling"); others stay for the parser to refuse.
std::string canonicalAlgoList(const std::string& text) {
  std::string out;
  size_t at = 0;
  if (!text.empty() && text[0] == '^') {
    out = "^";
    at = 1;
  }
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(at, comma - at);
    std::string trimmed = item;
    trimmed.erase(0, trimmed.find_first_not_of(" \t"));
    trimmed.erase(trimmed.find_last_not_of(" \t") + 1);
    AlgoId id;
    if (parseAlgoName(trimmed.c_str(), &id)) item = algoName(id);
    out += (out.empty() || out == "^" ? "" : ",") + item;
    at = comma + 1;
  }
  return out;
}

// An unset or bad list allows the defaults; a bad one says so once.
NameList listFromEnv(const char* var, const std::vector<std::string>& known,
                     std::string (*canonical)(const std::string&) = nullptr) {
  NameList list;
  auto text = envString(var);
  if (!text) return list;
  Status s = NameList::parse(canonical ? canonical(*text) : *text, known, &list);
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
  c.algo = listFromEnv("LANES_ALGO", hostAlgoNames(), canonicalAlgoList);
  c.smallBytes = static_cast<size_t>(envSize("LANES_SMALL_MSG_BYTES", c.smallBytes));
  c.llMaxBytes =
      static_cast<size_t>(envSize("LANES_LL_MAX_BYTES", c.llMaxBytes, 0, kLlHardMaxBytes));
  c.llSharedGpu = envBool("LANES_LL_SHARED_GPU", c.llSharedGpu);
  c.sharedContextMaxBytes =
      static_cast<size_t>(envSize("LANES_SHARED_CONTEXT_MAX_BYTES", c.sharedContextMaxBytes));
  c.sharedGpuProxyBytes =
      static_cast<size_t>(envSize("LANES_SHARED_GPU_PROXY_BYTES", c.sharedGpuProxyBytes));
  c.stagedGatherScatter = envBool("LANES_STAGED_COLLECTIVES", c.stagedGatherScatter);
  return c;
}

bool pathAllowed(const SelectionConfig& config, DevicePath path) {
  return config.proto.allows(devicePathName(path), path != DevicePath::LlThreads);
}

}  // namespace lanes
