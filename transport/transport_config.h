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

// The verbs transport's knobs (LANES_IB_*) and the port the communicator
// chose for this rank from them and the topology (device empty: no verbs,
// `unavailable` says why).
struct IbConfig {
  bool disabled = false;                 // LANES_IB_DISABLE
  std::string hca;                       // LANES_IB_HCA, NCCL_IB_HCA's syntax
  int forcedGid = -1;                    // LANES_IB_GID_INDEX (-1: the port's RoCE v2 IPv4 GID)
  int trafficClass = 0;                  // LANES_IB_TC
  int timeout = 20;                      // LANES_IB_TIMEOUT: ack timeout 4.096 us * 2^timeout
  int retryCount = 7;                    // LANES_IB_RETRY_CNT
  int qpsPerPeer = 2;                    // LANES_IB_QPS_PER_CONNECTION
  size_t ringBytes = size_t{4} << 20;    // LANES_IB_RING_BYTES, per lane and direction
  size_t slotBytes = size_t{512} << 10;  // LANES_IB_SLOT_BYTES: the most one RDMA write carries
  std::string device;                    // chosen: "mlx5_0", "rxe0"; "" none
  int port = 0;                          // chosen port, from 1
  int gidIndex = -1;                     // chosen GID (-1 on InfiniBand: by LID)
  std::string unavailable;               // why no port was chosen
};

// Who moves a TCP connection's bytes (LANES_SOCKET_MOVER).
enum class SocketMover { Auto, Engine, Workers };

// LANES_SOCKET_RING_BYTES' default; the planner prices a connection's bytes
// in flight with it.
inline constexpr size_t kDefaultSocketRingBytes = size_t{4} << 20;

struct TransportConfig {
  static constexpr int kMaxSocketsPerPeer = 64;  // threads x sockets per thread
  size_t shmRingBytes = size_t{1} << 20;         // LANES_SHM_RING_BYTES, per direction and lane
  size_t shmBudgetBytes = size_t{512} << 20;  // LANES_SHM_BUDGET, one communicator's rings per host
  bool shmDisabled = false;                   // LANES_SHM_DISABLE: no bulk data in shared memory
  std::string socketIfname;                   // LANES_SOCKET_IFNAME ("" any but loopback)
  int socketThreads = 2;                      // LANES_SOCKET_NTHREADS
  int socketsPerThread = 1;                   // LANES_NSOCKS_PERTHREAD
  size_t socketStripeBytes = size_t{512} << 10;      // LANES_SOCKET_STRIPE_BYTES
  size_t socketRingBytes = kDefaultSocketRingBytes;  // LANES_SOCKET_RING_BYTES
  size_t socketZeroCopyBytes = size_t{64} << 10;     // LANES_SOCKET_ZEROCOPY_BYTES (0: off)
  int socketBusyPollUs = 0;                          // LANES_SOCKET_BUSY_POLL
  SocketMover socketMover = SocketMover::Auto;       // LANES_SOCKET_MOVER
  P2pMode p2p = P2pMode::Auto;                       // LANES_P2P_DISABLE
  IbConfig ib;
};

}  // namespace lanes
