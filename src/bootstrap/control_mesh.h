// ControlMesh: the control connections between the ranks of a communicator
// made from a unique id, and the monitor thread that reads them. A pair of
// ranks connects when one first sends to the other (the bootstrap's rounds
// touch O(log N) partners), so a process holds a few connections, not N - 1.
// Every communicator split or shrunk from that one (and from those, on down)
// talks over the same connections on a channel of its own: a split starts no
// thread. Frames carry their channel; the monitor hands each to that
// channel's inbox, and a lost rank to every inbox whose communicator holds it.
// A connection that closes without the process saying it leaves is a death:
// the rank that sees it passes the news to every rank it is connected to, and
// they on, so every process learns it without a connection to the dead one.
// Internal to src/bootstrap.
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
#include "base/wake_fd.h"
#include "bootstrap/bootstrap.h"

namespace lanes {

// The communicator made from the unique id talks on channel 0.
inline constexpr uint32_t kRootChannel = 0;
// The ranks gather the rank table on this channel before the root channel
// opens; newChannel() never makes it (it makes rank + size * k).
inline constexpr uint32_t kTableChannel = 0xffffffffu;

class ChannelInbox;

// One frame as the monitor received it.
struct ControlFrame {
  int from = -1;  // mesh rank
  uint16_t type = 0;
  uint32_t tag = 0;
  std::vector<uint8_t> payload;
};

class ControlMesh {
 public:
  // listens[i]: mesh rank i's control listener; `listener`: this rank's,
  // which the monitor accepts on from start() to the end.
  ControlMesh(const UniqueIdData& id, int rank, std::vector<RankInfo> ranks,
              std::vector<SocketAddress> listens, Socket listener);
  // Stops the monitor and closes every connection: says it leaves, then FIN
  // after what was sent, so peers read every goodbye before the end of the
  // stream. Never runs on the monitor thread: inboxes it calls hold no
  // reference to it.
  ~ControlMesh();
  ControlMesh(const ControlMesh&) = delete;
  ControlMesh& operator=(const ControlMesh&) = delete;

  Status start();  // the monitor thread

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::vector<RankInfo> ranks() const;
  SocketAddress listenOf(int rank) const;
  // Fills the entries the mesh was made without (the root sends each rank
  // only its tree neighbours). Every rank completes its table before any
  // rank talks to one that is not its tree neighbour.
  void completeTable(const std::vector<RankInfo>& ranks, const std::vector<SocketAddress>& listens);
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

  // Thread-safe; one writer per connection at a time. Connects first if the
  // pair has no connection yet, except on the monitor thread, which never
  // waits for another process's monitor. Errors name no rank: the caller
  // knows it by its channel's number.
  // `mayConnect` false: only over a connection already open.
  Status send(int peer, uint32_t channel, uint16_t type, uint32_t tag, const void* data,
              size_t bytes, Deadline deadline, bool mayConnect = true);
  // Whether this process holds a connection to mesh rank `peer` now.
  bool connected(int peer) const;
  // What this process's connections are stuck on ("" if nothing): the
  // monitor could not accept (out of descriptors), or a connection this
  // rank opened got no answering hello. A wait that timed out adds it.
  std::string trouble() const;
  bool onMonitorThread() const { return std::this_thread::get_id() == monitor_.get_id(); }
  // Test hook: drops every connection without a goodbye, as a crashed
  // process would.
  void closeAbruptly();

 private:
  // A pair may hold two connections, when both ranks connected at once; each
  // side writes on one (chosen at its first send, kept while it is open), so
  // frames stay in order, and the monitor reads both. The pair is lost when
  // its last connection closes.
  enum Slot { kDialed = 0, kAccepted = 1, kSlots = 2 };
  struct Peer {
    // One writer at a time: callers and the monitor (which waits only until
    // its deadline behind a caller that is connecting).
    std::mutex writeMutex;
    int write = -1;  // the slot this side writes on; under writeMutex
    // Assigned under connMutex_ (and only where polling is false).
    Socket socks[kSlots];
    bool polling[kSlots] = {false, false};  // under connMutex_
    // The dialed connection's first frame, the peer's answering hello, is
    // still to come; since when. Under connMutex_.
    bool awaitingHello = false;
    Clock::time_point dialedAt{};
    FrameReader readers[kSlots];  // monitor thread only
    bool leaving = false;         // monitor thread only
  };
  // An accepted connection whose hello has not arrived yet.
  struct Pending {
    Socket sock;
    FrameReader reader;
    Deadline helloBy;
  };

  // Connects to `peer` and sends this rank's hello; under its writeMutex.
  Status dial(int peer, Peer& p, Deadline deadline);
  // The slot to write to `peer` on, connecting if needed and allowed; under
  // its writeMutex.
  Status writeSlot(int peer, Peer& p, Deadline deadline, bool mayConnect, int* slot);

  // monitor.cc
  void monitorLoop();
  void acceptConnections();
  void readPending(Pending& pending, bool readable, bool* done);
  void readPeer(int peer, int slot);
  void deliver(uint32_t channel, ControlFrame frame);
  // The rank is gone: every inbox hears it once; a death (not a leave) is
  // passed on to every connected rank but `heardFrom`. A `contradicted`
  // report (another rank's, while this one's connection to the rank stood
  // open) is not passed on until a death of the rank confirms it.
  void peerLost(int peer, const std::string& why, bool died, int heardFrom,
                bool contradicted = false);
  void handleLostNotice(int from, const std::vector<uint8_t>& payload);
  // Whether a connection of the pair is open and the peer has not hung up
  // on it (monitor thread only).
  bool connectionStandsOpen(int peer) const;
  // A new connection to `peer` hears of every death this rank knows, so a
  // rank cut off from where one was seen still learns of it.
  void tellDeaths(int peer);
  std::string lostReason(int peer) const;
  // Why no frame may be written to `peer`: its loss, unless only a
  // contradicted report says so; "" where it may.
  std::string refusalReason(int peer) const;
  std::string describe(int rank) const;
  void stop(bool graceful);

  const UniqueIdData id_;
  const int rank_;
  const int size_;
  mutable std::mutex tableMutex_;  // leaf lock: ranks_ and listens_ entries
  std::vector<RankInfo> ranks_;
  std::vector<SocketAddress> listens_;
  Socket listener_;
  std::vector<std::unique_ptr<Peer>> peers_;   // by mesh rank; self is an empty slot
  mutable std::mutex connMutex_;               // socks/polling assignment
  std::vector<Pending> pending_;               // monitor thread only
  Deadline acceptPause_ = Deadline::after(0);  // monitor thread only
  std::string acceptTrouble_;                  // under connMutex_

  // Held by the monitor while it hands a frame or a lost connection to an
  // inbox: detach() waits on it, so no handler runs once it returned.
  std::mutex dispatchMutex_;
  std::mutex channelsMutex_;
  std::map<uint32_t, std::shared_ptr<ChannelInbox>> channels_;
  std::map<uint32_t, std::vector<ControlFrame>> early_;  // for channels not attached yet
  std::set<uint32_t> detached_;
  // By mesh rank: why it is gone ("" while it is not), whether it died
  // (rather than left), and whether that was a contradicted report. A leaf
  // lock: taken under any other.
  mutable std::mutex lostMutex_;
  std::vector<std::string> lost_;
  std::vector<bool> died_;
  std::vector<bool> contradicted_;
  std::atomic<uint32_t> channelsMade_{0};

  WakeFd wake_;
  std::atomic<bool> stopRequested_{false};
  std::thread monitor_;
  std::mutex stopMutex_;
  bool stopped_ = false;  // under connMutex_
};

}  // namespace lanes
