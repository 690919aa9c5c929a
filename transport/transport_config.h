// The transports' knobs. The communicator reads them once from the
// environment when it is made (exec/comm_config.h) and hands them down;
// nothing below reads the environment for them.
#pragma once

#include <cstddef>
#include <string>

namespace lanes {

// LANES_P2P_DISABLE: unset: P2P where every pair reaches the other and a probe
// reads back; "0": also between processes sharing a GPU (every rank must say
// so); true: never.
enum class P2pMode { Auto, Forced, Off };

struct TransportConfig {
  static constexpr int kMaxSocketsPerPeer = 64;  // threads x sockets per thread
  size_t shmRingBytes = size_t{1} << 20;         // LANES_SHM_RING_BYTES, per direction and lane
  size_t shmBudgetBytes = size_t{512} << 20;     // LANES_SHM_BUDGET, one communicator's rings per host
  bool shmDisabled = false;                      // LANES_SHM_DISABLE: no bulk data in shared memory
  std::string socketIfname;                      // LANES_SOCKET_IFNAME ("" any but loopback)
  int socketThreads = 2;                         // LANES_SOCKET_NTHREADS
  int socketsPerThread = 1;                      // LANES_NSOCKS_PERTHREAD
  size_t socketStripeBytes = size_t{128} << 10;  // LANES_SOCKET_STRIPE_BYTES
  size_t socketRingBytes = size_t{4} << 20;      // LANES_SOCKET_RING_BYTES
  P2pMode p2p = P2pMode::Auto;                   // LANES_P2P_DISABLE
};

}  // namespace lanes
