// Mailbox: where the monitor thread drops tagged messages from mesh peers
// until recv() takes them, per peer and per tag in arrival order. It also
// holds each peer's state (alive, left normally, dead with a reason), so a
// recv from a peer that is gone fails at once with a sentence naming it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"

namespace lanes {

class Mailbox {
 public:
  // peerNames[i] describes rank i in messages ("rank 3 (host a, pid 123)").
  explicit Mailbox(std::vector<std::string> peerNames);

  void push(int peer, uint32_t tag, std::vector<uint8_t> data);
  // Takes the oldest message from `peer` with `tag`. Messages already queued
  // are delivered even after the peer left or died.
  Status pop(int peer, uint32_t tag, std::vector<uint8_t>* data, Deadline deadline,
             const std::string& what);

  // Takes the first message with `tag` from any of `peers` and says whose it
  // is; fails at the deadline, or at once when none of them can send any more.
  Status popAny(const std::vector<int>& peers, uint32_t tag, int* from, std::vector<uint8_t>* data,
                Deadline deadline);

  // Returns true the first time `peer` is marked dead (callers report once).
  bool markDead(int peer, const std::string& why);
  void markLeft(int peer);
  bool isLeft(int peer) const;
  // Ok while the peer is alive; otherwise the error a send/recv should give.
  Status peerStatus(int peer) const;
  // Fails every current and later pop (the communicator shut down).
  void close(const std::string& why);

 private:
  enum class State { Alive, Left, Dead };
  Status peerErrorLocked(int peer) const;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::string> names_;
  std::vector<State> state_;
  std::vector<std::string> why_;
  std::map<std::pair<int, uint32_t>, std::deque<std::vector<uint8_t>>> queues_;
  bool closed_ = false;
  std::string closedWhy_;
};

}  // namespace lanes
