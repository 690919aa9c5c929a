#include "core/init.h"

#include <unistd.h>

#include <cstring>
#include <optional>
#include <string_view>
#include <thread>

#include "base/env.h"
#include "base/host_id.h"
#include "base/log.h"
#include "base/nccl_env.h"
#include "core/comm_registry.h"
#include "core/comm_topology.h"
#include "core/errors.h"
#include "core/group.h"
#include "core/ib_port_choice.h"
#include "core/observers.h"
#include "core/socket_interface_choice.h"
#include "core/watchdog.h"
#include "exec/device_path.h"
#include "planner/host_costs.h"
#include "planner/registry.h"
#include "transport/shm/stale_segments.h"

namespace lanes {

Status parseConfig(const lanesConfig_t* config, CommOptions* out) {
  CommOptions o;
  o.timeoutSeconds = defaultTimeoutSeconds();
  if (config != nullptr) {
    if (config->magic != LANES_CONFIG_MAGIC || config->size < offsetof(lanesConfig_t, reserved))
      return invalidArgument(
          "config was not initialised with LANES_CONFIG_INITIALIZER (bad magic or size); start "
          "from `lanesConfig_t config = LANES_CONFIG_INITIALIZER;`");
    if (config->blocking != LANES_CONFIG_UNDEF_INT) {
      if (config->blocking != 0 && config->blocking != 1)
        return invalidArgument("config.blocking must be 0 or 1, got " +
                               std::to_string(config->blocking));
      o.blocking = config->blocking == 1;
    }
    if (config->timeoutSeconds != LANES_CONFIG_UNDEF_INT) {
      if (config->timeoutSeconds <= 0)
        return invalidArgument("config.timeoutSeconds must be positive, got " +
                               std::to_string(config->timeoutSeconds));
      o.timeoutSeconds = config->timeoutSeconds;
    }
    if (config->commName != nullptr) o.name = config->commName;
    const int wire = config->wireFormat;
    if (wire != LANES_CONFIG_UNDEF_INT && wire != lanesWireDefault) {
      if (wire < lanesWireNative || wire > lanesWireFp8)
        return invalidArgument(
            "config.wireFormat must be a lanesWireFormat_t (lanesWireNative, lanesWireBf16 or "
            "lanesWireFp8), got " +
            std::to_string(wire));
      o.wire = wire == lanesWireBf16  ? WireFormat::Bf16
               : wire == lanesWireFp8 ? WireFormat::Fp8
                                      : WireFormat::Native;
    }
  }
  *out = o;
  return Status::ok();
}

namespace {

std::string hexId(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Without LANES_SOCKET_IFNAME, the socket transport listens on the interface
// nearest the rank's GPU where the topology places one in the PCI tree.
void chooseSocketInterface(const lanesComm* comm, TransportConfig* config) {
  if (!config->socketIfname.empty()) return;
  std::vector<InterfaceAddress> interfaces;
  if (!findInterfaces("", &interfaces).isOk()) return;  // the transport reports it
  const InterfaceChoice c =
      nearestInterface(interfaces, comm->bootstrap->id().family, processTopology(), comm->cudaDev);
  if (c.name.empty()) return;
  config->socketIfname = "=" + c.name;
  LANES_INFO(Init, comm->rank, "tcp: interface %s, %s from GPU %d (LANES_SOCKET_IFNAME overrides)",
             c.name.c_str(), topo::pathName(c.distance).c_str(), comm->cudaDev);
}

// Connects every peer through the first transport that can reach it and
// takes it (shared memory within a host, then verbs, then TCP, which takes
// every peer left).
Status connectPeers(lanesComm* comm, double timeoutSeconds) {
  const auto& ranks = comm->bootstrap->ranks();
  const RankInfo& self = ranks[comm->rank];
  const bool shmDisabled = comm->config.transport.shmDisabled;
  std::vector<std::unique_ptr<Transport>> transports;
  transports.push_back(makeShmTransport());
  if (auto ib = makeIbTransport()) transports.push_back(std::move(ib));
  transports.push_back(makeSocketTransport());

  removeStaleSegmentsAndWarn(comm->rank, "lanes-", kStaleMinAge);
  TransportContext ctx;
  ctx.bootstrap = comm->bootstrap.get();
  ctx.rank = comm->rank;
  ctx.nranks = comm->nranks;
  ctx.ranks = &ranks;
  ctx.commTag = "lanes-" + hexId(comm->bootstrap->id().commId);
  ctx.lanes = comm->config.lanes;
  ctx.config = comm->config.transport;
  bool oneHost = true;
  for (const RankInfo& r : ranks) oneHost = oneHost && r.hostHash == self.hostHash;
  if (!oneHost) {
    chooseIbPort(topo::readRdmaPorts(), processTopology(), comm->cudaDev, &ctx.config.ib);
    chooseSocketInterface(comm, &ctx.config);
  }
  ctx.timeoutSeconds = timeoutSeconds;
  ctx.checkAbort = [comm] { return comm->checkAbort(); };
  {
    std::lock_guard<std::mutex> lock(comm->links.mutex);
    comm->links.connections.resize(comm->nranks);
  }
  // Every rank runs every transport's connect (collective), even with no peers.
  for (const auto& transport : transports) {
    std::vector<int> peers;
    {
      std::lock_guard<std::mutex> lock(comm->links.mutex);
      for (int p = 0; p < comm->nranks; ++p)
        if (p != comm->rank && !comm->links.connections[p] &&
            !(shmDisabled && transport == transports.front()) &&
            transport->canConnect(self, ranks[p]))
          peers.push_back(p);
    }
    std::vector<std::unique_ptr<Connection>> conns;
    LANES_RETURN_IF_ERROR(transport->connect(ctx, peers, &conns));
    if (conns.size() != peers.size())
      return internalError(std::string("transport ") + transport->name() +
                           " returned the wrong number of connections");
    std::lock_guard<std::mutex> lock(comm->links.mutex);
    for (size_t i = 0; i < conns.size(); ++i)
      if (conns[i]) comm->links.connections[peers[i]] = std::move(conns[i]);
  }
  {
    std::lock_guard<std::mutex> lock(comm->links.mutex);
    for (int p = 0; p < comm->nranks; ++p)
      if (p != comm->rank && !comm->links.connections[p])
        return internalError("no transport connected rank " + std::to_string(p));
  }
  comm->localRanks = 0;
  comm->processRanks = 0;
  for (const RankInfo& r : ranks) {
    comm->localRanks += r.hostHash == self.hostHash ? 1 : 0;
    comm->processRanks += r.hostHash == self.hostHash && r.pid == self.pid ? 1 : 0;
  }
  // A rank's TCP peers are served by worker threads of its own that need a
  // core while its engine waits for them: spinning there only delays them.
  int tcpPeers = 0;
  bool pollingSyscalls = false;
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank) continue;
    const Connection& c = *comm->links.connections[p];
    if (std::string_view(c.transportName()) == "tcp") ++tcpPeers;
    pollingSyscalls = pollingSyscalls || c.pollingMakesSystemCalls();
  }
  comm->spinLimit = spinLimitFor(
      threadsMovingBytes(comm->localRanks, tcpPeers, comm->config.transport.socketThreads),
      pollingSyscalls);
  comm->links.table.assign(comm->nranks, nullptr);
  for (int p = 0; p < comm->nranks; ++p) comm->links.table[p] = comm->links.connections[p].get();
  return Status::ok();
}

// Host summation of host buffers (exec/arena_sum.h) needs the ranks' shared
// arena: made here, collectively, for 2 to kSharedSumMaxRanks ranks of one
// host unless LANES_ALGO leaves shared_sum out. Made at init because a call
// may not wait on its peers outside the executor (one thread may drive
// several ranks in a group). Where it cannot be made, every rank says so and
// plans without it; only a failed agreement fails the communicator.
Status setUpSumArena(lanesComm* comm) {
  SelectionConfig& selection = comm->config.selection;
  bool oneHost = true;
  for (const RankPlacement& p : comm->placement)
    oneHost = oneHost && p.hostHash == comm->placement.front().hostHash;
  selection.sharedSumUsable = oneHost && comm->nranks > 1 && comm->nranks <= kSharedSumMaxRanks &&
                              selection.algo.allows(algoName(AlgoId::SharedSum), true);
  if (!selection.sharedSumUsable) return Status::ok();
  bool fatal = false;
  Status made =
      SumArena::create(*comm->bootstrap, "lanes-" + hexId(comm->bootstrap->id().commId),
                       Deadline::after(comm->options.timeoutSeconds), &comm->sumArena, &fatal);
  if (fatal) return made;
  if (!made) {
    LANES_WARN(Init, comm->rank, "host summation of host buffers is off: %s",
               made.message().c_str());
    selection.sharedSumUsable = false;
  }
  return Status::ok();
}

void logTopology(const lanesComm* comm) {
  if (!logEnabled(LogLevel::Info, LogSubsys::Init)) return;
  const auto& ranks = comm->bootstrap->ranks();
  LANES_INFO(Init, comm->rank, "comm %p%s%s: rank %d of %d, %d lanes, timeout %.0f s",
             static_cast<const void*>(comm), comm->options.name.empty() ? "" : " ",
             comm->options.name.c_str(), comm->rank, comm->nranks, comm->config.lanes,
             comm->options.timeoutSeconds);
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank) continue;
    const Connection* c = comm->links.connections[p].get();
    LANES_INFO(Init, comm->rank, "  peer %d (%s pid %d): transport %s", p, ranks[p].hostname,
               ranks[p].pid, c ? c->transportName() : "none");
  }
}

}  // namespace

