// MeshBootstrap: the Bootstrap over a full mesh of control connections, with
// a monitor thread reading every peer (monitor.cc) and a mailbox for recv.
// Internal to src/bootstrap; tests include it for the crash-simulation hook.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/mailbox.h"

namespace lanes {

// Tags at or above this are the bootstrap's own (allGather, barrier).
inline constexpr uint32_t kReservedTagBase = 0x80000000u;
// How long a progress query waits for the other peers once one answered.
inline constexpr double kStragglerSeconds = 0.5;

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

class MeshBootstrap final : public Bootstrap {
 public:
  MeshBootstrap(const UniqueIdData& id, int rank, std::vector<RankInfo> ranks,
                std::vector<Socket> peers);
  ~MeshBootstrap() override;

  // Starts the monitor thread.
  Status start();

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
  Status peerStatus(int peer) const override { return mailbox_.peerStatus(peer); }
  void setProgressSource(ProgressSource source) override;
  std::vector<std::vector<uint8_t>> queryProgress(const std::vector<int>& peers,
                                                  Deadline deadline) override;
  void shutdown() override;

  // Test hook: drops every control connection without a goodbye, as a
  // crashed process would, so peers must report this rank dead.
  void closeAbruptlyForTest();

 private:
  struct Peer {
    Socket sock;
    std::mutex writeMutex;  // one writer at a time: callers and the monitor
    FrameReader reader;     // monitor thread only
    bool polling = false;   // monitor thread only
  };

  Status sendTo(int peer, uint16_t type, uint32_t tag, const void* data, size_t bytes,
                Deadline deadline);
  Status exchange(const void* mine, size_t bytes, void* all, Deadline deadline, const char* op);
  std::string describe(int rank) const;
  void stop(bool goodbye);

  // monitor.cc
  void monitorLoop();
  void readPeer(int peer);
  void handleFrame(int peer, uint16_t type, uint32_t tag, std::vector<uint8_t>& payload);
  void peerFailed(int deadRank, const std::string& why);
  void notifyFailure(int deadRank, const std::string& why);
  void answerProgressQuery(int peer, uint32_t queryId);

  const UniqueIdData id_;
  const int rank_;
  const std::vector<RankInfo> ranks_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; self is an empty slot
  Mailbox mailbox_;
  std::unique_ptr<std::atomic<int64_t>[]> progress_;
  uint32_t collSeq_ = 0;  // collectives run in the same order on every rank
  // Progress queries (monitor.cc): answers by (peer, query id), our source.
  Mailbox replies_;
  std::atomic<uint32_t> querySeq_{0};
  std::mutex progressMutex_;
  ProgressSource progressSource_;

  std::mutex handlerMutex_;
  FailureHandler handler_;
  std::vector<std::pair<int, std::string>> unreported_;  // deaths before a handler was set

  WakeFd wake_;
  std::atomic<bool> stopRequested_{false};
  std::thread monitor_;
  std::mutex shutdownMutex_;
  bool shut_ = false;
  bool goodbyeSent_ = false;
};

}  // namespace lanes
