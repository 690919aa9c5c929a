#include "exec/cuda/staged_collectives.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/cuda_check.h"
#include "base/env.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/comm_topology.h"
#include "exec/cuda/device_scope.h"
#include "exec/cuda/staged_chunking.h"
#include "exec/cuda/stream_join.h"
#include "exec/per_communicator.h"
#include "exec/stage_stream_policy.h"
#include "kernels/cuda/reduce.h"

namespace lanes {
namespace {

using staged::ceilDiv;
using staged::kMiB;
using staged::pipelineChunkBytes;
using staged::roundUp;

bool isGatherScatter(CollType c) {
  return c == CollType::AllGather || c == CollType::Broadcast || c == CollType::ReduceScatter;
}

// Identical on every rank: depends on the requests and the host map only.
// A batch of all-reduces, or one all-gather, broadcast or reduce-scatter
// (which the path serves where the ranks agreed to, LANES_STAGED_COLLECTIVES).
bool allOnThisHost(const lanesComm* comm) {
  const auto& ranks = comm->bootstrap->ranks();
  for (const RankInfo& info : ranks)
    if (info.hostHash != ranks.front().hostHash) return false;
  return true;
}

// Thread ranks beside ranks of other processes stay on the proxy: a thread
// rank's wait for another process's counter can depend, through that
// process, on a write of a thread peer queued behind the wait, and the submit
// ledger orders only this process's writes (docs/gpu_data_path.md).
bool eligible(lanesComm* comm, const std::vector<Request>& requests) {
  if (threadsBesideProcesses(comm)) return false;
  const bool single = requests.size() == 1 && !requests.front().isP2p &&
                      isGatherScatter(requests.front().args.coll);
  for (const Request& r : requests)
    if (!single && (r.isP2p || r.args.coll != CollType::AllReduce)) return false;
  return allOnThisHost(comm);
}

// What every rank states before the path is used; all must match, except
// the proxy size, of which the smallest applies.
struct Proposal {
  int32_t willing = 0;
  int32_t gatherScatter = 0;  // LANES_STAGED_COLLECTIVES (default 1): all must say yes
  int32_t slots = 0;
  uint64_t chunkBytes = 0;
  uint64_t pairChunkBytes = 0;
  int32_t pairP2p = 0;  // LANES_STAGE_PAIR_P2P: all must say yes
  uint64_t sharedGpuProxyBytes = 0;
};

// LANES_SHARED_GPU_PROXY_BYTES: all-reduces up to this size between processes
// sharing a GPU go to the host proxy. Each of the staged path's hand-offs
// waits for a time slice there. Measured with 2 processes on one H200 (us,
// proxy / staged): 8 B 193 / 1980, 4 KiB 40 / 241, 32 KiB 64 / 245, 256 KiB
// 250 / 250, 2 MiB 1016 / 364; at 256 MiB the pipeline hides the slices
// (12.2 ms, 1.12x its bound). So the proxy up to 256 KiB.
constexpr uint64_t kSharedGpuProxyBytes = 256 * 1024;
uint64_t sharedGpuProxyBytesFromEnv() {
  return envSize("LANES_SHARED_GPU_PROXY_BYTES", kSharedGpuProxyBytes);
}

// From the counts, not Request::sendBytes: that is 0 on a broadcast's
// non-roots, and the routing must come out the same on every rank.
size_t batchBytes(const std::vector<Request>& requests) {
  size_t bytes = 0;
  for (const Request& r : requests) bytes += r.args.count * datatypeSize(r.args.type);
  return bytes;
}

// Bytes of the pair slots one receiver holds in GPU memory (LANES_STAGE_PAIR_P2P):
// kPairSlots per sender.
size_t pairSlotsPerReceiver(const StageArenaLayout& l) {
  return static_cast<size_t>(l.nranks - 1) * StageArenaLayout::kPairSlots * l.pairChunkBytes;
}

// The context's hardware queues (CUDA's default is 8).
int64_t hardwareQueues() {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int queues = v != nullptr ? std::atoi(v) : 0;
  return queues > 0 ? queues : 8;
}

// The internal streams of one set (stage_streams.h): down, reduce, up, and
// the peer-segment upload unless that runs on the reduce stream.
int64_t internalStreams(bool separateUpload) { return separateUpload ? 4 : 3; }

// Too few queues and streams of different ranks share them: submission
// order keeps that safe (submit_ledger.h), but a wait at a queue's head holds
// back the unrelated work behind it.
void warnAboutQueues(lanesComm* comm, bool separateUpload, bool sharedStreams) {
  // Their streams share the context's hardware queues.
  const std::vector<int> sharing = ranksSharingMyContext(comm);
  if (sharing.size() < 2 || sharing.front() != comm->rank) return;  // once per process and GPU
  const int64_t queues = hardwareQueues();
  const auto ranks = static_cast<int64_t>(sharing.size());
  // Each rank's own stream, and one internal set per rank or one for all.
  const int64_t needed = ranks + internalStreams(separateUpload) * (sharedStreams ? 1 : ranks);
  if (queues < needed)
    LANES_WARN(Init, comm->rank,
               "%d ranks of this process share GPU %d: their %lld streams exceed "
               "CUDA_DEVICE_MAX_CONNECTIONS=%lld hardware queues, so a stream waiting for a "
               "peer holds back the work queued behind it (slower, not unsafe). Set "
               "CUDA_DEVICE_MAX_CONNECTIONS=32 before the first CUDA call, or run ranks as "
               "processes.",
               static_cast<int>(ranks), comm->cudaDev, static_cast<long long>(needed),
               static_cast<long long>(queues));
}

}  // namespace

Status StagedCollectives::route(lanesComm* comm, const std::vector<Request>& requests,
                                StagedCollectives** out) {
  *out = nullptr;
  if (requests.empty() || !eligible(comm, requests)) return Status::ok();
  std::lock_guard<std::mutex> lock(comm->deviceMutex);
  if (!comm->staged) {
    std::unique_ptr<StagedCollectives> staged(new StagedCollectives(comm));
    Status s = staged->setup();
    comm->staged = std::move(staged);
    if (!s) {
      comm->fail(s.code(), s.message());
      return s;
    }
  }
  auto* staged = static_cast<StagedCollectives*>(comm->staged.get());
  const size_t proxyUpTo = staged->proxyUpToBytes_;
  const bool served = requests.front().args.coll == CollType::AllReduce || staged->gatherScatter_;
  if (staged->enabled_ && served && (proxyUpTo == 0 || batchBytes(requests) > proxyUpTo))
    *out = staged;
  return Status::ok();
}

Status StagedCollectives::routePairs(lanesComm* comm, std::vector<Request>& requests,
                                     std::vector<Request>* pairs, StagedCollectives** out) {
  *out = nullptr;
  if (!allOnThisHost(comm) || threadsBesideProcesses(comm)) return Status::ok();
  StagedCollectives* staged = nullptr;
  {
    // Set up at init (prepareDevicePaths) or never: a pair cannot set up a
    // path that every rank must join.
    std::lock_guard<std::mutex> lock(comm->deviceMutex);
    staged = static_cast<StagedCollectives*>(comm->staged.get());
  }
  if (staged == nullptr || !staged->enabled_ || staged->pairSent_.empty()) return Status::ok();
  const size_t proxyUpTo = staged->proxyUpToBytes_;
  auto served = [&](const Request& r) {
    return r.isP2p && r.peer != comm->rank && (proxyUpTo == 0 || r.bytes > proxyUpTo);
  };
  for (Request& r : requests)
    if (served(r)) pairs->push_back(r);
  if (pairs->empty()) return Status::ok();
  std::erase_if(requests, served);
  *out = staged;
  return Status::ok();
}

Status StagedCollectives::createLocalResources() {
  LANES_RETURN_IF_ERROR(StreamMemops::get(&memops_));
  // Uploading the peers' segments on a stream of its own lets chunk g+1's
  // upload run while chunk g's result goes down. Also where the ranks of one
  // context then have more streams than hardware queues: 256 MiB with 8
  // thread ranks (40 streams, 32 queues) took 97.9 ms so and 106.0 ms with
  // the upload on the reduce stream (H200, session 7). LANES_STAGE_OWN_UPLOAD_STREAM=0
  // puts it there.
  LANES_RETURN_IF_ERROR(
      StageStreams::create(envBool("LANES_STAGE_OWN_UPLOAD_STREAM", true), &ownStreams_));
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

Status StagedCollectives::shareStreamsIfWanted() {
  // Thread ranks of one GPU share one set (stage_streams.h) where the slots
  // are in host memory: with a set each, 256 MiB took 40.7 ms (4 ranks) and
  // 96.5 ms (8), with one 33.8 and 80.3 ms, where 4 and 8 processes took 35.0
  // and 87.1 ms (H200, session 7).
  const std::optional<std::string> value = envString("LANES_STAGE_SHARED_STREAMS");
  const SharedStreamsMode mode = parseSharedStreamsMode(value ? value->c_str() : nullptr);
  if (mode == SharedStreamsMode::Invalid)
    envWarnOnce("LANES_STAGE_SHARED_STREAMS", *value, "is not auto, 1 or 0",
                "auto (thread ranks of one GPU share the internal streams where the slots are "
                "in host memory)");
  const bool share = shareStageStreams(mode, p2p_ != nullptr, ranksSharingMyContext(comm_).size());
  if (!share) return Status::ok();
  auto shared = sharedPerCommunicator<SharedStageStreams>(comm_->bootstrap->id().commId);
  StageStreams* set = nullptr;
  LANES_RETURN_IF_ERROR(shared->get(comm_->cudaDev, upload_ != reduce_, &set));
  sharedStreams_ = std::move(shared);
  useStreams(*set);
  ownStreams_.reset();  // never used
  return Status::ok();
}

void StagedCollectives::releaseLocalResources() {
  if (scratch_ != nullptr) cudaFree(scratch_);
  for (cudaEvent_t e : {downDone_, uploadDone_, reduceDone_[0], reduceDone_[1]})
    if (e != nullptr) cudaEventDestroy(e);
  ownStreams_.reset();
  sharedStreams_.reset();  // the last rank holding them destroys them
  scratch_ = nullptr;
  downDone_ = uploadDone_ = reduceDone_[0] = reduceDone_[1] = nullptr;
  down_ = upload_ = reduce_ = up_ = nullptr;
}

Status StagedCollectives::setup() {
  DeviceScope device(comm_->cudaDev);
  const int n = comm_->nranks;
  if (n == 1) {
    enabled_ = true;  // one rank: a single copy kernel on the user's stream
    return Status::ok();
  }
  Deadline deadline = Deadline::after(comm_->options.timeoutSeconds);
  StageArenaConfig config = StageArenaConfig::fromEnv();
  // The pair slots are shared host memory, which LANES_SHM_DISABLE keeps bulk data out of.
  if (envBool("LANES_SHM_DISABLE", false)) config.pairChunkBytes = 0;

  // 1. What this rank can do; every rank must say yes with the same sizes.
  std::string why;
  Status local;
  if (envBool("LANES_STAGED_DISABLE", false)) {
    why = "LANES_STAGED_DISABLE=1";
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
      // in-place calls of more ranks than one reduce pass takes (enqueueOne).
      scratchSegments_ = n > cuda::kMaxReduceSources ? n : n - 1;
      local = cudaStatus(cudaMalloc(&scratch_, 2 * scratchStride_ * scratchSegments_),
                         "cudaMalloc (scratch)");
    }
    if (!local) why = local.message();
  }
  Proposal mine;
  mine.willing = why.empty() ? 1 : 0;
  mine.slots = config.slots;
  mine.chunkBytes = config.chunkBytes;
  mine.pairChunkBytes = config.pairChunkBytes;
  mine.pairP2p = envBool("LANES_STAGE_PAIR_P2P", false) ? 1 : 0;
  mine.sharedGpuProxyBytes = sharedGpuProxyBytesFromEnv();
  mine.gatherScatter = envBool("LANES_STAGED_COLLECTIVES", true) ? 1 : 0;
  std::vector<Proposal> all(static_cast<size_t>(n));
  all[static_cast<size_t>(comm_->rank)] = mine;
  LANES_RETURN_IF_ERROR(comm_->bootstrap->allGather(all.data(), sizeof(Proposal), deadline));
  for (int r = 0; r < n && why.empty(); ++r) {
    const Proposal& p = all[static_cast<size_t>(r)];
    if (!p.willing)
      why = "rank " + std::to_string(r) + " cannot use it (its log says why)";
    else if (p.slots != mine.slots || p.chunkBytes != mine.chunkBytes ||
             p.pairChunkBytes != mine.pairChunkBytes)
      why =
          "LANES_STAGE_CHUNK_BYTES / LANES_STAGE_SLOTS / LANES_STAGE_PAIR_CHUNK_BYTES differ "
          "between rank " +
          std::to_string(r) + " and rank " + std::to_string(comm_->rank);
  }
  gatherScatter_ = true;
  bool pairP2p = config.pairChunkBytes > 0;
  for (const Proposal& p : all) {
    gatherScatter_ = gatherScatter_ && p.gatherScatter == 1;
    pairP2p = pairP2p && p.pairP2p == 1;
  }
  if (processesShareGpu(comm_)) {
    uint64_t agreed = mine.sharedGpuProxyBytes;
    for (const Proposal& p : all) agreed = std::min(agreed, p.sharedGpuProxyBytes);
    proxyUpToBytes_ = static_cast<size_t>(agreed);
  }

  // 2. P2P: the slots in GPU memory where every pair of GPUs reaches the
  //    other and a probe reads back correctly (collective).
  std::string p2pWhy = "not tried";
  if (why.empty()) {
    StageArenaLayout layout(n, config);
    // In GPU memory each rank holds only its own K input slots and its K
    // result slots (inputSlot/resultSlot), not the host arena's all-rank block.
    // With LANES_STAGE_PAIR_P2P, the pair slots of every sender to this rank follow.
    const size_t p2pBytes = 2 * static_cast<size_t>(layout.slots) * layout.chunkBytes +
                            (pairP2p ? pairSlotsPerReceiver(layout) : 0);
    LANES_RETURN_IF_ERROR(
        IpcSlots::create(*comm_->bootstrap, comm_->cudaDev, p2pBytes, deadline, &p2p_, &p2pWhy));
    p2pWhy_ = p2p_ ? "" : p2pWhy;
    if (p2p_) config.hostData = false;
    if (p2p_ && pairP2p) config.pairHostData = false;
    if (!p2p_ && envBool("LANES_SHM_DISABLE", false))
      why = "LANES_SHM_DISABLE=1 and no P2P (" + p2pWhy + ")";
  }

  // 3. The shared arena: the flags, and the slots unless P2P holds them
  //    (collective; on failure every rank falls back alike).
  if (why.empty()) {
    bool fatal = false;
    const std::string commTag = [&] {
      char buf[32];
      snprintf(buf, sizeof(buf), "lanes-%016llx",
               static_cast<unsigned long long>(comm_->bootstrap->id().commId));
      return std::string(buf);
    }();
    std::vector<int> rankNodes;  // each rank's GPU NUMA node: where its slots go
    for (const RankPlacement& p : comm_->placement) rankNodes.push_back(p.numa);
    Status s = StageArena::create(*comm_->bootstrap, commTag, config, rankNodes, deadline, &arena_,
                                  &fatal);
    if (!s && !fatal && config.pairChunkBytes > 0 && config.pairHostData) {
      // The pair slots can be most of the arena (224 MiB at 8 ranks): without
      // them the collectives keep their path (and P2P its flags page), and
      // send/recv take the proxy. Every rank saw the same failure.
      LANES_WARN(Init, comm_->rank,
                 "device send/recv: no room for the pair slots (%s); retrying the staging arena "
                 "without them, send/recv take the host proxy",
                 s.message().c_str());
      config.pairChunkBytes = 0;
      s = StageArena::create(*comm_->bootstrap, commTag + "-nopairs", config, rankNodes, deadline,
                             &arena_, &fatal);
    }
    if (fatal) return s;
    if (!s) why = s.message();
  }
  if (!why.empty()) {
    releaseLocalResources();
    arena_.reset();
    p2p_.reset();
    if (!local || mine.willing)
      LANES_WARN(Init, comm_->rank,
                 "device collectives: the host-staged copy-engine path is off (%s); using the "
                 "host proxy",
                 why.c_str());
    else
      LANES_INFO(Init, comm_->rank, "device collectives: host proxy (%s)", why.c_str());
    return Status::ok();
  }

  // 4. Thread ranks of this process: their counter hand-offs keep
  //    submission order (submit_ledger.h), and where the slots are in host
  //    memory their stages share one set of streams.
  LANES_RETURN_IF_ERROR(shareStreamsIfWanted());  // route() fails the communicator
  {
    const auto& ranks = comm_->bootstrap->ranks();
    const RankInfo& self = ranks[static_cast<size_t>(comm_->rank)];
    inProcess_.assign(static_cast<size_t>(n), false);
    for (const RankInfo& r : ranks)
      inProcess_[static_cast<size_t>(r.rank)] = r.hostHash == self.hostHash && r.pid == self.pid;
    if (comm_->processRanks > 1)
      ledger_ = SubmitLedger::join(comm_->bootstrap->id().commId,
                                   arena_->layout().flagsBytes / StageArenaLayout::kFlagLine);
  }

  // 5. Failure handling: a failed communicator poisons the counters (and
  //    wakes this process's ranks waiting in the ledger).
  watchdog_ = std::make_unique<StagedWatchdog>(comm_, arena_.get());
  {
    std::lock_guard<std::mutex> lock(comm_->failureMutex);
    StagedWatchdog* dog = watchdog_.get();
    hookIndex_ = comm_->onFailure.size();
    // Hooks run inside fail(), under failureMutex, with the message set.
    comm_->onFailure.push_back([dog, ledger = ledger_, comm = comm_] {
      dog->poison();
      if (ledger) ledger->poison(comm->describe() + ": " + comm->failureMessage);
    });
    if (comm_->asyncError.load() != lanesSuccess) {  // failed meanwhile
      dog->poison();
      if (ledger_) ledger_->poison(comm_->describe() + ": " + comm_->failureMessage);
    }
  }
  warnAboutQueues(comm_, upload_ != reduce_, sharedStreams_ != nullptr);
  if (config.pairChunkBytes > 0) {
    pairSent_.assign(static_cast<size_t>(n), 0);
    pairReceived_.assign(static_cast<size_t>(n), 0);
  }
  enabled_ = true;
  LANES_INFO(Init, comm_->rank,
             "device collectives: %s copy-engine path, chunk %zu %s x %d slots, internal streams "
             "%s",
             p2p_ ? "P2P (slots in GPU memory)" : "host-staged",
             config.chunkBytes >= kMiB ? config.chunkBytes / kMiB : config.chunkBytes / 1024,
             config.chunkBytes >= kMiB ? "MiB" : "KiB", config.slots,
             sharedStreams_ ? "shared by this process's ranks on this GPU" : "of this rank");
  if (config.pairChunkBytes > 0)
    LANES_INFO(Init, comm_->rank,
               "device send/recv: copy-engine path, %d x %zu KiB pair slots per peer in %s",
               StageArenaLayout::kPairSlots, config.pairChunkBytes / 1024,
               config.pairHostData ? "shared host memory"
                                   : "the receiver's GPU memory (P2P, LANES_STAGE_PAIR_P2P=1)");
  else
    LANES_INFO(Init, comm_->rank,
               "device send/recv: host proxy (no pair slots: LANES_STAGE_PAIR_CHUNK_BYTES=0, "
               "LANES_SHM_DISABLE=1, or no room in /dev/shm)");
  for (int p = 0; p < n; ++p) {
    if (p == comm_->rank) continue;
    LANES_INFO(Init, comm_->rank, "device collectives: peer %d via %s", p,
               p2p_ ? p2p_->route(p).c_str()
                    : ("host staging in shared memory (P2P off: " + p2pWhy + ")").c_str());
  }
  return Status::ok();
}

StagedCollectives::~StagedCollectives() {
  if (!watchdog_) {
    releaseLocalResources();
    return;
  }
  DeviceScope device(comm_->cudaDev);
  const bool failed = comm_->aborted.load() || comm_->asyncError.load() != lanesSuccess;
  if (failed) watchdog_->poison();
  bool drained = watchdog_->drain(Deadline::after(comm_->options.timeoutSeconds));
  if (!drained && !watchdog_->poisoned()) {
    LANES_WARN(Init, comm_->rank,
               "destroying the communicator while its device all-reduces still wait for peers "
               "after %.0f s; releasing them (their results are undefined)",
               comm_->options.timeoutSeconds);
    watchdog_->poison();
    drained = watchdog_->drain(Deadline::after(10));
  }
  {
    std::lock_guard<std::mutex> lock(comm_->failureMutex);
    comm_->onFailure[hookIndex_] = nullptr;
  }
  watchdog_.reset();
  if (p2p_ && drained && !failed && !peersDone(Deadline::after(comm_->options.timeoutSeconds))) {
    LANES_WARN(Init, comm_->rank,
               "destroying the communicator before every peer finished reading this rank's GPU "
               "slots; keeping them allocated");
    p2p_->leak();
  }
  if (p2p_ && (failed || !drained)) p2p_->leak();  // a peer may still read them
  if (p2p_ && pairsUseP2p() && !sendersDone()) {
    // Senders write into this block: one that sent more than this rank took
    // (or a poisoned counter) may still be writing. Keep it allocated.
    LANES_WARN(Init, comm_->rank,
               "destroying the communicator while a peer's send into this rank's GPU pair slots "
               "was not received; keeping them allocated");
    p2p_->leak();
  }
  if (!drained) {
    LANES_WARN(Init, comm_->rank,
               "a stream still uses the host-staging arena; leaking it rather than freeing "
               "memory the GPU may touch");
    arena_->leak();
    return;  // events and scratch stay too (the streams' destruction waits for their work)
  }
  releaseLocalResources();
}

Status StagedCollectives::enqueue(std::vector<Request>& requests, cudaStream_t stream) {
  DeviceScope device(comm_->cudaDev);
  const std::vector<cudaStream_t> others = otherStreams(requests, stream);
  std::vector<cudaStream_t> streams{stream};
  streams.insert(streams.end(), others.begin(), others.end());
  for (cudaStream_t s : streams) {
    LANES_RETURN_IF_ERROR(refuseCapture(
        s,
        "capturing a Lanes collective on device buffers into a CUDA Graph is refused: the "
        "host-staged path orders ranks by chunk counters written into the streams, and a "
        "graph replay would repeat the captured counters instead of taking new ones. Issue "
        "the collective outside the capture (or set LANES_STAGED_DISABLE=1 to get the proxy's "
        "behaviour, which refuses capture too)."));
  }

  // Join: the group's other streams feed `stream`; they wait for it after.
  LANES_RETURN_IF_ERROR(joinStreams(stream, others));

  if (comm_->nranks == 1) {
    // One rank: recv = op(send) (Avg divides by 1, PreMulSum scales); the
    // gathers copy.
    for (const Request& r : requests) {
      if (r.args.count == 0) continue;
      if (r.args.coll == CollType::AllGather || r.args.coll == CollType::Broadcast) {
        if (r.args.send != r.args.recv)
          LANES_CUDA_RETURN(cudaMemcpyAsync(r.args.recv, r.args.send,
                                            r.args.count * datatypeSize(r.args.type),
                                            cudaMemcpyDeviceToDevice, stream));
        continue;
      }
      const void* src = r.args.send;
      LANES_RETURN_IF_ERROR(kernelStatus(
          cuda::launchReduce(r.args.recv, &src, 1, r.args.count, r.args.type, r.op.kind,
                             r.op.scalar, r.op.kind == RedOpKind::Avg ? 1 : 0, stream),
          "launchReduce (single rank)"));
    }
  } else {
    StagedWatchdog::Batch batch;
    LANES_RETURN_IF_ERROR(watchdog_->takeEvent(&batch.start));
    Status s = watchdog_->takeEvent(&batch.done);
    if (!s) {
      cudaEventDestroy(batch.start);
      return s;
    }
    const bool pairs = requests.front().isP2p;  // routePairs: all or none
    if (!pairs)
      batch.label = std::string("device ") + collTypeName(requests.front().args.coll) +
                    " (host-staged), " + std::to_string(requests.size()) +
                    " request(s) from chunk " + std::to_string(chunksIssued_ + 1);
    s = cudaStatus(cudaEventRecord(batch.start, stream), "cudaEventRecord (start)");
    if (s) s = cudaStatus(cudaStreamWaitEvent(down_, batch.start, 0), "cudaStreamWaitEvent");
    const uint64_t firstChunk = chunksIssued_ + pairChunksIssued_;
    if (pairs) {
      // Receives write the user's buffers on up_: after the user's stream too.
      if (s) s = cudaStatus(cudaStreamWaitEvent(up_, batch.start, 0), "cudaStreamWaitEvent");
      if (s) s = enqueuePairs(requests, &batch);
    } else {
      for (size_t i = 0; s && i < requests.size(); ++i) s = enqueueOne(requests[i]);
    }
    // Every choreography ends on up_ (the collectives' `consumed` writes; the
    // pairs join down_ into it).
    if (s) s = cudaStatus(cudaEventRecord(batch.done, up_), "cudaEventRecord (done)");
    if (s) s = cudaStatus(cudaStreamWaitEvent(stream, batch.done, 0), "cudaStreamWaitEvent");
    batch.lastChunk = static_cast<uint32_t>(chunksIssued_);
    if (!s && chunksIssued_ + pairChunksIssued_ != firstChunk) {
      // Counters of this batch may already be in the streams while others
      // are missing: peers would wait for them forever. Fail (and poison).
      comm_->fail(s.code(), "enqueueing a device collective on the CUDA streams failed on " +
                                comm_->describe() + ": " + s.message());
    }
    watchdog_->track(std::move(batch));
    LANES_RETURN_IF_ERROR(s);
  }
  LANES_RETURN_IF_ERROR(forkStreams(stream, others));
  return Status::ok();
}

Status StagedCollectives::reduceSegment(void* dst, const std::vector<const void*>& srcs,
                                        size_t count, const Request& r, cudaStream_t stream) {
  const RedOpKind op = r.op.kind;
  const int nranks = static_cast<int>(srcs.size());
  const int first = std::min(nranks, cuda::kMaxReduceSources);
  const bool onePass = first == nranks;
  LANES_RETURN_IF_ERROR(
      kernelStatus(cuda::launchReduce(dst, srcs.data(), first, count, r.args.type, op, r.op.scalar,
                                      (op == RedOpKind::Avg && onePass) ? nranks : 0, stream),
                   "launchReduce"));
  // More than 8 ranks: fold the rest in, 7 at a time, into the partial result.
  for (int done = first; done < nranks;) {
    const int take = std::min(nranks - done, cuda::kMaxReduceSources - 1);
    const bool last = done + take == nranks;
    std::vector<const void*> pass;
    if (op == RedOpKind::PreMulSum) {
      // The new sources are scaled, the partial sum (already scaled) is not.
      pass.assign(srcs.begin() + done, srcs.begin() + done + take);
      pass.push_back(dst);
    } else {
      pass.push_back(dst);
      pass.insert(pass.end(), srcs.begin() + done, srcs.begin() + done + take);
    }
    LANES_RETURN_IF_ERROR(kernelStatus(
        cuda::launchReduce(dst, pass.data(), static_cast<int>(pass.size()), count, r.args.type, op,
                           r.op.scalar, (op == RedOpKind::Avg && last) ? nranks : 0, stream, take),
        "launchReduce"));
    done += take;
  }
  return Status::ok();
}

Status StagedCollectives::postCounter(cudaStream_t stream, volatile uint32_t* flag,
                                      uint32_t value) const {
  LANES_RETURN_IF_ERROR(memops_->write(stream, flag, value));
  if (ledger_) ledger_->post(counterLine(flag), value);
  return Status::ok();
}

Status StagedCollectives::awaitCounter(cudaStream_t stream, volatile uint32_t* flag, uint32_t value,
                                       int writer) const {
  // This rank's own writes went on its streams earlier, from this thread.
  if (ledger_ && writer != comm_->rank && inProcess_[static_cast<size_t>(writer)]) {
    const size_t line = counterLine(flag);
    switch (ledger_->await(line, value, Deadline::after(comm_->options.timeoutSeconds),
                           &comm_->aborted)) {
      case SubmitLedger::Wait::Posted:
        break;
      case SubmitLedger::Wait::Aborted:
        return comm_->checkAbort();
      case SubmitLedger::Wait::Poisoned: {
        Status failed = comm_->checkAbort();
        if (!failed) return failed;
        return remoteError("device collectives on " + comm_->describe() +
                           ": a rank of this process failed while this rank waited for rank " +
                           std::to_string(writer) + "'s part: " + ledger_->why());
      }
      case SubmitLedger::Wait::TimedOut:
        return timeoutError(
            "device collectives on " + comm_->describe() + ": rank " + std::to_string(writer) +
            ", a thread of this process, has not issued its part of this call for " +
            std::to_string(static_cast<int>(comm_->options.timeoutSeconds)) +
            " s (LANES_TIMEOUT; counter " + std::to_string(line) + " issued up to " +
            std::to_string(ledger_->posted(line)) + ", this rank needs " + std::to_string(value) +
            "). Every rank must issue the same collectives and send/recv in the same order; "
            "ranks that are threads of one process must each be driven by their own thread, or "
            "all by one thread inside one group (lanesGroupStart/lanesGroupEnd).");
    }
  }
  return memops_->waitGeq(stream, flag, value);
}

size_t StagedCollectives::counterLine(volatile uint32_t* flag) const {
  const auto base = reinterpret_cast<uintptr_t>(arena_->flag(StageFlag::Ready, 0));
  return (reinterpret_cast<uintptr_t>(flag) - base) / StageArenaLayout::kFlagLine;
}

std::byte* StagedCollectives::inputSlot(int rank, int slot) const {
  if (!p2p_) return arena_->input(rank, slot);
  return p2p_->base(rank) + static_cast<size_t>(slot) * arena_->layout().chunkBytes;
}

std::byte* StagedCollectives::resultSlot(int owner, int slot) const {
  if (!p2p_) return arena_->result(slot);
  const StageArenaLayout& l = arena_->layout();
  return p2p_->base(owner) + static_cast<size_t>(l.slots + slot) * l.chunkBytes;
}

std::byte* StagedCollectives::pairSlot(int sender, int receiver, int slot) const {
  const StageArenaLayout& l = arena_->layout();
  if (l.pairHostData) return arena_->pairSlot(sender, receiver, slot);
  // The receiver's block: its K input and K result slots, then one pair of
  // slots per sender, in rank order without itself.
  const size_t senderIndex = static_cast<size_t>(sender < receiver ? sender : sender - 1);
  return p2p_->base(receiver) + 2 * static_cast<size_t>(l.slots) * l.chunkBytes +
         (senderIndex * StageArenaLayout::kPairSlots + static_cast<size_t>(slot)) *
             l.pairChunkBytes;
}

bool StagedCollectives::sendersDone() const {
  for (int s = 0; s < comm_->nranks; ++s) {
    if (s == comm_->rank) continue;
    const uint32_t sent =
        __atomic_load_n(arena_->pairFlag(PairFlag::Sent, s, comm_->rank), __ATOMIC_ACQUIRE);
    if (sent != static_cast<uint32_t>(pairReceived_[static_cast<size_t>(s)])) return false;
  }
  return true;
}

bool StagedCollectives::peersDone(Deadline deadline) const {
  const auto last = static_cast<uint32_t>(chunksIssued_);
  Backoff backoff;
  for (int p = 0; p < comm_->nranks; ++p) {
    const volatile uint32_t* consumed = arena_->flag(StageFlag::Consumed, p);
    while (static_cast<int32_t>(__atomic_load_n(consumed, __ATOMIC_ACQUIRE) - last) < 0) {
      if (deadline.expired() || !comm_->checkAbort()) return false;
      backoff.pause();
    }
  }
  return true;
}

Status StagedCollectives::uploadPieces(int slot, uint32_t g, size_t stride, size_t bytes,
                                       size_t offsetInPeerSlot, std::byte* scratch,
                                       std::vector<const void*>* srcs) const {
  const int n = comm_->nranks;
  const int me = comm_->rank;
  // The peers below me, then those above: from the inbox each run is one copy
  // (with the gaps of pieces shorter than the stride, never read).
  for (auto [first, last] : {std::pair{0, me}, std::pair{me + 1, n}}) {
    if (first == last) continue;
    const size_t at = static_cast<size_t>(first < me ? first : first - 1);
    for (int p = first; p < last; ++p) {
      std::byte* dst = scratch + (at + static_cast<size_t>(p - first)) * stride;
      LANES_RETURN_IF_ERROR(awaitCounter(upload_, arena_->flag(StageFlag::Ready, p), g, p));
      if (!inbox())
        LANES_CUDA_RETURN(cudaMemcpyAsync(dst, inputSlot(p, slot) + offsetInPeerSlot, bytes,
                                          cudaMemcpyDefault, upload_));
      (*srcs)[static_cast<size_t>(p)] = dst;
    }
    if (inbox())
      LANES_CUDA_RETURN(cudaMemcpyAsync(
          scratch + at * stride, inputSlot(me, slot) + static_cast<size_t>(first) * stride,
          static_cast<size_t>(last - first - 1) * stride + bytes, cudaMemcpyDefault, upload_));
  }
  return Status::ok();
}

Status StagedCollectives::enqueueOne(const Request& r) {
  switch (r.args.coll) {
    case CollType::AllReduce:
      return enqueueAllReduce(r);
    case CollType::AllGather:
      return enqueueAllGather(r);
    case CollType::Broadcast:
      return enqueueBroadcast(r);
    case CollType::ReduceScatter:
      return enqueueReduceScatter(r);
    default:
      return invalidUsage(std::string("the host-staged path does not serve ") +
                          collTypeName(r.args.coll));
  }
}

Status StagedCollectives::enqueueAllReduce(const Request& r) {
  const StageArenaLayout& layout = arena_->layout();
  const int n = comm_->nranks;
  const int me = comm_->rank;
  const size_t elem = datatypeSize(r.args.type);
  const size_t count = r.args.count;
  const size_t align = std::max<size_t>(1, 16 / elem);  // segments start 16-byte aligned
  const size_t chunkElems =
      staged::allReduceChunkElems(layout.chunkBytes, count, elem, static_cast<size_t>(n), align);
  const auto* send = static_cast<const std::byte*>(r.args.send);
  auto* recv = static_cast<std::byte*>(r.args.recv);
  const auto slots = static_cast<uint64_t>(layout.slots);
  auto* scratch = static_cast<std::byte*>(scratch_);
  // Host arena: the peers' pieces of my segment arrive in my inbox
  // (uploadPieces), so my uploads are two copies whatever the rank count. Up
  // carries twice the bytes of down here, so its copies are the ones kept
  // large; the n - 1 small copies into the peers' inboxes go down, which has room.

  for (size_t off = 0; off < count; off += chunkElems) {
    const size_t len = std::min(chunkElems, count - off);
    const uint64_t issued = ++chunksIssued_;
    const auto g = static_cast<uint32_t>(issued);
    const int slot = static_cast<int>(issued % slots);
    watchdog_->noteChunk(g);
    const size_t seg = roundUp(ceilDiv(len, static_cast<size_t>(n)), align);
    auto segBegin = [&](int p) { return std::min(len, seg * static_cast<size_t>(p)); };
    auto segEnd = [&](int p) { return std::min(len, seg * static_cast<size_t>(p + 1)); };
    const size_t myBegin = segBegin(me);
    const size_t myLen = segEnd(me) - myBegin;
    const std::byte* in = send + off * elem;
    std::byte* out = recv + off * elem;

    // A (down): the slot is free once every rank consumed its previous use
    // (that also means every rank finished reading the input slots and the
    // result slot of chunk g-K). In place is safe: this chunk's input is
    // copied down before B or C write any of it.
    if (issued > slots) {
      for (int p = 0; p < n; ++p)
        LANES_RETURN_IF_ERROR(awaitCounter(down_, arena_->flag(StageFlag::Consumed, p),
                                           static_cast<uint32_t>(issued - slots), p));
    }
    // Only the peers' segments go down: mine is reduced straight from `in`.
    const size_t myEnd = myBegin + myLen;
    if (inbox()) {
      for (int p = 0; p < n; ++p) {
        if (p == me || segEnd(p) == segBegin(p)) continue;
        LANES_CUDA_RETURN(cudaMemcpyAsync(inputSlot(p, slot) + static_cast<size_t>(me) * seg * elem,
                                          in + segBegin(p) * elem, (segEnd(p) - segBegin(p)) * elem,
                                          cudaMemcpyDefault, down_));
      }
    } else {
      if (myBegin > 0)
        LANES_CUDA_RETURN(
            cudaMemcpyAsync(inputSlot(me, slot), in, myBegin * elem, cudaMemcpyDefault, down_));
      if (myEnd < len)
        LANES_CUDA_RETURN(cudaMemcpyAsync(inputSlot(me, slot) + myEnd * elem, in + myEnd * elem,
                                          (len - myEnd) * elem, cudaMemcpyDefault, down_));
    }
    LANES_RETURN_IF_ERROR(postCounter(down_, arena_->flag(StageFlag::Ready, me), g));
    LANES_CUDA_RETURN(cudaEventRecord(downDone_, down_));

    // B1 (upload): the peers' pieces of my segment into this chunk's half of
    // the scratch, once the reduce of chunk g-2 (same half) has read it.
    const int half = static_cast<int>(issued % 2);
    std::byte* scratchHalf =
        scratch + static_cast<size_t>(half) * scratchSegments_ * scratchStride_;
    auto scratchSegment = [&](size_t i) { return scratchHalf + i * seg * elem; };
    LANES_CUDA_RETURN(cudaStreamWaitEvent(upload_, reduceDone_[half], 0));
    std::vector<const void*> srcs(static_cast<size_t>(n));
    if (myLen > 0)
      LANES_RETURN_IF_ERROR(
          uploadPieces(slot, g, seg * elem, myLen * elem, myBegin * elem, scratchHalf, &srcs));
    LANES_CUDA_RETURN(cudaEventRecord(uploadDone_, upload_));

    // B2 (reduce): my segment, from my device input and the uploaded ones; its
    // result goes down to the result slot. After A: the slot waits (A's
    // consumed waits free the result slot too), and in place, A has read the
    // input before C overwrites it (C runs after this stage).
    LANES_CUDA_RETURN(cudaStreamWaitEvent(reduce_, downDone_, 0));
    LANES_CUDA_RETURN(cudaStreamWaitEvent(reduce_, uploadDone_, 0));
    if (myLen > 0) {
      srcs[static_cast<size_t>(me)] = in + myBegin * elem;
      // In place, a first pass of 8 sources overwrites my input before a
      // later pass would read it there: reduce from a copy.
      if (in == out && me >= cuda::kMaxReduceSources) {
        std::byte* copy = scratchSegment(static_cast<size_t>(n - 1));
        LANES_CUDA_RETURN(cudaMemcpyAsync(copy, in + myBegin * elem, myLen * elem,
                                          cudaMemcpyDeviceToDevice, reduce_));
        srcs[static_cast<size_t>(me)] = copy;
      }
      LANES_RETURN_IF_ERROR(reduceSegment(out + myBegin * elem, srcs, myLen, r, reduce_));
      LANES_CUDA_RETURN(cudaMemcpyAsync(resultSlot(me, slot) + myBegin * elem, out + myBegin * elem,
                                        myLen * elem, cudaMemcpyDefault, reduce_));
    }
    LANES_RETURN_IF_ERROR(postCounter(reduce_, arena_->flag(StageFlag::Reduced, me), g));
    LANES_CUDA_RETURN(cudaEventRecord(reduceDone_[half], reduce_));
    // Every stage of this chunk on this rank is done once C passes this: its
    // `consumed` then also says this rank no longer reads the peers' slots.
    LANES_CUDA_RETURN(cudaStreamWaitEvent(up_, reduceDone_[half], 0));

    // C (up): everyone else's segments, each from its owner's result slot
    // (in the host arena they sit contiguously around mine: two copies).
    for (int p = 0; p < n; ++p) {
      if (p == me || segEnd(p) == segBegin(p)) continue;
      LANES_RETURN_IF_ERROR(awaitCounter(up_, arena_->flag(StageFlag::Reduced, p), g, p));
      if (p2p_)
        LANES_CUDA_RETURN(
            cudaMemcpyAsync(out + segBegin(p) * elem, resultSlot(p, slot) + segBegin(p) * elem,
                            (segEnd(p) - segBegin(p)) * elem, cudaMemcpyDefault, up_));
    }
    if (!p2p_ && myBegin > 0)
      LANES_CUDA_RETURN(
          cudaMemcpyAsync(out, resultSlot(me, slot), myBegin * elem, cudaMemcpyDefault, up_));
    if (!p2p_ && myEnd < len)
      LANES_CUDA_RETURN(cudaMemcpyAsync(out + myEnd * elem, resultSlot(me, slot) + myEnd * elem,
                                        (len - myEnd) * elem, cudaMemcpyDefault, up_));
    LANES_RETURN_IF_ERROR(postCounter(up_, arena_->flag(StageFlag::Consumed, me), g));
  }
  return Status::ok();
}

}  // namespace lanes
