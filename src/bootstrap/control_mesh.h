// ControlMesh: one full mesh of control connections between the ranks of a
// communicator made from a unique id, and the monitor thread that reads it.
// Every communicator split or shrunk from that one (and from those, on down)
// talks over the same connections on a channel of its own: a split opens no
// socket and starts no thread. Frames carry their channel; the monitor hands
// each to that channel's inbox, and a closed connection to every inbox whose
// communicator holds that rank. Internal to src/bootstrap.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "bootstrap/bootstrap.h"

namespace lanes {

// The communicator made from the unique id talks on channel 0.
inline constexpr uint32_t kRootChannel = 0;

class ChannelInbox;

// An eventfd that wakes the monitor's poll; closed on destruction.
class WakeFd {
 public:
  WakeFd();
  ~WakeFd();
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  int fd() const { return fd_; }
  void signal() const;

 private:
  int fd_ = -1;
};

// One frame as the monitor received it.
struct ControlFrame {
  int from = -1;  // mesh rank
  uint16_t type = 0;
  uint32_t tag = 0;
  std::vector<uint8_t> payload;
};

class ControlMesh {
 public:
  // peers[i]: the connection to mesh rank i (self: an empty socket).
  ControlMesh(const UniqueIdData& id, int rank, std::vector<RankInfo> ranks,
              std::vector<Socket> peers);
  // Stops the monitor and closes every connection: with FIN after what was
  // sent, so peers read every goodbye before the end of the stream. Never
  // runs on the monitor thread: inboxes it calls hold no reference to it.
  ~ControlMesh();
  ControlMesh(const ControlMesh&) = delete;
  ControlMesh& operator=(const ControlMesh&) = delete;

  Status start();  // the monitor thread

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  const UniqueIdData& id() const { return id_; }

  // A channel number no other rank of the mesh will hand out (this rank
  // makes it; the members learn it from this rank).
  Status newChannel(uint32_t* channel);
  // Routes `channel`'s frames to `inbox` from now on, after the frames that
  // arrived for it before (in order), and tells it which of its members'
  // connections are already closed. Fails if the channel is already open here.
  Status attach(uint32_t channel, const std::shared_ptr<ChannelInbox>& inbox);
  // Frames for the channel are dropped from now on.
  void detach(uint32_t channel);

  // Thread-safe; one writer per connection at a time. Errors name no rank:
  // the caller knows it by its channel's number.
  Status send(int peer, uint32_t channel, uint16_t type, uint32_t tag, const void* data,
              size_t bytes, Deadline deadline);
  bool onMonitorThread() const { return std::this_thread::get_id() == monitor_.get_id(); }
  // Test hook: drops every connection without a goodbye, as a crashed
  // process would.
  void closeAbruptly();

 private:
  struct Peer {
    Socket sock;
    std::mutex writeMutex;  // one writer at a time: callers and the monitor
    FrameReader reader;     // monitor thread only
    bool polling = false;   // monitor thread only
  };

  // monitor.cc
  void monitorLoop();
  void readPeer(int peer);
  void deliver(uint32_t channel, ControlFrame frame);
  void connectionLost(int peer, const std::string& why);
  std::string describe(int rank) const;
  void stop(bool graceful);

  const UniqueIdData id_;
  const int rank_;
  const std::vector<RankInfo> ranks_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by mesh rank; self is an empty slot

  // Held by the monitor while it hands a frame or a lost connection to an
  // inbox: detach() waits on it, so no handler runs once it returned.
  std::mutex dispatchMutex_;
  std::mutex channelsMutex_;
  std::map<uint32_t, std::shared_ptr<ChannelInbox>> channels_;
  std::map<uint32_t, std::vector<ControlFrame>> early_;  // for channels not attached yet
  std::set<uint32_t> detached_;
  std::vector<std::string> lost_;  // by mesh rank: why its connection closed ("" while open)
  std::atomic<uint32_t> channelsMade_{0};

  WakeFd wake_;
  std::atomic<bool> stopRequested_{false};
  std::thread monitor_;
  std::mutex stopMutex_;
  bool stopped_ = false;
};

}  // namespace lanes