namespace {

Status checkInitArgs(const lanesUniqueId& id, int nranks, int rank, UniqueIdData* idData) {
  if (nranks < 1)
    return invalidArgument("nranks must be at least 1, got " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    return invalidArgument("rank " + std::to_string(rank) + " is outside [0, " +
                           std::to_string(nranks) + ")");
  return decodeUniqueId(id, idData);
}

std::unique_ptr<lanesComm> newComm(int nranks, int rank, const CommOptions& options) {
  auto comm = std::make_unique<lanesComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->options = options;
  comm->config = CommConfig::fromEnv();
  if (options.adjustConfig) options.adjustConfig(comm->config);
  comm->flight = std::make_unique<FlightRecorder>(comm->config.flightEntries);
  if (options.wire) comm->config.selection.wire = *options.wire;
  comm->cudaDev = options.hostOnly ? -1 : currentCudaDevice();  // -1 without CUDA
  return comm;
}

// Everything after the object exists: join the bootstrap, connect, set up the
// device paths. On failure the bootstrap is shut down again.
Status setUpComm(lanesComm* comm, const Bootstrap::Join& join) {
  logVersionOnce(comm->rank);
  logNcclEnvironmentOnce(comm->rank);
  RankInfo self;
  self.rank = comm->rank;
  self.hostHash = hostHash();
  self.pid = getpid();
  self.cudaDev = comm->cudaDev;
  std::string host = hostName();
  std::strncpy(self.hostname, host.c_str(), sizeof(self.hostname) - 1);

  const CommOptions& options = comm->options;
  Deadline deadline = Deadline::after(std::max(options.timeoutSeconds, bootstrapTimeoutSeconds()));
  LANES_RETURN_IF_ERROR(join(self, deadline, &comm->bootstrap));
  // On an early return the monitor thread could still call the handler below
  // while `comm` is being destroyed: stop the bootstrap first.
  struct StopBootstrapOnError {
    lanesComm* c;
    bool done = false;
    ~StopBootstrapOnError() {
      if (!done && c->bootstrap) c->bootstrap->shutdown();
    }
  } stopOnError{comm};
  comm->bootstrap->setFailureHandler([comm](int deadRank, const std::string& why) {
    comm->fail(lanesRemoteError,
               why +
                   ". Every rank of this communicator is affected; destroy it "
                   "(lanesCommAbort) and restart the job or recreate the communicator among "
                   "the survivors (lanesCommShrink).",
               deadRank, why);
  });
  LANES_RETURN_IF_ERROR(comm->checkAbort());  // aborted while the bootstrap formed
  attachWatchdog(comm);  // answer peers' progress queries; LANES_CHECK_MISMATCH
  Status status = connectPeers(comm, options.timeoutSeconds);
  if (!status) {
    comm->bootstrap->spreadFailure(comm->rank,
                                   "rank " + std::to_string(comm->rank) +
                                       " could not connect its transports: " + status.message());
    return status;
  }
  // Nobody may use a connection before every rank finished connecting.
  LANES_RETURN_IF_ERROR(comm->bootstrap->barrier(Deadline::after(options.timeoutSeconds)));
  LANES_RETURN_IF_ERROR(exchangePlacement(comm));  // topology: once per process
  LANES_RETURN_IF_ERROR(setUpSumArena(comm));
  bool allHaveGpus = true;
  for (const RankInfo& r : comm->bootstrap->ranks()) allHaveGpus = allHaveGpus && r.cudaDev >= 0;
  if (allHaveGpus) LANES_RETURN_IF_ERROR(setUpDevicePaths(comm));
  logTopology(comm);
  attachObservers(comm);
  stopOnError.done = true;
  return Status::ok();
}

// Calls of this thread's open group that created communicators: the group's
// end waits for them (NCCL's rule: init inside a group completes at its end).
thread_local std::vector<lanesComm_t> tlsGroupInits;

}  // namespace

Status initComm(const lanesUniqueId& id, int nranks, int rank, const CommOptions& options,
                lanesComm_t* out) {
  UniqueIdData idData;
  LANES_RETURN_IF_ERROR(checkInitArgs(id, nranks, rank, &idData));
  return initCommWith(
      [idData, nranks](const RankInfo& self, Deadline deadline, std::unique_ptr<Bootstrap>* b) {
        return Bootstrap::create(idData, nranks, self, deadline, b);
      },
      nranks, rank, options, out);
}

Status initCommWith(Bootstrap::Join join, int nranks, int rank, const CommOptions& options,
                    lanesComm_t* out) {
  if (!options.blocking || inGroup()) return startInit(std::move(join), nranks, rank, options, out);
  auto comm = newComm(nranks, rank, options);
  LANES_RETURN_IF_ERROR(setUpComm(comm.get(), join));
  *out = comm.release();
  registerComm(*out);
  return Status::ok();
}

Status startInit(Bootstrap::Join join, int nranks, int rank, const CommOptions& options,
                 lanesComm_t* out) {
  std::unique_ptr<lanesComm> owned = newComm(nranks, rank, options);
  lanesComm* comm = owned.release();
  comm->init.state.store(lanesInProgress);
  registerComm(comm);
  if (inGroup()) tlsGroupInits.push_back(comm);
  comm->init.thread = std::thread([comm, join = std::move(join)] {
    Status st = setCudaDevice(comm->cudaDev);
    if (st) st = setUpComm(comm, join);
    if (!st) {
      std::lock_guard<std::mutex> lock(comm->errorMutex);
      comm->lastError = st.message();
    }
    std::unique_lock<std::mutex> lock(comm->init.mutex);
    comm->init.status = st;
    comm->init.state.store(st.code());
    comm->init.done.notify_all();
    if (!comm->init.abandoned) return;
    lock.unlock();
    // lanesCommAbort (or a destroy) came meanwhile and left the rest to this thread.
    if (comm->failure.aborted.load()) spreadAbort(comm);
    releaseComm(comm, false);
  });
  *out = comm;
  return options.blocking ? Status::ok() : Status(lanesInProgress, "");
}

Status awaitInit(lanesComm* comm) {
  if (comm->init.state.load() == lanesSuccess) return Status::ok();
  std::unique_lock<std::mutex> lock(comm->init.mutex);
  // Bounded: the init's own waits end by the bootstrap and operation timeouts;
  // an abort (lanesCommAbort notifies) ends this wait at once.
  comm->init.done.wait(lock, [comm] {
    return comm->init.state.load() != lanesInProgress || comm->failure.aborted.load();
  });
  if (comm->init.state.load() == lanesInProgress)
    return invalidUsage("communicator " + comm->describe() +
                        " was aborted (lanesCommAbort) while it was being created");
  if (comm->init.status) return Status::ok();
  return Status(
      comm->init.status.code(),
      "communicator " + comm->describe() + " could not be created: " + comm->init.status.message());
}

Status awaitGroupInits() {
  std::vector<lanesComm_t> comms = std::move(tlsGroupInits);
  tlsGroupInits.clear();
  Status first;
  for (lanesComm_t c : comms) {
    CommRef ref(c);
    if (!ref) continue;  // aborted meanwhile
    Status st = awaitInit(c);
    if (!st && first) first = st;
  }
  return first;
}

Status initThreadRanks(const std::vector<int>& devices, const CommOptions& options,
                       lanesComm_t* comms) {
  const int n = static_cast<int>(devices.size());
  lanesUniqueId id;
  LANES_RETURN_IF_ERROR(createUniqueIdAndRoot("", nullptr, &id));
  std::vector<Status> results(devices.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    comms[r] = nullptr;
    threads.emplace_back([&, r] {
      const int dev = devices[static_cast<size_t>(r)];
      std::optional<ScopedQuietLog> quiet;
      if (options.quietLog) quiet.emplace();
      CommOptions mine = options;
      mine.hostOnly = mine.hostOnly || dev < 0;
      results[r] = setCudaDevice(dev);
      if (results[r]) results[r] = initComm(id, n, r, mine, &comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (results[r]) continue;
    for (int k = 0; k < n; ++k) {
      if (comms[k] != nullptr) {
        lanesCommAbort(comms[k]);
        comms[k] = nullptr;
      }
    }
    return Status(results[r].code(),
                  "lanesCommInitAll: rank " + std::to_string(r) + ": " + results[r].message());
  }
  return Status::ok();
}

}  // namespace lanes

using namespace lanes;

extern "C" {

lanesResult_t lanesGetVersion(int* version) {
  if (version == nullptr) return report(nullptr, invalidArgument("version is NULL"));
  *version = LANES_VERSION_CODE;
  return lanesSuccess;
}

lanesResult_t lanesGetUniqueId(lanesUniqueId* uniqueId) {
  if (uniqueId == nullptr) return report(nullptr, invalidArgument("uniqueId is NULL"));
  return report(nullptr, createUniqueIdAndRoot("", nullptr, uniqueId));
}

lanesResult_t lanesCommInitRankConfig(lanesComm_t* comm, int nranks, lanesUniqueId commId, int rank,
                                      lanesConfig_t* config) {
  if (comm == nullptr) return report(nullptr, invalidArgument("comm (the output pointer) is NULL"));
  *comm = nullptr;
  CommOptions options;
  Status status = parseConfig(config, &options);
  if (status) status = initComm(commId, nranks, rank, options, comm);
  return report(nullptr, status);
}

lanesResult_t lanesCommInitRankScalable(lanesComm_t* newcomm, int nranks, int myrank, int nId,
                                        lanesUniqueId* commIds, lanesConfig_t* config) {
  if (newcomm == nullptr)
    return report(nullptr, invalidArgument("newcomm (the output pointer) is NULL"));
  *newcomm = nullptr;
  if (nId < 1)
    return report(nullptr, invalidArgument("lanesCommInitRankScalable: nId must be at least 1, "
                                           "got " +
                                           std::to_string(nId)));
  if (commIds == nullptr)
    return report(nullptr, invalidArgument("lanesCommInitRankScalable: commIds is NULL"));
  // Every id must be one Lanes made; the first root serves the whole rendezvous.
  UniqueIdData first;
  for (int i = 0; i < nId; ++i) {
    UniqueIdData data;
    Status st = decodeUniqueId(commIds[i], &data);
    if (i == 0) first = data;
    if (!st)
      return report(nullptr, Status(st.code(), "lanesCommInitRankScalable: commIds[" +
                                                   std::to_string(i) + "]: " + st.message()));
    if (i > 0 && data.commId != first.commId) retireLocalRoot(data);  // a repeat is the one in use
  }
  return lanesCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

lanesResult_t lanesCommInitRank(lanesComm_t* comm, int nranks, lanesUniqueId commId, int rank) {
  return lanesCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

lanesResult_t lanesCommInitAll(lanesComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr) return report(nullptr, invalidArgument("comms is NULL"));
  if (ndev < 1)
    return report(nullptr, invalidArgument("ndev must be at least 1, got " + std::to_string(ndev)));
  // Ranks beyond the GPU count share GPUs round-robin (NCCL refuses; Lanes allows it).
  const int ngpus = cudaDeviceCount();
  std::vector<int> devices(static_cast<size_t>(ndev));
  for (int r = 0; r < ndev; ++r)
    devices[static_cast<size_t>(r)] =
        devlist != nullptr ? devlist[r] : (ngpus > 0 ? r % ngpus : -1);
  CommOptions options;
  options.timeoutSeconds = defaultTimeoutSeconds();
  return report(nullptr, initThreadRanks(devices, options, comms));
}

lanesResult_t lanesCommInitFromEnv(lanesComm_t* comm, lanesConfig_t* config) {
  if (comm == nullptr) return report(nullptr, invalidArgument("comm (the output pointer) is NULL"));
  *comm = nullptr;
  CommOptions options;
  Status status = parseConfig(config, &options);
  LaunchEnv env;
  lanesUniqueId id;
  if (status && mpiLaunchWithoutRoot()) {
    status = mpiUniqueId(&env, &id);
  } else {
    if (status) status = readLaunchEnv(&env);
    if (status) status = uniqueIdFromLaunchEnv(env, &id);
  }
  if (status) status = initComm(id, env.worldSize, env.rank, options, comm);
  return report(nullptr, status);
}

}  // extern "C"
