// Bootstrap: the out-of-band TCP channel between the ranks of a communicator.
//
// lanesGetUniqueId starts a root listener in the calling process; each rank
// connects to it presenting the id's secret, the root hands every rank the
// table of all ranks' listen addresses and exits, and the ranks then build a
// full mesh of control connections (secret-checked, framed messages). One
// monitor thread per mesh reads it: tagged messages land in a mailbox for
// recv(); a closed or reset connection, or a failure notice a peer spread,
// marks that peer dead and calls the failure handler, so every survivor
// learns which rank died, not only the neighbour it waited on. Communicators
// split or shrunk from this one share its mesh and thread, each on a channel
// of its own (control_mesh.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/rank_info.h"
#include "base/status.h"
#include "lanes/lanes.h"

namespace lanes {

// Decoded lanesUniqueId.
struct UniqueIdData {
  uint8_t family = 0;  // AF_INET or AF_INET6
  uint16_t port = 0;   // host byte order
  uint8_t addr[16] = {};
  uint8_t secret[32] = {};
  uint64_t commId = 0;  // random, names OS objects of this communicator
};

Status encodeUniqueId(const UniqueIdData& data, lanesUniqueId* out);
Status decodeUniqueId(const lanesUniqueId& id, UniqueIdData* out);

// Creates an id for a new communicator and starts the root listener thread
// (it serves one rendezvous, then exits; it gives up after
// LANES_BOOTSTRAP_TIMEOUT). `bindAddr` ("host:port") pins the address, as a
// launcher does with LANES_ROOT_ADDR; empty picks an interface by
// LANES_SOCKET_IFNAME and a free port. `secret` (32 bytes) may be null for a
// random one.
Status createUniqueIdAndRoot(const std::string& bindAddr, const uint8_t* secret,
                             lanesUniqueId* out);
// Same, with a fixed commId (launchers derive it so every rank agrees
// without exchanging the id); null picks a random one.
Status createUniqueIdAndRoot(const std::string& bindAddr, const uint8_t* secret,
                             const uint64_t* commId, lanesUniqueId* out);

// Stops the root of `id` if this process runs it and no rank has joined it
// yet, quietly (lanesCommInitRankScalable uses only the first of its ids).
void retireLocalRoot(const UniqueIdData& id);

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  // Joins the communicator named by `id` as `self.rank` of `nranks`.
  static Status create(const UniqueIdData& id, int nranks, const RankInfo& self, Deadline deadline,
                       std::unique_ptr<Bootstrap>* out);

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual const std::vector<RankInfo>& ranks() const = 0;
  virtual const UniqueIdData& id() const = 0;

  // Out-of-band collectives and point-to-point, all bounded by `deadline`.
  // allGather: `data` holds nranks slots of `bytes`; this rank's slot is filled.
  // Tags >= 2^31 are reserved for allGather/barrier; messages per (peer, tag)
  // arrive in order; send() is thread-safe and may target this rank itself.
  virtual Status allGather(void* data, size_t bytes, Deadline deadline) = 0;
  virtual Status barrier(Deadline deadline) = 0;
  virtual Status send(int peer, uint32_t tag, const void* data, size_t bytes) = 0;
  virtual Status recv(int peer, uint32_t tag, std::vector<uint8_t>* data, Deadline deadline) = 0;

