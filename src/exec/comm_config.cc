#include "exec/comm_config.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

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
      algoName(AlgoId::Ring),           algoName(AlgoId::RecursiveDoubling),
      algoName(AlgoId::Chain),          algoName(AlgoId::Pairwise),
      algoName(AlgoId::Direct),         algoName(AlgoId::Tree),
      algoName(AlgoId::Hierarchical),   algoName(AlgoId::SharedSum),
      algoName(AlgoId::HalvingDoubling)};
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

constexpr size_t kPage = 4096;
size_t roundUp(size_t v, size_t m) { return (v + m - 1) / m * m; }

// Chunks of at least 64 KiB in whole pages; a pair chunk of 0 stays 0 (no
// pair slots: device send/recv go through the proxy).
StageArenaConfig stageFromEnv() {
  StageArenaConfig c;
  constexpr uint64_t kMinChunk = 64 * 1024;
  // Rounding up to whole pages is documented, not a correction: no warning.
  c.chunkBytes = roundUp(envSize("LANES_STAGE_CHUNK_BYTES", c.chunkBytes, kMinChunk), kPage);
  size_t pairChunk = envSize("LANES_STAGE_PAIR_CHUNK_BYTES", size_t{2} << 20);
  if (pairChunk != 0 && pairChunk < kMinChunk) {
    envWarnOnce("LANES_STAGE_PAIR_CHUNK_BYTES", envString("LANES_STAGE_PAIR_CHUNK_BYTES").value(),
                "is below its minimum 64K (or 0: no pair slots)", "64K");
    pairChunk = kMinChunk;
  }
  c.pairChunkBytes = pairChunk == 0 ? 0 : roundUp(pairChunk, kPage);
  c.slots = static_cast<int>(envInt("LANES_STAGE_SLOTS", c.slots, 2, 64));
  return c;
}

IbConfig ibFromEnv() {
  IbConfig c;
  c.disabled = envBool("LANES_IB_DISABLE", false);
  c.hca = envString("LANES_IB_HCA").value_or("");
  c.forcedGid = static_cast<int>(envInt("LANES_IB_GID_INDEX", -1, -1, 255));
  c.trafficClass = static_cast<int>(envInt("LANES_IB_TC", c.trafficClass, 0, 255));
  c.timeout = static_cast<int>(envInt("LANES_IB_TIMEOUT", c.timeout, 1, 31));
  c.retryCount = static_cast<int>(envInt("LANES_IB_RETRY_CNT", c.retryCount, 0, 7));
  c.qpsPerPeer = static_cast<int>(envInt("LANES_IB_QPS_PER_CONNECTION", c.qpsPerPeer, 1, 8));
  // A slot is at most 512 KiB (ib_wire.h) and a ring at most 256 slots.
  c.slotBytes = roundUp(envSize("LANES_IB_SLOT_BYTES", c.slotBytes, 4096, size_t{512} << 10), 16);
  c.ringBytes = static_cast<size_t>(
      envSize("LANES_IB_RING_BYTES", c.ringBytes, c.slotBytes, 256 * c.slotBytes));
  // The default too: LANES_IB_SLOT_BYTES=8K alone would ask 512 slots.
  c.ringBytes = std::clamp(c.ringBytes, c.slotBytes, 256 * c.slotBytes);
  return c;
}

TransportConfig transportFromEnv() {
  TransportConfig c;
  c.shmRingBytes = static_cast<size_t>(envSize("LANES_SHM_RING_BYTES", c.shmRingBytes, 4096));
  c.shmBudgetBytes =
      static_cast<size_t>(envSize("LANES_SHM_BUDGET", c.shmBudgetBytes, size_t{1} << 20));
  c.shmDisabled = envBool("LANES_SHM_DISABLE", false);
  c.socketIfname = envString("LANES_SOCKET_IFNAME").value_or("");
  c.socketThreads = static_cast<int>(envInt("LANES_SOCKET_NTHREADS", c.socketThreads, 1, 16));
  c.socketsPerThread =
      static_cast<int>(envInt("LANES_NSOCKS_PERTHREAD", c.socketsPerThread, 1, 16));
  if (c.socketThreads * c.socketsPerThread > TransportConfig::kMaxSocketsPerPeer) {
    envWarnOnce("LANES_NSOCKS_PERTHREAD", std::to_string(c.socketsPerThread),
                "times LANES_SOCKET_NTHREADS=" + std::to_string(c.socketThreads) + " exceeds " +
                    std::to_string(TransportConfig::kMaxSocketsPerPeer) + " sockets per peer",
                "1");
    c.socketsPerThread = 1;
  }
  c.socketStripeBytes = static_cast<size_t>(
      envSize("LANES_SOCKET_STRIPE_BYTES", c.socketStripeBytes, 4096, size_t{1} << 30));
  c.socketRingBytes = static_cast<size_t>(envSize("LANES_SOCKET_RING_BYTES", c.socketRingBytes));
  c.socketZeroCopyBytes = static_cast<size_t>(
      envSize("LANES_SOCKET_ZEROCOPY_BYTES", c.socketZeroCopyBytes, 0, size_t{1} << 30));
  c.socketBusyPollUs =
      static_cast<int>(envInt("LANES_SOCKET_BUSY_POLL", c.socketBusyPollUs, 0, 1000000));
  if (auto mover = envString("LANES_SOCKET_MOVER")) {
    if (*mover == "engine") {
      c.socketMover = SocketMover::Engine;
    } else if (*mover == "workers") {
      c.socketMover = SocketMover::Workers;
    } else if (*mover != "auto") {
      envWarnOnce("LANES_SOCKET_MOVER", *mover, "is not auto, engine or workers",
                  "auto (the engine where this host's ranks and TCP workers outnumber its cores)");
    }
  }
  c.ib = ibFromEnv();
  if (auto p2p = envString("LANES_P2P_DISABLE"); p2p && *p2p == "0")
    c.p2p = P2pMode::Forced;
  else if (envBool("LANES_P2P_DISABLE", false))
    c.p2p = P2pMode::Off;
  return c;
}

