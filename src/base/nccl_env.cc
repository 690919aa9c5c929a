#include "base/nccl_env.h"

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "base/env.h"
#include "base/log.h"

extern char** environ;

namespace lanes {
namespace {

std::atomic<bool> gEnabled{false};
std::atomic<bool> gReported{false};

// Turns an NCCL value into the LANES_* one, or nullopt with *why saying why
// it changes nothing in Lanes.
using Translate = std::optional<std::string> (*)(const std::string& value, std::string* why);

// "a,b" or "^a,b": the names (trimmed) and whether they are excluded.
std::vector<std::string> splitList(const std::string& text, bool* exclude) {
  size_t start = text.find_first_not_of(" \t");
  *exclude = start != std::string::npos && text[start] == '^';
  if (*exclude) ++start;
  std::vector<std::string> names;
  while (start != std::string::npos && start <= text.size()) {
    size_t comma = std::min(text.find(',', start), text.size());
    std::string name = text.substr(start, comma - start);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (!name.empty()) names.push_back(name);
    start = comma + 1;
  }
  return names;
}

// Which of `known` an NCCL_ALGO/NCCL_PROTO list allows, as a bit per entry;
// nullopt (with *why) for per-collective lists and unknown names.
std::optional<unsigned> allowedSet(const std::string& value, const std::vector<const char*>& known,
                                   const char* what, std::string* why) {
  if (value.find_first_of(":;") != std::string::npos) {
    *why = "per-collective choices have no Lanes equivalent: Lanes chooses";
    return std::nullopt;
  }
  bool exclude = false;
  unsigned listed = 0;
  for (const std::string& name : splitList(value, &exclude)) {
    auto it = std::find_if(known.begin(), known.end(),
                           [&](const char* k) { return strcasecmp(k, name.c_str()) == 0; });
    if (it == known.end()) {
      *why = name + " is not an NCCL " + what;
      return std::nullopt;
    }
    listed |= 1u << (it - known.begin());
  }
  unsigned all = (1u << known.size()) - 1;
  return exclude ? all & ~listed : listed;
}

std::optional<std::string> debugLevel(const std::string& value, std::string* why) {
  for (const char* lvl : {"WARN", "INFO", "TRACE"})
    if (strcasecmp(value.c_str(), lvl) == 0) return std::string(lvl);
  // VERSION prints NCCL's banner and ABORT aborts on a warning: Lanes has
  // neither, and both show warnings.
  if (strcasecmp(value.c_str(), "VERSION") == 0 || strcasecmp(value.c_str(), "ABORT") == 0)
    return std::string("WARN");
  *why = "not an NCCL_DEBUG level (VERSION, WARN, INFO, ABORT, TRACE)";
  return std::nullopt;
}

std::optional<std::string> debugSubsys(const std::string& value, std::string* why) {
  static const struct {
    const char* nccl;
    const char* lanes;
  } kMap[] = {{"INIT", "INIT"},           {"COLL", "COLL"},     {"P2P", "TRANSPORT"},
              {"SHM", "TRANSPORT"},       {"NET", "TRANSPORT"}, {"PROXY", "TRANSPORT"},
              {"GRAPH", "TOPO"},          {"TUNING", "PLAN"},   {"ENV", "ENV"},
              {"BOOTSTRAP", "BOOTSTRAP"}, {"ALL", "ALL"}};
  bool exclude = false;
  std::vector<std::string> out;
  for (const std::string& name : splitList(value, &exclude))
    for (const auto& m : kMap)
      if (strcasecmp(m.nccl, name.c_str()) == 0 &&
          std::find(out.begin(), out.end(), m.lanes) == out.end())
        out.push_back(m.lanes);
  if (out.empty()) {
    *why = "names no Lanes subsystem: Lanes logs all of its own";
    return std::nullopt;
  }
  std::string joined = exclude ? "^" : "";
  for (size_t i = 0; i < out.size(); ++i) joined += (i ? "," : "") + out[i];
  return joined;
}

// NCCL's 0 is its default; LANES_*_DISABLE=0 can mean more (P2P: force it).
std::optional<std::string> disableFlag(const std::string& value, std::string* why) {
  int64_t n = 0;
  if (!parseInt64(value, &n)) {
    *why = "not an integer";
    return std::nullopt;
  }
  if (n == 0) {
    *why = "NCCL's default: Lanes keeps its own";
    return std::nullopt;
  }
  return std::string("1");
}

std::optional<std::string> algo(const std::string& value, std::string* why) {
  static const std::vector<const char*> kAlgos = {
      "Ring", "Tree", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
  auto allowed = allowedSet(value, kAlgos, "algorithm", why);
  if (!allowed) return std::nullopt;
  if (*allowed == 1u) return std::string("ring");
  *why = "Lanes chooses its algorithms; only Ring alone maps, to LANES_ALGO=ring";
  return std::nullopt;
}

std::optional<std::string> proto(const std::string& value, std::string* why) {
  static const std::vector<const char*> kProtos = {"LL", "LL128", "Simple"};
  auto allowed = allowedSet(value, kProtos, "protocol", why);
  if (!allowed) return std::nullopt;
  // Lanes' LL kernel answers to NCCL's LL; everything else has no twin.
  if ((*allowed & 1u) == 0) return std::string("^ll");
  *why = "allows LL: nothing to change";
  return std::nullopt;
}

struct Twin {
  const char* nccl;
  const char* lanes;    // null: honoured without a LANES_* variable (see note)
  Translate translate;  // null: the value as is
  const char* note;     // what honouring means where lanes is null
};

constexpr Twin kTwins[] = {
    {"NCCL_DEBUG", "LANES_DEBUG", debugLevel, nullptr},
    {"NCCL_DEBUG_SUBSYS", "LANES_DEBUG_SUBSYS", debugSubsys, nullptr},
    {"NCCL_DEBUG_FILE", "LANES_DEBUG_FILE", nullptr, nullptr},
    {"NCCL_SOCKET_IFNAME", "LANES_SOCKET_IFNAME", nullptr, nullptr},
    {"NCCL_SOCKET_NTHREADS", "LANES_SOCKET_NTHREADS", nullptr, nullptr},
    {"NCCL_NSOCKS_PERTHREAD", "LANES_NSOCKS_PERTHREAD", nullptr, nullptr},
    {"NCCL_P2P_DISABLE", "LANES_P2P_DISABLE", disableFlag, nullptr},
    {"NCCL_SHM_DISABLE", "LANES_SHM_DISABLE", disableFlag, nullptr},
    {"NCCL_ALGO", "LANES_ALGO", algo, nullptr},
    {"NCCL_PROTO", "LANES_PROTO", proto, nullptr},
    {"NCCL_IB_DISABLE", "LANES_IB_DISABLE", disableFlag, nullptr},
    {"NCCL_IB_HCA", "LANES_IB_HCA", nullptr, nullptr},
    {"NCCL_IB_GID_INDEX", "LANES_IB_GID_INDEX", nullptr, nullptr},
    {"NCCL_IB_TC", "LANES_IB_TC", nullptr, nullptr},
    {"NCCL_IB_TIMEOUT", "LANES_IB_TIMEOUT", nullptr, nullptr},
    {"NCCL_IB_RETRY_CNT", "LANES_IB_RETRY_CNT", nullptr, nullptr},
    {"NCCL_IB_QPS_PER_CONNECTION", "LANES_IB_QPS_PER_CONNECTION", nullptr, nullptr},
    {"NCCL_COMM_ID", nullptr, nullptr, "the bootstrap root's address; rank 0 starts it"},
};

const char* setValue(const char* name) {
  const char* v = name ? std::getenv(name) : nullptr;
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::optional<std::string> translated(const Twin& twin, const char* value, std::string* why) {
  return twin.translate ? twin.translate(value, why) : std::optional<std::string>(value);
}

std::string twinItem(const Twin& twin, const char* value) {
  std::string item = std::string(twin.nccl) + "=" + value;
  if (twin.lanes == nullptr) return item + " (" + twin.note + ")";
  if (const char* mine = setValue(twin.lanes))
    return item + " shadowed by " + twin.lanes + "=" + mine;
  std::string why;
  auto to = translated(twin, value, &why);
  if (!to) return item + " ignored (" + why + ")";
  return item + " -> " + twin.lanes + (*to == value ? "" : "=" + *to);
}

bool isTwin(const std::string& name) {
  return std::any_of(std::begin(kTwins), std::end(kTwins),
                     [&](const Twin& t) { return name == t.nccl; });
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

}  // namespace

void enableNcclEnvironment() { setNcclEnvironmentForTest(true); }

bool ncclEnvironmentEnabled() { return gEnabled.load(std::memory_order_acquire); }

void setNcclEnvironmentForTest(bool on) {
  gEnabled.store(on, std::memory_order_release);
  gReported.store(false, std::memory_order_relaxed);
  logConfigStale();  // NCCL_DEBUG* now count (or no longer)
}

std::optional<std::string> ncclTwinValue(const char* lanesName) {
  if (!ncclEnvironmentEnabled()) return std::nullopt;
  for (const Twin& twin : kTwins) {
    if (twin.lanes == nullptr || std::strcmp(twin.lanes, lanesName) != 0) continue;
    const char* value = setValue(twin.nccl);
    if (value == nullptr) return std::nullopt;
    std::string why;
    return translated(twin, value, &why);
  }
  return std::nullopt;
}

std::vector<std::string> ncclEnvironmentReport() {
  std::vector<std::string> read;
  for (const Twin& twin : kTwins)
    if (const char* value = setValue(twin.nccl)) read.push_back(twinItem(twin, value));
  std::vector<std::string> ignored;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (entry.rfind("NCCL_", 0) != 0 || eq == std::string::npos || eq + 1 == entry.size()) continue;
    if (!isTwin(entry.substr(0, eq))) ignored.push_back(entry);
  }
  std::sort(ignored.begin(), ignored.end());
  std::vector<std::string> lines;
  // "; " between twins: their values and reasons contain commas.
  if (!read.empty()) lines.push_back("NCCL variables read: " + join(read, "; "));
  if (!ignored.empty())
    lines.push_back("NCCL variables that mean nothing to Lanes and are ignored: " +
                    join(ignored, ", "));
  return lines;
}

void logNcclEnvironmentOnce(int rank) {
  if (!ncclEnvironmentEnabled() || gReported.exchange(true)) return;
  for (const std::string& line : ncclEnvironmentReport()) LANES_INFO(Env, rank, "%s", line.c_str());
}

std::string ncclSpelling(std::string message) {
  if (!ncclEnvironmentEnabled()) return message;
  std::string out;
  out.reserve(message.size());
  for (size_t i = 0; i < message.size();) {
    const bool wordStart = i == 0 || !(std::isalnum(static_cast<unsigned char>(message[i - 1])) ||
                                       message[i - 1] == '_');
    if (wordStart && message.compare(i, 5, "lanes") == 0 && i + 5 < message.size() &&
        std::isupper(static_cast<unsigned char>(message[i + 5]))) {
      out += "nccl";
      i += 5;
    } else if (wordStart && message.compare(i, 11, "LANES_DEBUG") == 0) {
      out += "NCCL_DEBUG";
      i += 11;
    } else {
      out += message[i++];
    }
  }
  return out;
}

}  // namespace lanes