  // Called from the monitor thread when a peer is found dead (its control
  // connection closed or reset, or another rank reported it), with a
  // sentence saying what was seen. Set once, before any collective. Deaths
  // seen before it is set are reported when it is set; each rank once. It
  // may call spreadFailure, but must not block for long.
  using FailureHandler = std::function<void(int deadRank, const std::string& why)>;
  virtual void setFailureHandler(FailureHandler handler) = 0;
  // Tells every live peer that `deadRank` failed (or this rank is aborting
  // when deadRank == rank()), so they fail fast instead of timing out.
  // Marks deadRank dead here too, without calling this rank's handler.
  virtual void spreadFailure(int deadRank, const std::string& why) = 0;
  // Latest progress counter each peer reported (watchdog hints); -1 unknown.
  virtual void reportProgress(uint64_t completedSeq) = 0;
  virtual int64_t peerProgress(int peer) const = 0;
  // Ok while `peer` is alive; otherwise why nothing more will come from it
  // (it left normally, or died): for waits outside the bootstrap, such as
  // counters in shared memory, that no closed connection would end.
  virtual Status peerStatus(int /*peer*/) const { return Status::ok(); }
  // Hang diagnosis: the monitor thread answers a peer's progress query with
  // what `source` returns (set once at init; must be quick, never block).
  using ProgressSource = std::function<std::vector<uint8_t>()>;
  virtual void setProgressSource(ProgressSource /*source*/) {}
  // Asks each of `peers` for its progress; answers arrive by `deadline` or
  // stay empty (a dead, departed or unresponsive peer). Never blocks longer,
  // and once one peer answered, the rest get at most half a second more: a
  // live monitor thread answers in milliseconds, a stopped process never.
  virtual std::vector<std::vector<uint8_t>> queryProgress(const std::vector<int>& peers,
                                                          Deadline /*deadline*/) {
    return std::vector<std::vector<uint8_t>>(peers.size());
  }
  // How a rank joins a communicator's bootstrap: Bootstrap::create for one
  // made from a unique id, childJoin for one made from some of this one's
  // ranks. It may run later, on another thread (non-blocking init).
  using Join = std::function<Status(const RankInfo& self, Deadline deadline,
                                    std::unique_ptr<Bootstrap>* out)>;
  // Communicators made from some of this one's ranks (lanesCommSplit,
  // lanesCommShrink) talk over the same control connections on a channel of
  // their own: a number from newChannel that the members agree on over this
  // bootstrap (split: in its all-gather; shrink: sent by the first
  // survivor). Each member then runs the join that childJoin returns, with
  // `members` (this communicator's ranks in the child's rank order) alike
  // everywhere. The join holds the connections, so it may run after this
  // bootstrap is gone.
  virtual Status newChannel(uint32_t* /*channel*/) {
    return invalidUsage("this bootstrap cannot make communicators from its ranks");
  }
  virtual Join childJoin(uint32_t /*channel*/, const std::vector<int>& /*members*/) {
    return [](const RankInfo&, Deadline, std::unique_ptr<Bootstrap>*) {
      return invalidUsage("this bootstrap cannot make communicators from its ranks");
    };
  }
  // Says goodbye to the peers; the connections close when the last
  // communicator sharing them is gone. Idempotent.
  virtual void shutdown() = 0;
};

// Fills rank/size/root from a launcher's environment: LANES_RANK,
// LANES_WORLD_SIZE, LANES_ROOT_ADDR (+ LANES_BOOTSTRAP_SECRET); torchrun's
// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Open MPI's OMPI_COMM_WORLD_*;
// Slurm's SLURM_PROCID, SLURM_NTASKS. Rank 0 starts the root at the address.
struct LaunchEnv {
  int rank = -1;
  int worldSize = -1;
  int localRank = -1;
  std::string rootAddr;  // host:port
  std::string source;    // which launcher's variables were used
};
// Where the root address comes from MASTER_ADDR/MASTER_PORT (torchrun, or
// set by hand under Open MPI/Slurm), Lanes listens on MASTER_PORT+1 (or
// LANES_ROOT_PORT): MASTER_PORT itself is taken by torch's TCPStore.
Status readLaunchEnv(LaunchEnv* out);
// The secret (LANES_BOOTSTRAP_SECRET, 64 hex digits, or a hash of the root
// address and the launcher's job id) and the commId every rank of the job
// derives alike. Exposed for tests.
Status launchSecretAndCommId(const LaunchEnv& env, uint8_t secret[32], uint64_t* commId);
// Rank 0 creates the id (root at env.rootAddr); every rank derives the same
// id from the environment, so no id needs to be passed around.
Status uniqueIdFromLaunchEnv(const LaunchEnv& env, lanesUniqueId* out);
// An MPI launcher started this process (OMPI_COMM_WORLD_SIZE, PMIX_RANK,
// PMI_RANK with PMI_SIZE, MV2_COMM_WORLD_SIZE) and no root address or Lanes
// rank is set (LANES_RANK, LANES_ROOT_ADDR, MASTER_ADDR): then the ranks meet
// over MPI, as nccl-tests built with MPI does. `var` names the launcher's
// variable found. Makes no MPI call.
bool mpiLaunchWithoutRoot(std::string* var = nullptr);
// Over MPI (the plugin liblanes-mpi.so, src/mpi_plugin): rank 0 makes the id
// and broadcasts it; fills env's rank and size. MPI_Init unless the program
// did, MPI_Finalize at exit then.
Status mpiUniqueId(LaunchEnv* env, lanesUniqueId* out);
// The rank among this host's ranks that a launcher gives (LANES_LOCAL_RANK,
// LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID,
// MV2_COMM_WORLD_LOCAL_RANK); -1 when none says.
int launchLocalRank();
// The id of a root at the fixed `rootAddr` (host:port), the same in every
// process of the job; with startRoot, this process also starts that root.
Status pinnedUniqueId(const std::string& rootAddr, bool startRoot, lanesUniqueId* out);

}  // namespace lanes