SharedStreamsMode sharedStreamsFromEnv() {
  const std::optional<std::string> value = envString("LANES_STAGE_SHARED_STREAMS");
  const SharedStreamsMode mode = parseSharedStreamsMode(value ? value->c_str() : nullptr);
  if (mode != SharedStreamsMode::Invalid) return mode;
  envWarnOnce("LANES_STAGE_SHARED_STREAMS", *value, "is not auto, 1 or 0",
              "auto (thread ranks of one GPU share the internal streams where the slots are in "
              "host memory)");
  return SharedStreamsMode::Auto;
}

// LANES_WIRE: native (unset), bf16 or fp8; anything else warns once and
// keeps native.
WireFormat wireFromEnv() {
  const std::optional<std::string> v = envString("LANES_WIRE");
  WireFormat f = WireFormat::Native;
  if (v && !parseWireFormat(*v, &f)) {
    envWarnOnce("LANES_WIRE", *v, "is not native, bf16 or fp8", "native");
    f = WireFormat::Native;
  }
  return f;
}

}  // namespace

Status parseAlgoList(const std::string& text, NameList* out) {
  return NameList::parse(canonicalAlgoList(text), hostAlgoNames(), out);
}

SelectionConfig SelectionConfig::fromEnv() {
  SelectionConfig c;
  c.proto = listFromEnv("LANES_PROTO", devicePathNames());
  c.algo = listFromEnv("LANES_ALGO", hostAlgoNames(), canonicalAlgoList);
  c.llMaxBytes =
      static_cast<size_t>(envSize("LANES_LL_MAX_BYTES", c.llMaxBytes, 0, kLlHardMaxBytes));
  c.simpleMaxBytes = static_cast<size_t>(
      envSize("LANES_SIMPLE_MAX_BYTES", c.simpleMaxBytes, 0, kSimpleHardMaxBytes));
  c.llSharedGpu = envBool("LANES_LL_SHARED_GPU", c.llSharedGpu);
  c.sharedContextMaxBytes =
      static_cast<size_t>(envSize("LANES_SHARED_CONTEXT_MAX_BYTES", c.sharedContextMaxBytes));
  c.sharedGpuProxyBytes =
      static_cast<size_t>(envSize("LANES_SHARED_GPU_PROXY_BYTES", c.sharedGpuProxyBytes));
  c.stagedGatherScatter = envBool("LANES_STAGED_COLLECTIVES", c.stagedGatherScatter);
  c.wire = wireFromEnv();
  return c;
}

CommConfig CommConfig::fromEnv() {
  CommConfig c;
  c.selection = SelectionConfig::fromEnv();
  c.transport = transportFromEnv();
  c.stage = stageFromEnv();
  // The pair slots are shared host memory, which LANES_SHM_DISABLE keeps bulk data out of.
  if (c.transport.shmDisabled) c.stage.pairChunkBytes = 0;
  // Lane 0 carries send/recv, the others collectives: at least 2.
  c.lanes = static_cast<int>(envInt("LANES_NLANES", c.lanes, 2, 64));
  c.checkMismatch = envBool("LANES_CHECK_MISMATCH", c.checkMismatch);
  c.proxyPrepinBytes = static_cast<size_t>(envSize("LANES_PROXY_PREPIN_BYTES", c.proxyPrepinBytes));
  c.stageSharedStreams = sharedStreamsFromEnv();
  c.hostSumThreads = static_cast<int>(envInt("LANES_HOST_SUM_THREADS", c.hostSumThreads, 0, 64));
  c.flightEntries = static_cast<size_t>(
      envInt("LANES_FLIGHT_RECORDER", static_cast<int64_t>(c.flightEntries), 0, int64_t{1} << 20));
  return c;
}

int hostSumThreadsFor(int configured, int ranks, int cores) {
  if (configured > 0) return configured;
  return std::clamp(cores / std::max(1, ranks), 1, 8);
}

}  // namespace lanes
