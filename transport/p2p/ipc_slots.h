// P2P transport for the staged device all-reduce: each rank's input and
// result slots live in its own GPU memory, and peers read them with
// copy-engine copies (cudaMemcpyAsync, no SMs). Ranks of another process map
// the block through CUDA IPC; ranks of this process use the pointer itself.
// Used only where every pair of GPUs can reach each other (the same GPU, or
// cudaDeviceCanAccessPeer) *and* a probe reads back every peer's pattern
// correctly; LANES_P2P_DISABLE=1 turns it off. The ordering flags stay in the
// host-staging arena's flags page (transport/hoststage/arena.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "transport/transport_config.h"

namespace lanes {

class IpcSlots {
 public:
  // Collective over `bootstrap`. Every rank ends with the same answer: *out
  // set (P2P on), or *out null with *why saying why it is off. A non-OK
  // status means the bootstrap failed and the communicator must fail.
  // `mode` is this rank's LANES_P2P_DISABLE; Forced takes effect where every
  // rank forces. `refusal`, where not empty, is why the planner keeps this
  // rank's GPU off P2P (a broken or cross-socket pair: planner/p2p_rule.h);
  // Forced overrules it.
  static Status create(Bootstrap& bootstrap, int cudaDev, size_t bytes, P2pMode mode,
                       const std::string& refusal, Deadline deadline,
                       std::unique_ptr<IpcSlots>* out, std::string* why);
  ~IpcSlots();
  IpcSlots(const IpcSlots&) = delete;
  IpcSlots& operator=(const IpcSlots&) = delete;

  // Rank r's block as this rank addresses it.
  std::byte* base(int rank) const { return bases_[static_cast<size_t>(rank)]; }
  // How this rank reaches `rank`, for the log ("CUDA IPC, same GPU 0", ...).
  const std::string& route(int rank) const { return routes_[static_cast<size_t>(rank)]; }
  // Keeps this rank's block allocated at destruction (a peer may still read it).
  void leak() { leaked_ = true; }

 private:
  IpcSlots() = default;
  void release();

  std::vector<std::byte*> bases_;
  std::vector<bool> opened_;  // mapped through cudaIpcOpenMemHandle: close at the end
  std::vector<std::string> routes_;
  int self_ = 0;
  bool leaked_ = false;
};

}  // namespace lanes
