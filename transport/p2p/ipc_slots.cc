#include "transport/p2p/ipc_slots.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <optional>

#include "base/cuda_temp_stream.h"

namespace lanes {
namespace {

constexpr size_t kProbeBytes = 4096;

uint8_t probeByte(int rank) { return static_cast<uint8_t>(0x5A ^ (rank * 37 + 11)); }

// What a rank offers its peers.
struct Offer {
  int32_t willing = 0;
  int32_t forced = 0;  // LANES_P2P_DISABLE=0 on this rank
  int32_t cudaDev = -1;
  int32_t pid = 0;
  int32_t mps = 0;       // the GPU's contexts run under MPS: no time slices between processes
  uint64_t pointer = 0;  // for ranks of the same process
  cudaIpcMemHandle_t handle{};
};

// A rank's verdict after opening and probing every peer's block.
struct Verdict {
  int32_t ok = 0;
  int32_t failedPeer = -1;
  char reason[160] = {};
};

std::string cudaText(cudaError_t e) {
  cudaGetLastError();  // not sticky: clear it so later calls do not report it
  return cudaGetErrorString(e);
}

void setReason(Verdict* v, int peer, const std::string& text) {
  v->ok = 0;
  v->failedPeer = peer;
  std::snprintf(v->reason, sizeof(v->reason), "%s", text.c_str());
}

// Opens (or adopts) peer p's block; "" or why not.
std::string reach(const Offer& me, const Offer& peer, int p, std::byte** base, bool* opened,
                  std::string* route) {
  if (!peer.willing) return "rank " + std::to_string(p) + " cannot offer GPU memory";
  if (peer.pid == me.pid) {
    *base = reinterpret_cast<std::byte*>(static_cast<uintptr_t>(peer.pointer));
    *route = "same process, GPU " + std::to_string(peer.cudaDev);
    return "";
  }
  if (peer.cudaDev != me.cudaDev) {
    int can = 0;
    cudaError_t e = cudaDeviceCanAccessPeer(&can, me.cudaDev, peer.cudaDev);
    if (e != cudaSuccess) return "cudaDeviceCanAccessPeer failed: " + cudaText(e);
    if (!can)
      return "GPU " + std::to_string(me.cudaDev) + " cannot access GPU " +
             std::to_string(peer.cudaDev) + " (cudaDeviceCanAccessPeer = 0)";
  }
  void* mapped = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&mapped, peer.handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) return "cudaIpcOpenMemHandle failed: " + cudaText(e);
  *base = static_cast<std::byte*>(mapped);
  *opened = true;
  *route = peer.cudaDev == me.cudaDev ? "CUDA IPC, same GPU " + std::to_string(me.cudaDev)
                                      : "CUDA IPC, GPU " + std::to_string(me.cudaDev) + " -> GPU " +
                                            std::to_string(peer.cudaDev);
  return "";
}

// Reads peer p's probe pattern through the mapping with a copy-engine copy.
std::string probe(const std::byte* peerBase, int p, cudaStream_t stream) {
  std::vector<uint8_t> got(kProbeBytes, 0);
  cudaError_t e = cudaMemcpyAsync(got.data(), peerBase, kProbeBytes, cudaMemcpyDefault, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return "reading rank " + std::to_string(p) + "'s block: " + cudaText(e);
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != probeByte(p))
      return "the probe read a wrong byte from rank " + std::to_string(p) + "'s block at offset " +
             std::to_string(i) + " (P2P advertised but not working: check ACS and the IOMMU)";
  }
  return "";
}

}  // namespace

