// The bootstrap root: a detached thread that serves one rendezvous. Every
// rank connects, proves it knows the id's secret and says who it is; once all
// ranks arrived the root hands each the table of everyone, then exits.
// Strangers (garbage, wrong secret, silence) are dropped without disturbing
// the real ranks; ranks that disagree on the rank count all learn so at once.
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "base/env.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/channel_tree.h"
#include "bootstrap/wire.h"

namespace lanes {
namespace {

constexpr size_t kMaxPendingConnections = 4096;
// How often a root waiting for its first rank looks whether it was retired.
constexpr int kRetireCheckMs = 200;

// Roots running in this process by commId, so lanesCommInitRankScalable can
// stop the ones whose id it does not use (process-wide by nature, like the
// root threads themselves).
struct LocalRoots {
  std::mutex mutex;
  std::map<uint64_t, std::weak_ptr<std::atomic<bool>>> retired;
};
LocalRoots& localRoots() {
  // Never destroyed: detached root threads may still use it while the process
  // exits (a static destructor raced them under TSan).
  static LocalRoots* const r = new LocalRoots;
  return *r;
}

struct Pending {
  Socket sock;
  FrameReader reader;
  Deadline helloBy = Deadline::after(wire::kHelloTimeoutSeconds);
};

struct Arrived {
  Socket sock;
  RankInfo info;
  SocketAddress listen;
};

class RootServer {
 public:
  RootServer(Socket listener, const UniqueIdData& id, double timeoutSeconds)
      : listener_(std::move(listener)), id_(id), timeoutSeconds_(timeoutSeconds) {
    std::lock_guard<std::mutex> lock(localRoots().mutex);
    localRoots().retired[id.commId] = retired_;
  }

  // Ready once the thread first blocks in poll(), past its start-up
  // allocations (see createUniqueIdAndRoot).
  std::future<void> parked() { return parked_.get_future(); }

  void run() {
    Deadline overall = Deadline::after(timeoutSeconds_);
    while (nranks_ < 0 || count_ < nranks_) {
      // A failed rendezvous stays up until its timeout only to tell late
      // ranks why; then it ends quietly (everyone was told already).
      if (overall.expired()) return failed_.isOk() ? giveUp() : forget();
      // Retired before any rank came: the id was one of several and unused.
      if (retired_->load() && nranks_ < 0) return forget();
      pollOnce(overall);
    }
    sendTables(overall);
    forget();
  }

 private:
  void pollOnce(Deadline overall) {
    std::vector<pollfd> fds;
    // After a failed accept (out of descriptors) the listener stays readable;
    // leave it out for a while instead of spinning on it.
    const bool listen = acceptPause_.expired();
    fds.push_back({listen ? listener_.fd() : -1, POLLIN, 0});
    int waitMs = std::min(overall.remainingMs(), kRetireCheckMs);
    if (!listen) waitMs = std::min(waitMs, std::max(1, acceptPause_.remainingMs()));
    for (const Pending& p : pending_) {
      fds.push_back({p.sock.fd(), POLLIN, 0});
      waitMs = std::min(waitMs, p.helloBy.remainingMs());
    }
    if (!signalledParked_) {
      signalledParked_ = true;
      parked_.set_value();
    }
    int n = ::poll(fds.data(), fds.size(), waitMs);
    if (n < 0) return;  // EINTR: loop again
    // Pending entries first (indices match fds), newest accepts after.
    for (size_t i = pending_.size(); i-- > 0;) {
      if (fds[i + 1].revents != 0) {
        serve(i);
      } else if (pending_[i].helloBy.expired()) {
        drop(i,
             "it sent no hello within " + std::to_string(int(wire::kHelloTimeoutSeconds)) + " s");
      }
    }
    if (fds[0].revents & POLLIN) acceptAll();
  }

  void acceptAll() {
    for (;;) {
      Socket s;
      Status st = listener_.accept(Deadline::after(0), &s);
      if (st.code() == lanesTimeout) return;  // nothing more queued
      if (!st.isOk()) {
        if (acceptError_.empty())
          LANES_WARN(Bootstrap, -1, "bootstrap root at %s: %s", listenName().c_str(),
                     st.message().c_str());
        acceptError_ = st.message();
        acceptPause_ = Deadline::after(0.05);
        return;
      }
      if (pending_.size() >= kMaxPendingConnections) {
        LANES_WARN(Bootstrap, -1, "bootstrap root: too many unidentified connections; dropping %s",
                   s.peerName().c_str());
        continue;
      }
      pending_.push_back(Pending{std::move(s), {}, Deadline::after(wire::kHelloTimeoutSeconds)});
    }
  }

  void drop(size_t i, const std::string& why) {
    LANES_WARN(Bootstrap, -1,
               "bootstrap root at %s: dropped connection from %s because %s (not a rank of this "
               "communicator, or a rank started with another unique id)",
               listenName().c_str(), pending_[i].sock.peerName().c_str(), why.c_str());
    pending_.erase(pending_.begin() + static_cast<long>(i));
  }

