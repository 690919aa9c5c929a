#include "bootstrap/mailbox.h"

#include <algorithm>

namespace lanes {

Mailbox::Mailbox(std::vector<std::string> peerNames)
    : names_(std::move(peerNames)), state_(names_.size(), State::Alive), why_(names_.size()) {}

void Mailbox::push(int peer, uint32_t tag, std::vector<uint8_t> data) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_[{peer, tag}].push_back(std::move(data));
  }
  cv_.notify_all();
}

Status Mailbox::peerErrorLocked(int peer) const {
  const std::string& name = names_[static_cast<size_t>(peer)];
  switch (state_[static_cast<size_t>(peer)]) {
    case State::Alive:
      return Status::ok();
    case State::Left:
      return remoteError(name +
                         " already left: it shut its communicator down normally, so "
                         "nothing more will come from or go to it; all ranks must call "
                         "the same collectives before destroying the communicator");
    case State::Dead:
      return remoteError(name + " is gone: " + why_[static_cast<size_t>(peer)]);
  }
  return Status::ok();
}

Status Mailbox::pop(int peer, uint32_t tag, std::vector<uint8_t>* data, Deadline deadline,
                    const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = queues_.find({peer, tag});
    if (it != queues_.end() && !it->second.empty()) {
      *data = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queues_.erase(it);
      return Status::ok();
    }
    if (closed_) return invalidUsage("cannot wait for " + what + ": " + closedWhy_);
    Status st = peerErrorLocked(peer);
    if (!st.isOk()) return Status(st.code(), "while waiting for " + what + ": " + st.message());
    if (deadline.expired())
      return timeoutError("timed out waiting for " + what + " from " +
                          names_[static_cast<size_t>(peer)] +
                          ": that rank is alive but did not send it in time (is it stuck, or did "
                          "the ranks call different operations?); raise LANES_TIMEOUT if it is "
                          "only slow");
    // Cap each wait so Deadline::never() does not overflow the clock.
    auto cap = Clock::now() + std::chrono::seconds(1);
    cv_.wait_until(lock, std::min(cap, deadline.at()));
  }
}

Status Mailbox::popAny(const std::vector<int>& peers, uint32_t tag, int* from,
                       std::vector<uint8_t>* data, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    bool anyAlive = false;
    for (int peer : peers) {
      auto it = queues_.find({peer, tag});
      if (it != queues_.end() && !it->second.empty()) {
        *data = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) queues_.erase(it);
        *from = peer;
        return Status::ok();
      }
      anyAlive = anyAlive || peerErrorLocked(peer).isOk();
    }
    if (closed_) return invalidUsage(closedWhy_);
    if (!anyAlive) return remoteError("none of the peers asked can answer any more");
    if (deadline.expired()) return timeoutError("no answer in time");
    auto cap = Clock::now() + std::chrono::seconds(1);
    cv_.wait_until(lock, std::min(cap, deadline.at()));
  }
}

bool Mailbox::markDead(int peer, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = state_[static_cast<size_t>(peer)];
    if (s != State::Alive) return false;
    s = State::Dead;
    why_[static_cast<size_t>(peer)] = why;
  }
  cv_.notify_all();
  return true;
}

void Mailbox::markLeft(int peer) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = state_[static_cast<size_t>(peer)];
    if (s == State::Alive) s = State::Left;
  }
  cv_.notify_all();
}

bool Mailbox::isLeft(int peer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_[static_cast<size_t>(peer)] == State::Left;
}

Status Mailbox::peerStatus(int peer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return invalidUsage(closedWhy_);
  return peerErrorLocked(peer);
}

void Mailbox::close(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    closedWhy_ = why;
  }
  cv_.notify_all();
}

}  // namespace lanes
