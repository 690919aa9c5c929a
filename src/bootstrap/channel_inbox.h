// ChannelInbox: what one communicator receives over a shared ControlMesh.
// The monitor thread files its data frames into a mailbox for recv(), keeps
// its peers' progress, answers its progress queries, and turns a lost rank
// or a failure notice into "rank X is dead" for its failure handler, in the
// communicator's own rank numbers. Goodbyes and failure notices travel along
// the channel's tree (channel_tree.h), so they reach members with no
// connection to the rank that sent them. Internal to src/bootstrap.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/control_mesh.h"
#include "bootstrap/mailbox.h"

namespace lanes {

class ChannelInbox {
 public:
  // members[i]: the mesh rank of the channel's rank i; `rank`: this rank's
  // index there; ranks[i]: who rank i is (for messages).
  ChannelInbox(ControlMesh* mesh, uint32_t channel, std::vector<int> members, int rank,
               const std::vector<RankInfo>& ranks);

  // Channel rank of a mesh rank, -1 if it is no member.
  int channelRank(int meshRank) const;
  int meshRank(int channelRank) const { return members_[static_cast<size_t>(channelRank)]; }
  const std::vector<int>& members() const { return members_; }

  // From the monitor thread, and from attach() for frames that came early.
  void handleFrame(ControlFrame& frame);  // takes the payload
  // A member's connection closed: dead, unless it left this channel first.
  void connectionLost(int meshRank, const std::string& why);

  Mailbox& mailbox() { return mailbox_; }
  Mailbox& replies() { return replies_; }
  int64_t progress(int channelRank) const { return progress_[static_cast<size_t>(channelRank)]; }

  void setFailureHandler(Bootstrap::FailureHandler handler);
  void setProgressSource(Bootstrap::ProgressSource source);
  // Marks a rank this rank found dead itself, without calling the handler.
  void markDead(int channelRank, const std::string& why);

  // Whether this rank sends a notice about `subject` to channel rank `peer`
  // itself: its tree neighbours, and every member it is connected to (whose
  // notice then comes in order after this rank's frames on that connection).
  bool notifiesDirectly(int peer) const;
  // Marks a notice about `subject` (a goodbye or a failure) as passed on
  // already; true the first time.
  bool firstToPass(uint16_t type, int subject);

 private:
  std::string describe(int channelRank) const { return names_[static_cast<size_t>(channelRank)]; }
  void peerFailed(int channelRank, const std::string& why);
  void notifyFailure(int channelRank, const std::string& why);
  void answerProgressQuery(int channelRank, uint32_t queryId);
  void handleFailureNotice(int from, const std::vector<uint8_t>& payload);
  void handleGoodbye(int from, const std::vector<uint8_t>& payload);
  // Sends a notice about `subject` on along the channel's tree, once, to
  // every neighbour but `from` and the subject, over open connections only.
  void passOn(uint16_t type, int subject, const std::vector<uint8_t>& payload, int from);

  ControlMesh* const mesh_;  // outlives every frame it delivers here
  const uint32_t channel_;
  const std::vector<int> members_;
  std::vector<int> byMeshRank_;  // -1: no member
  const int rank_;
  const std::vector<std::string> names_;
  Mailbox mailbox_;
  Mailbox replies_;  // progress answers, by (peer, query id)
  std::unique_ptr<std::atomic<int64_t>[]> progress_;

  std::mutex progressMutex_;
  Bootstrap::ProgressSource progressSource_;
  std::mutex handlerMutex_;
  Bootstrap::FailureHandler handler_;
  std::vector<std::pair<int, std::string>> unreported_;  // deaths before a handler was set
  std::mutex passMutex_;
  std::vector<bool> goodbyePassed_, failurePassed_;  // by channel rank
};

}  // namespace lanes