  std::string listenName() const {
    SocketAddress a;
    return listener_.localAddress(&a).isOk() ? a.toString() : std::string("?");
  }

  // Tells a rank why it was refused, then forgets it.
  void refuse(size_t i, const Status& why) {
    LANES_WARN(Bootstrap, -1, "bootstrap root: refused %s: %s", pending_[i].sock.peerName().c_str(),
               why.message().c_str());
    auto payload = wire::encodeError(why);
    (void)sendFrame(pending_[i].sock, wire::kError, 0, payload.data(), payload.size(),
                    Deadline::after(1.0));
    pending_.erase(pending_.begin() + static_cast<long>(i));
  }

  // No rendezvous can succeed once two ranks disagree on the rank count:
  // every rank that arrived learns why now rather than at the timeout, and
  // so does every rank still to come (failed_).
  void failRendezvous(size_t i, const Status& why) {
    failed_ = why;
    refuse(i, why);
    auto payload = wire::encodeError(why);
    for (auto& a : arrived_) {
      if (a)
        (void)sendFrame(a->sock, wire::kError, 0, payload.data(), payload.size(),
                        Deadline::after(1.0));
      a.reset();
    }
    count_ = 0;
  }

  void serve(size_t i) {
    Pending& p = pending_[i];
    bool complete = false;
    Status st = p.reader.readSome(p.sock, wire::kMaxHelloBytes, &complete);
    if (!st.isOk()) return drop(i, st.message());
    if (!complete) return;
    if (p.reader.header().type != wire::kHello)
      return drop(i, "its first frame was of type " + std::to_string(p.reader.header().type) +
                         ", not a hello");
    wire::Hello h;
    st = wire::decodeHello(p.reader.payload(), /*toRoot=*/true, &h);
    if (!st.isOk()) return drop(i, st.message());
    if (!wire::constantTimeEqual(h.secret, id_.secret, sizeof(h.secret)))
      return drop(i, "it presented the wrong secret");
    if (h.commId != id_.commId) return drop(i, "it names another communicator");
    if (h.nranks <= 0 || h.rank < 0 || h.rank >= h.nranks)
      return refuse(
          i, invalidArgument("rank " + std::to_string(h.rank) + " of " + std::to_string(h.nranks) +
                             " is not a valid rank: ranks run from 0 to nranks-1"));
    if (nranks_ >= 0 && h.nranks != nranks_) {
      Status why = invalidUsage(
          "rank " + std::to_string(h.rank) + " was started with " + std::to_string(h.nranks) +
          " ranks, rank " + std::to_string(firstRank_) + " with " + std::to_string(nranks_) +
          ": every rank must be started with the same number of ranks (nranks, or the "
          "launcher's world size)");
      return failed_.isOk() ? failRendezvous(i, why) : refuse(i, why);
    }
    if (!failed_.isOk()) return refuse(i, failed_);
    if (nranks_ < 0) {
      nranks_ = h.nranks;
      firstRank_ = h.rank;
      arrived_.resize(static_cast<size_t>(nranks_));
    }
    auto& slot = arrived_[static_cast<size_t>(h.rank)];
    if (slot)
      return refuse(i,
                    invalidUsage("rank " + std::to_string(h.rank) + " joined twice (first from " +
                                 slot->sock.peerName() + ", again from " + p.sock.peerName() +
                                 "): two processes were given the same rank; check the "
                                 "launcher's rank assignment"));
    h.info.rank = h.rank;
    slot = Arrived{std::move(p.sock), h.info, h.listen};
    ++count_;
    pending_.erase(pending_.begin() + static_cast<long>(i));
    LANES_TRACE(Bootstrap, -1, "bootstrap root: rank %d of %d arrived (%d so far)", h.rank, nranks_,
                count_);
  }

  // Each rank gets only itself and its tree neighbours: enough to join the
  // tree, over which the ranks then gather the whole table. So the root
  // sends O(N) bytes in all, not N tables of N entries.
  void sendTables(Deadline overall) {
    Deadline d = Deadline::after(std::max(5.0, std::min(30.0, overall.remainingMs() / 1000.0)));
    std::vector<RankInfo> infos(static_cast<size_t>(nranks_));
    std::vector<SocketAddress> listens(static_cast<size_t>(nranks_));
    for (const auto& a : arrived_) {
      const int rank = a->info.rank;
      std::vector<int> entries = treeNeighbours(rank, nranks_);
      entries.push_back(rank);
      for (int e : entries) {
        infos[static_cast<size_t>(e)] = arrived_[static_cast<size_t>(e)]->info;
        listens[static_cast<size_t>(e)] = arrived_[static_cast<size_t>(e)]->listen;
      }
      const auto table = wire::encodeTable(infos, listens);
      for (int e : entries) infos[static_cast<size_t>(e)] = RankInfo{};
      Status st = sendFrame(a->sock, wire::kTable, 0, table.data(), table.size(), d);
      if (!st.isOk())
        LANES_WARN(Bootstrap, -1, "bootstrap root: could not send the rank table to rank %d: %s",
                   rank, st.message().c_str());
    }
    LANES_INFO(Bootstrap, -1, "bootstrap root: all %d ranks arrived; each sent its tree neighbours",
               nranks_);
  }

