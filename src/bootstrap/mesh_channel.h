// MeshChannel: the Bootstrap of one communicator over a ControlMesh, on its
// channel. The communicator made from a unique id has channel 0 and every
// rank of the mesh; one split or shrunk from it has a channel of its own and
// some of them, numbered its own way. Internal to src/bootstrap; tests
// include it for the crash-simulation hook.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/channel_inbox.h"
#include "bootstrap/control_mesh.h"

namespace lanes {

// Tags at or above this are the bootstrap's own (allGather, barrier).
inline constexpr uint32_t kReservedTagBase = 0x80000000u;
// How long a progress query waits for the other peers once one answered.
inline constexpr double kStragglerSeconds = 0.5;
// How long a collective's failure notice may take to send.
inline constexpr double kNoticeSeconds = 2.0;

class MeshChannel final : public Bootstrap {
 public:
  // Joins `channel` among `members` (mesh ranks, in the channel's rank
  // order; this process's mesh rank among them). The ranks swap who they
  // are, unless the channel is the root one, whose table the mesh holds.
  static Status open(std::shared_ptr<ControlMesh> mesh, uint32_t channel, std::vector<int> members,
                     const RankInfo& self, Deadline deadline, std::unique_ptr<Bootstrap>* out);
  // Completes the mesh's table (the root sent each rank only its tree
  // neighbours) by a gather over the tree on kTableChannel. Collective over
  // the whole mesh; run before the root channel opens, so that it opens with
  // every rank's name.
  static Status gatherTable(const std::shared_ptr<ControlMesh>& mesh, const RankInfo& self,
                            Deadline deadline);
  ~MeshChannel() override;

  int rank() const override { return rank_; }
  int nranks() const override { return static_cast<int>(ranks_.size()); }
  const std::vector<RankInfo>& ranks() const override { return ranks_; }
  const UniqueIdData& id() const override { return id_; }

  Status allGather(void* data, size_t bytes, Deadline deadline) override;
  Status barrier(Deadline deadline) override;
  Status send(int peer, uint32_t tag, const void* data, size_t bytes) override;
  Status recv(int peer, uint32_t tag, std::vector<uint8_t>* data, Deadline deadline) override;

  void setFailureHandler(FailureHandler handler) override;
  void spreadFailure(int deadRank, const std::string& why) override;
  void reportProgress(uint64_t completedSeq) override;
  int64_t peerProgress(int peer) const override;
  Status peerStatus(int peer) const override;
  void setProgressSource(ProgressSource source) override;
  std::vector<std::vector<uint8_t>> queryProgress(const std::vector<int>& peers,
                                                  Deadline deadline) override;
  Status newChannel(uint32_t* channel) override;
  Join childJoin(uint32_t channel, const std::vector<int>& members) override;
  void shutdown() override;

  // Test hook: drops every control connection of the process without a
  // goodbye, as a crash would, so peers must report this rank dead.
  void closeAbruptlyForTest();
  const ControlMesh& mesh() const { return *mesh_; }
  // Test hook: frames sent as the mesh would (a forged report).
  ControlMesh& meshForTest() { return *mesh_; }

 private:
  MeshChannel(std::shared_ptr<ControlMesh> mesh, uint32_t channel, std::vector<int> members,
              int rank, std::vector<RankInfo> ranks);
  Status sendTo(int peer, uint16_t type, uint32_t tag, const void* data, size_t bytes,
                Deadline deadline);
  // The tag of the next allGather/barrier, and its name in errors ("barrier #3").
  uint32_t nextCollectiveTag(std::string* what, const char* op);
  // A collective up a binary tree of the channel's ranks and back down (at
  // most three peers a rank). Up: take() gets each child's message, then
  // give() is this rank's for its parent. Down: take() gets the parent's
  // message, then give() is what this rank passes to its children.
  struct TreeUp {
    std::function<Status(int child, std::span<const uint8_t> got)> take;
    std::function<std::span<const uint8_t>()> give;
  };
  struct TreeDown {
    std::function<Status(std::span<const uint8_t> got)> take;
    std::function<std::span<const uint8_t>()> give;
  };
  Status runTree(const char* op, const TreeUp& up, const TreeDown& down, Deadline deadline);
  std::string describe(int rank) const;
  void closeMailboxes();
  // A timeout while this process's connections were stuck says so.
  Status withMeshTrouble(Status st) const;

  std::shared_ptr<ControlMesh> mesh_;
  const uint32_t channel_;
  const int rank_;
  std::vector<RankInfo> ranks_;  // channel rank numbers
  UniqueIdData id_;              // the mesh's, with this channel's commId
  std::shared_ptr<ChannelInbox> inbox_;
  uint32_t collSeq_ = 0;  // collectives run in the same order on every rank
  std::atomic<uint32_t> querySeq_{0};
  bool attached_ = false;  // the mesh routes the channel here (open() succeeded)
  std::mutex shutdownMutex_;
  std::atomic<bool> shut_{false};
};

}  // namespace lanes