Status IpcSlots::create(Bootstrap& bootstrap, int cudaDev, size_t bytes, P2pMode mode,
                        const std::string& refusal, Deadline deadline,
                        std::unique_ptr<IpcSlots>* out, std::string* why) {
  out->reset();
  why->clear();
  const int n = bootstrap.nranks();
  const int me = bootstrap.rank();
  std::unique_ptr<IpcSlots> slots(new IpcSlots());
  slots->self_ = me;
  slots->bases_.assign(static_cast<size_t>(n), nullptr);
  slots->opened_.assign(static_cast<size_t>(n), false);
  slots->routes_.assign(static_cast<size_t>(n), "");

  // 1. This rank's block and what it offers. Forced: P2P wherever reachable,
  //    even between processes that share a GPU (every rank must say so).
  const bool forced = mode == P2pMode::Forced;
  Offer mine;
  mine.cudaDev = cudaDev;
  mine.forced = forced ? 1 : 0;
  mine.pid = static_cast<int32_t>(getpid());
  int mps = 0;
  if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, cudaDev) != cudaSuccess) {
    cudaGetLastError();
    mps = 0;
  }
  mine.mps = mps != 0 ? 1 : 0;
  std::string localWhy;
  // One stream for the pattern fill below and the probes of step 2 (made only
  // where this rank offers P2P at all).
  std::optional<TempStream> stream;
  if (mode == P2pMode::Off) {
    localWhy = "LANES_P2P_DISABLE=1";
  } else if (mode != P2pMode::Forced && !refusal.empty()) {
    localWhy = refusal;
  } else {
    void* block = nullptr;
    cudaError_t e = cudaMalloc(&block, std::max(bytes, kProbeBytes));
    if (e == cudaSuccess) {
      slots->bases_[static_cast<size_t>(me)] = static_cast<std::byte*>(block);
      slots->routes_[static_cast<size_t>(me)] = "itself";
      // Written and finished before the offer goes out: a memset may still be
      // queued when cudaMemset returns, and a peer process on the same GPU
      // (another context, another time slice) can read stale bytes before it
      // runs, which fails the probe.
      e = stream.emplace().error();
      if (e == cudaSuccess) e = cudaMemsetAsync(block, probeByte(me), kProbeBytes, stream->get());
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream->get());
    }
    if (e == cudaSuccess) e = cudaIpcGetMemHandle(&mine.handle, block);
    if (e != cudaSuccess)
      localWhy = "rank " + std::to_string(me) + " could not export GPU memory: " + cudaText(e);
    mine.pointer = reinterpret_cast<uintptr_t>(block);
    mine.willing = localWhy.empty() ? 1 : 0;
  }
  std::vector<Offer> offers(static_cast<size_t>(n));
  offers[static_cast<size_t>(me)] = mine;
  LANES_RETURN_IF_ERROR(bootstrap.allGather(offers.data(), sizeof(Offer), deadline));

  // Processes sharing one GPU take turns on it (time slices) unless it runs
  // MPS, and a copy within one GPU runs as a kernel: each chunk's hand-off
  // then waits for a slice, which makes P2P several times slower than host
  // staging there (docs/gpu_data_path.md, "P2P"). Decided from the offers
  // alone, so every rank agrees without another exchange.
  bool everyoneForced = true;
  for (const Offer& o : offers) everyoneForced = everyoneForced && o.forced;
  if (!everyoneForced) {
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        const Offer& x = offers[static_cast<size_t>(a)];
        const Offer& y = offers[static_cast<size_t>(b)];
        if (x.cudaDev == y.cudaDev && x.pid != y.pid && !(x.mps && y.mps)) {
          *why = "ranks " + std::to_string(a) + " and " + std::to_string(b) +
                 " are different processes on GPU " + std::to_string(x.cudaDev) +
                 " without MPS, where host staging is faster (LANES_P2P_DISABLE=0 forces P2P)";
          return Status::ok();  // nobody opened anything: our block is freed below
        }
      }
    }
  }

  // 2. Reach and probe every peer (every block's pattern was written before
  //    the all-gather above).
  Verdict verdict;
  verdict.ok = 1;
  if (!localWhy.empty()) setReason(&verdict, me, localWhy);
  // verdict.ok: this rank offered, so its stream was made (and worked) above.
  for (int p = 0; p < n && verdict.ok; ++p) {
    if (p == me) continue;
    const auto i = static_cast<size_t>(p);
    bool opened = false;
    std::string reason = reach(mine, offers[i], p, &slots->bases_[i], &opened, &slots->routes_[i]);
    slots->opened_[i] = opened;
    if (reason.empty()) reason = probe(slots->bases_[i], p, stream->get());
    if (!reason.empty()) setReason(&verdict, p, reason);
  }

  // 3. One answer for all.
  std::vector<Verdict> verdicts(static_cast<size_t>(n));
  verdicts[static_cast<size_t>(me)] = verdict;
  Status s = bootstrap.allGather(verdicts.data(), sizeof(Verdict), deadline);
  if (!s) {
    slots->leak();  // a peer may hold our block open
    return s;
  }
  for (int r = 0; r < n && why->empty(); ++r) {
    const Verdict& v = verdicts[static_cast<size_t>(r)];
    if (!v.ok) *why = "rank " + std::to_string(r) + ": " + v.reason;
  }
  if (!why->empty()) {
    // Peers may have mapped our block: unmap ours first, then free only after
    // everyone has (the barrier), as freeing exported memory under a mapping
    // is undefined.
    for (int p = 0; p < n; ++p)
      if (slots->opened_[static_cast<size_t>(p)])
        cudaIpcCloseMemHandle(slots->bases_[static_cast<size_t>(p)]);
    slots->opened_.assign(static_cast<size_t>(n), false);
    Status b = bootstrap.barrier(deadline);
    if (!b) slots->leak();
    return b;
  }
  *out = std::move(slots);
  return Status::ok();
}

IpcSlots::~IpcSlots() { release(); }

void IpcSlots::release() {
  for (size_t p = 0; p < bases_.size(); ++p)
    if (opened_[p]) cudaIpcCloseMemHandle(bases_[p]);
  if (!leaked_ && self_ < static_cast<int>(bases_.size()) && bases_[static_cast<size_t>(self_)])
    cudaFree(bases_[static_cast<size_t>(self_)]);
  bases_.clear();
  opened_.clear();
  cudaGetLastError();
}

}  // namespace lanes