  void forget() {
    std::lock_guard<std::mutex> lock(localRoots().mutex);
    localRoots().retired.erase(id_.commId);
  }

  void giveUp() {
    forget();
    std::string missing;
    int nmissing = 0;
    for (int r = 0; r < nranks_; ++r) {
      if (arrived_[static_cast<size_t>(r)]) continue;
      if (nmissing < 32) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      ++nmissing;
    }
    if (nmissing > 32) missing += ", ...";
    std::string msg = nranks_ < 0 ? "no rank arrived"
                                  : std::to_string(nmissing) + " of " + std::to_string(nranks_) +
                                        " ranks never arrived (ranks " + missing + ")";
    msg = "the bootstrap root at " + listenName() + " gave up after " +
          std::to_string(static_cast<int>(timeoutSeconds_)) +
          " s (LANES_BOOTSTRAP_TIMEOUT): " + msg +
          "; check that every rank started, got the same unique id, and can reach this "
          "address";
    if (!acceptError_.empty())
      msg += "; the root itself could not take a connection: " + acceptError_;
    LANES_WARN(Bootstrap, -1, "%s", msg.c_str());
    auto payload = wire::encodeError(timeoutError(msg));
    for (const auto& a : arrived_)
      if (a)
        (void)sendFrame(a->sock, wire::kError, 0, payload.data(), payload.size(),
                        Deadline::after(1.0));
  }

  Socket listener_;
  UniqueIdData id_;
  double timeoutSeconds_;
  std::vector<Pending> pending_;
  std::vector<std::optional<Arrived>> arrived_;
  std::promise<void> parked_;
  std::shared_ptr<std::atomic<bool>> retired_ = std::make_shared<std::atomic<bool>>(false);
  bool signalledParked_ = false;
  std::string acceptError_;  // the last accept failure, for giveUp
  Status failed_;            // why the rendezvous failed (ranks disagree); OK until then
  Deadline acceptPause_ = Deadline::after(0);
  int nranks_ = -1;
  int firstRank_ = -1;
  int count_ = 0;
};

}  // namespace

Status createUniqueIdAndRoot(const std::string& bindAddr, const uint8_t* secret,
                             lanesUniqueId* out) {
  return createUniqueIdAndRoot(bindAddr, secret, nullptr, out);
}

Status createUniqueIdAndRoot(const std::string& bindAddr, const uint8_t* secret,
                             const uint64_t* commId, lanesUniqueId* out) {
  SocketAddress addr;
  if (bindAddr.empty()) {
    std::vector<InterfaceAddress> ifs;
    LANES_RETURN_IF_ERROR(findInterfaces(envString("LANES_SOCKET_IFNAME").value_or(""), &ifs));
    addr = ifs.front().address;
    LANES_INFO(Bootstrap, -1, "bootstrap root listens on interface %s", ifs.front().name.c_str());
  } else {
    LANES_RETURN_IF_ERROR(SocketAddress::parse(bindAddr, &addr));
  }
  Socket listener;
  LANES_RETURN_IF_ERROR(Socket::listen(&addr, SOMAXCONN, &listener));

  UniqueIdData id;
  LANES_RETURN_IF_ERROR(wire::setRootAddress(addr, &id));
  if (secret)
    std::copy(secret, secret + sizeof(id.secret), id.secret);
  else
    LANES_RETURN_IF_ERROR(wire::randomBytes(id.secret, sizeof(id.secret)));
  if (commId)
    id.commId = *commId;
  else
    LANES_RETURN_IF_ERROR(wire::randomBytes(&id.commId, sizeof(id.commId)));
  LANES_RETURN_IF_ERROR(encodeUniqueId(id, out));

  // The thread owns the listener; it ends after one rendezvous or the timeout.
  // Return only once it is parked in poll(): a process that forks its ranks
  // right after this call then copies no allocator lock the new thread holds
  // mid-start-up (sanitizer allocators have no fork handlers; forked ranks
  // hung in malloc).
  RootServer server(std::move(listener), id, bootstrapTimeoutSeconds());
  std::future<void> parked = server.parked();
  std::thread([server = std::move(server)]() mutable { server.run(); }).detach();
  if (parked.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
    LANES_WARN(Bootstrap, -1, "bootstrap root thread did not start within 5 s; continuing");
  LANES_INFO(Bootstrap, -1, "bootstrap root started at %s", addr.toString().c_str());
  return Status::ok();
}

void retireLocalRoot(const UniqueIdData& id) {
  std::lock_guard<std::mutex> lock(localRoots().mutex);
  auto it = localRoots().retired.find(id.commId);
  if (it == localRoots().retired.end()) return;
  if (auto flag = it->second.lock()) flag->store(true);
}

}  // namespace lanes
