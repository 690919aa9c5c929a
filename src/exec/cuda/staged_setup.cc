// The host-staged path's setup, agreement and teardown: what every rank
// states and how the ranks agree on it, the local resources (streams, events,
// scratch), the channel (P2P slots where every GPU reaches every other, else
// the host arena; transport/channel/stage_channel.h), the failure hook, and
// the destruction that keeps what a peer or a stream may still touch.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/cuda_check.h"
#include "base/log.h"
#include "exec/comm_config.h"
#include "exec/cuda/device_scope.h"
#include "exec/cuda/staged_collectives.h"
#include "exec/per_communicator.h"
#include "exec/stage_stream_policy.h"
#include "exec/staged_chunking.h"
#include "kernels/cuda/reduce.h"
#include "transport/p2p/ipc_slots.h"

namespace lanes {
namespace {

using staged::kMiB;
using staged::roundUp;

// What every rank states before the path is used; all must match, except
// the proxy size, of which the smallest applies.
struct Proposal {
  int32_t willing = 0;
  int32_t gatherScatter = 0;  // LANES_STAGED_COLLECTIVES (default 1): all must say yes
  int32_t slots = 0;
  uint64_t chunkBytes = 0;
  uint64_t pairChunkBytes = 0;
  int32_t pairP2p = 0;  // LANES_PROTO names p2p_pairs: all must say yes
  uint64_t sharedGpuProxyBytes = 0;
  int32_t hostSumThreads = 1;  // the fewest of the ranks' applies
};

// The context's hardware queues (CUDA's default is 8).
int64_t hardwareQueues() {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int queues = v != nullptr ? std::atoi(v) : 0;
  return queues > 0 ? queues : 8;
}

// The internal streams of one set (stage_streams.h): down, upload, reduce, up.
constexpr int64_t kInternalStreams = 4;

// Too few queues and streams of different ranks share them: submission
// order keeps that safe (submit_ledger.h), but a wait at a queue's head holds
// back the unrelated work behind it.
void warnAboutQueues(CommView comm, bool sharedStreams) {
  // Their streams share the context's hardware queues.
  const std::vector<int> sharing = comm.ranksSharingMyContext();
  if (sharing.size() < 2 || sharing.front() != comm.rank()) return;  // once per process and GPU
  const int64_t queues = hardwareQueues();
  const auto ranks = static_cast<int64_t>(sharing.size());
  // Each rank's own stream, and one internal set per rank or one for all.
  const int64_t needed = ranks + kInternalStreams * (sharedStreams ? 1 : ranks);
  if (queues < needed)
    LANES_WARN(Init, comm.rank(),
               "%d ranks of this process share GPU %d: their %lld streams exceed "
               "CUDA_DEVICE_MAX_CONNECTIONS=%lld hardware queues, so a stream waiting for a "
               "peer holds back the work queued behind it (slower, not unsafe). Set "
               "CUDA_DEVICE_MAX_CONNECTIONS=32 before the first CUDA call, or run ranks as "
               "processes.",
               static_cast<int>(ranks), comm.cudaDev(), static_cast<long long>(needed),
               static_cast<long long>(queues));
}

}  // namespace

Status StagedCollectives::createLocalResources() {
  LANES_RETURN_IF_ERROR(StreamMemops::get(&memops_));
  // Uploading the peers' segments on a stream of its own lets chunk g+1's
  // upload run while chunk g's result goes down. That wins even where the
  // ranks of one context then have more streams than hardware queues
  // (docs/gpu_data_path.md has the measurements).
  LANES_RETURN_IF_ERROR(StageStreams::create(&ownStreams_));
  useStreams(*ownStreams_);
  for (cudaEvent_t* e : {&downDone_, &uploadDone_, &reduceDone_[0], &reduceDone_[1]})
    LANES_CUDA_RETURN(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  return Status::ok();
}

void StagedCollectives::useStreams(const StageStreams& set) {
  down_ = set.down;
  upload_ = set.upload;
  reduce_ = set.reduce;
  up_ = set.up;
}

Status StagedCollectives::shareStreamsIfWanted(bool p2pSlots) {
  // Thread ranks of one GPU share one set (stage_streams.h) where the slots
  // are in host memory: their copies then take turns on the engines the way
  // separate processes' do, which is faster than a set each
  // (docs/gpu_data_path.md, "Several ranks on one GPU").
  const bool share = shareStageStreams(comm_.config().stageSharedStreams, p2pSlots,
                                       comm_.ranksSharingMyContext().size());
  if (!share) return Status::ok();
  auto shared = sharedPerCommunicator<SharedStageStreams>(comm_.commId());
  StageStreams* set = nullptr;
  LANES_RETURN_IF_ERROR(shared->get(comm_.cudaDev(), &set));
  sharedStreams_ = std::move(shared);
  useStreams(*set);
  ownStreams_.reset();  // never used
  return Status::ok();
}

void StagedCollectives::releaseLocalResources() {
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (wireScratch_ != nullptr) cudaFree(wireScratch_);
  wireScratch_ = nullptr;
  for (cudaEvent_t e : {downDone_, uploadDone_, reduceDone_[0], reduceDone_[1]})
    if (e != nullptr) cudaEventDestroy(e);
  ownStreams_.reset();
  sharedStreams_.reset();  // the last rank holding them destroys them
  scratch_ = nullptr;
  downDone_ = uploadDone_ = reduceDone_[0] = reduceDone_[1] = nullptr;
  down_ = upload_ = reduce_ = up_ = nullptr;
}

Status StagedCollectives::setup() {
  DeviceScope device(comm_.cudaDev());
  const int n = comm_.nranks();
  if (n == 1) {
    enabled_ = true;  // one rank: a single copy kernel on the user's stream
    return Status::ok();
  }
  Deadline deadline = comm_.deadline();
  StageArenaConfig config = comm_.config().stage;
  const SelectionConfig& selection = comm_.selection();
  // No pair slots where LANES_PROTO leaves both of their entries out.
  if (!pathAllowed(selection, DevicePath::Pairs) && !pathAllowed(selection, DevicePath::P2pPairs))
    config.pairChunkBytes = 0;

  // 1. What this rank can do; every rank must say yes with the same sizes.
  std::string why;
  Status local;
  if (!pathAllowed(selection, DevicePath::Staged) && !pathAllowed(selection, DevicePath::HostSum)) {
    why = "LANES_PROTO=" + selection.proto.text() + " leaves out staged and host_sum";
  } else if (static_cast<size_t>(n) * 16 > config.chunkBytes) {
    // Every segment of a chunk is at least 16 bytes, and all must fit one slot.
    why = std::to_string(n) + " ranks need slots of at least " + std::to_string(n * 16) +
          " bytes (LANES_STAGE_CHUNK_BYTES)";
  } else {
    local = createLocalResources();
    if (local) {
      StageArenaLayout layout(n, config);
      // Room per segment in each scratch half: a segment is at most
      // ceil(chunk/n) elements rounded up to 16 bytes (the reductions place
      // theirs `seg` bytes apart, which fits).
      scratchStride_ = roundUp(layout.chunkBytes / n + 32, 256);
      // Two halves (chunk parity), so one chunk's upload overlaps the previous
      // chunk's reduce. Each: n - 1 peer segments, plus a copy of my own for
      // in-place calls of more ranks than one reduce pass takes (the reductions).
      scratchSegments_ = n > cuda::kMaxReduceSources ? n : n - 1;
      local = cudaStatus(cudaMalloc(&scratch_, 2 * scratchStride_ * scratchSegments_),
                         "cudaMalloc (scratch)");
      // Host summation's frames (staged_host_sum.cc): a slot's worth each way.
      if (local && comm_.selection().wire != WireFormat::Native) {
        wireScratchHalf_ = layout.chunkBytes;
        void* wire = nullptr;
        local = cudaStatus(cudaMalloc(&wire, 2 * wireScratchHalf_), "cudaMalloc (wire frames)");
        wireScratch_ = static_cast<std::byte*>(wire);
      }
    }
    if (!local) why = local.message();
  }
  Proposal mine;
  mine.willing = why.empty() ? 1 : 0;
  mine.slots = config.slots;
  mine.chunkBytes = config.chunkBytes;
  mine.pairChunkBytes = config.pairChunkBytes;
  mine.pairP2p = pathAllowed(selection, DevicePath::P2pPairs) ? 1 : 0;
  // LANES_SHARED_GPU_PROXY_BYTES: all-reduces up to this size between processes
  // sharing a GPU go to the host proxy. Each of the staged path's hand-offs
  // waits for a time slice there, which costs small calls more than the proxy's
  // round trip; the two break even near 256 KiB, and larger calls pipeline
  // enough chunks to hide the slices (docs/gpu_data_path.md, "Processes
  // sharing a GPU", has the table).
  mine.sharedGpuProxyBytes = comm_.selection().sharedGpuProxyBytes;
  mine.gatherScatter = comm_.selection().stagedGatherScatter ? 1 : 0;
  mine.hostSumThreads =
      hostSumThreadsFor(comm_.config().hostSumThreads, n,
                        static_cast<int>(std::max(1U, std::thread::hardware_concurrency())));
  std::vector<Proposal> all(static_cast<size_t>(n));
  all[static_cast<size_t>(comm_.rank())] = mine;
  LANES_RETURN_IF_ERROR(comm_.bootstrap().allGather(all.data(), sizeof(Proposal), deadline));
  for (int r = 0; r < n && why.empty(); ++r) {
    const Proposal& p = all[static_cast<size_t>(r)];
    if (!p.willing)
      why = "rank " + std::to_string(r) + " cannot use it (its log says why)";
    else if (p.slots != mine.slots || p.chunkBytes != mine.chunkBytes ||
             p.pairChunkBytes != mine.pairChunkBytes)
      why =
          "LANES_STAGE_CHUNK_BYTES / LANES_STAGE_SLOTS / LANES_STAGE_PAIR_CHUNK_BYTES differ "
          "between rank " +
          std::to_string(r) + " and rank " + std::to_string(comm_.rank());
  }
  gatherScatter_ = true;
  bool pairP2p = config.pairChunkBytes > 0;
  hostSumThreads_ = mine.hostSumThreads;
  for (const Proposal& p : all) {
    hostSumThreads_ = std::min(hostSumThreads_, static_cast<int>(p.hostSumThreads));
    gatherScatter_ = gatherScatter_ && p.gatherScatter == 1;
    pairP2p = pairP2p && p.pairP2p == 1;
  }
  if (comm_.processesTimeSliceGpu()) {
    uint64_t agreed = mine.sharedGpuProxyBytes;
    for (const Proposal& p : all) agreed = std::min(agreed, p.sharedGpuProxyBytes);
    proxyUpToBytes_ = static_cast<size_t>(agreed);
  }

  // 2. P2P: the slots in GPU memory where every pair of GPUs reaches the
  //    other and a probe reads back correctly (collective).
  std::string p2pWhy = "not tried";
  std::unique_ptr<IpcSlots> p2p;
  if (why.empty()) {
    // In GPU memory each rank holds only its own slots, not the host arena's
    // all-rank block (the P2P channel's layout).
    const size_t p2pBytes = p2pStageBlockBytes(StageArenaLayout(n, config), pairP2p);
    LANES_RETURN_IF_ERROR(IpcSlots::create(comm_.bootstrap(), comm_.cudaDev(), p2pBytes,
                                           comm_.config().transport.p2p, comm_.p2pRefusal(),
                                           deadline, &p2p, &p2pWhy));
    p2pWhy_ = p2p ? "" : p2pWhy;
    if (p2p) config.hostData = false;
    if (p2p && pairP2p) config.pairHostData = false;
    if (!p2p && comm_.config().transport.shmDisabled)
      why = "LANES_SHM_DISABLE=1 and no P2P (" + p2pWhy + ")";
  }

  // 3. The shared arena: the flags, and the slots unless P2P holds them
  //    (collective; on failure every rank falls back alike).
  std::unique_ptr<StageArena> arena;
  if (why.empty()) {
    bool fatal = false;
    const std::string commTag = [&] {
      char buf[32];
      snprintf(buf, sizeof(buf), "lanes-%016llx", static_cast<unsigned long long>(comm_.commId()));
      return std::string(buf);
    }();
    // Each rank's GPU NUMA node: where its slots go.
    const std::vector<int> rankNodes = comm_.rankNumaNodes();
    Status s =
        StageArena::create(comm_.bootstrap(), commTag, config, rankNodes, deadline, &arena, &fatal);
    if (!s && !fatal && config.pairChunkBytes > 0 && config.pairHostData) {
      // The pair slots can be most of the arena (224 MiB at 8 ranks): without
      // them the collectives keep their path (and P2P its flags page), and
      // send/recv take the proxy. Every rank saw the same failure.
      LANES_WARN(Init, comm_.rank(),
                 "device send/recv: no room for the pair slots (%s); retrying the staging arena "
                 "without them, send/recv take the host proxy",
                 s.message().c_str());
      config.pairChunkBytes = 0;
      s = StageArena::create(comm_.bootstrap(), commTag + "-nopairs", config, rankNodes, deadline,
                             &arena, &fatal);
    }
    if (fatal) return s;
    if (!s) why = s.message();
  }
  if (!why.empty()) {
    releaseLocalResources();
    arena.reset();
    p2p.reset();
    if (!local || mine.willing)
      LANES_WARN(Init, comm_.rank(),
                 "device collectives: the host-staged copy-engine path is off (%s); using the "
                 "host proxy",
                 why.c_str());
    else
      LANES_INFO(Init, comm_.rank(), "device collectives: host proxy (%s)", why.c_str());
    return Status::ok();
  }

  // 4. Thread ranks of this process: their counter hand-offs keep
  //    submission order (submit_ledger.h), and where the slots are in host
  //    memory their stages share one set of streams.
  LANES_RETURN_IF_ERROR(shareStreamsIfWanted(p2p != nullptr));  // route() fails the communicator
  channel_ = makeChannel(std::move(arena), std::move(p2p));

  // 5. Failure handling: a failed communicator poisons the counters (and
  //    wakes this process's ranks waiting in the ledger).
  watchdog_ = std::make_unique<StagedWatchdog>(comm_, channel_.get());
  {
    StagedWatchdog* dog = watchdog_.get();
    hookIndex_ = comm_.addFailureHook(
        [dog, ledger = channel_->ledger(), who = comm_.describe()](const std::string& message) {
          dog->poison();
          if (ledger) ledger->poison(who + ": " + message);
        });
  }
  warnAboutQueues(comm_, sharedStreams_ != nullptr);
  if (config.pairChunkBytes > 0) {
    pairSent_.assign(static_cast<size_t>(n), 0);
    pairReceived_.assign(static_cast<size_t>(n), 0);
  }
  enabled_ = true;
  LANES_INFO(Init, comm_.rank(),
             "device collectives: %s copy-engine path, chunk %zu %s x %d slots, internal streams "
             "%s",
             usesP2p() ? "P2P (slots in GPU memory)" : "host-staged",
             config.chunkBytes >= kMiB ? config.chunkBytes / kMiB : config.chunkBytes / 1024,
             config.chunkBytes >= kMiB ? "MiB" : "KiB", config.slots,
             sharedStreams_ ? "shared by this process's ranks on this GPU" : "of this rank");
  if (config.pairChunkBytes > 0)
    LANES_INFO(Init, comm_.rank(),
               "device send/recv: copy-engine path, %d x %zu KiB pair slots per peer in %s",
               StageArenaLayout::kPairSlots, config.pairChunkBytes / 1024,
               config.pairHostData
                   ? "shared host memory"
                   : "the receiver's GPU memory (P2P, LANES_PROTO names p2p_pairs)");
  else
    LANES_INFO(Init, comm_.rank(),
               "device send/recv: host proxy (no pair slots: LANES_STAGE_PAIR_CHUNK_BYTES=0, "
               "LANES_PROTO leaving out pairs, "
               "LANES_SHM_DISABLE=1, or no room in /dev/shm)");
  for (int p = 0; p < n; ++p) {
    if (p == comm_.rank()) continue;
    std::string via = channel_->route(p);
    if (!usesP2p()) via += " (P2P off: " + p2pWhy + ")";
    LANES_INFO(Init, comm_.rank(), "device collectives: peer %d via %s", p, via.c_str());
  }
  return Status::ok();
}

std::unique_ptr<StageChannel> StagedCollectives::makeChannel(std::unique_ptr<StageArena> arena,
                                                             std::unique_ptr<IpcSlots> p2p) const {
  StageChannelContext context;
  context.rank = comm_.rank();
  context.who = comm_.describe();
  context.timeoutSeconds = comm_.timeoutSeconds();
  context.aborted = &comm_.abortFlag();
  context.checkAbort = [comm = comm_] { return comm.checkAbort(); };
  context.counters = memops_;
  const auto& ranks = comm_.bootstrap().ranks();
  const RankInfo& self = ranks[static_cast<size_t>(comm_.rank())];
  context.inProcess.assign(static_cast<size_t>(comm_.nranks()), false);
  for (const RankInfo& r : ranks)
    context.inProcess[static_cast<size_t>(r.rank)] =
        r.hostHash == self.hostHash && r.pid == self.pid;
  // One ledger per communicator and process, its lines the arena's counter lines.
  if (comm_.processRanks() > 1)
    context.ledger = sharedPerCommunicator<SubmitLedger>(
        comm_.commId(), arena->layout().flagsBytes / StageArenaLayout::kFlagLine);
  if (p2p) return makeP2pStageChannel(std::move(arena), std::move(p2p), std::move(context));
  return makeHostStageChannel(std::move(arena), std::move(context));
}

StagedCollectives::~StagedCollectives() {
  if (!watchdog_) {
    releaseLocalResources();
    return;
  }
  DeviceScope device(comm_.cudaDev());
  const bool failed = comm_.failed();
  if (failed) watchdog_->poison();
  bool drained = watchdog_->drain(comm_.deadline());
  if (!drained && !watchdog_->poisoned()) {
    LANES_WARN(Init, comm_.rank(),
               "destroying the communicator while its device all-reduces still wait for peers "
               "after %.0f s; releasing them (their results are undefined)",
               comm_.timeoutSeconds());
    watchdog_->poison();
    drained = watchdog_->drain(Deadline::after(10));
  }
  { comm_.removeFailureHook(hookIndex_); }
  watchdog_.reset();
  reducer_.reset();  // its threads read the slots the channel may free
  StageChannelEnd end;
  end.drained = drained;
  end.failed = failed;
  end.lastChunk = static_cast<uint32_t>(chunksIssued_);
  end.received = &pairReceived_;
  channel_->release(end);
  // Events and scratch stay too (the streams' destruction waits for their work).
  if (!drained) return;
  releaseLocalResources();
}

}  // namespace lanes
