#include "transport/socket/socket_hub.h"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/deadline.h"
#include "base/log.h"
#include "base/wake_fd.h"

namespace lanes {
namespace {

// A connection that does not say hello within this long is dropped.
constexpr double kHelloSeconds = 10;
// The kernel caps it at net.core.somaxconn; the hub accepts at once anyway.
constexpr int kBacklog = 4096;
// Connections waiting for their hello; past this the oldest is dropped, so
// strangers cannot take every descriptor of the process.
constexpr size_t kMaxPending = 1024;
// After a failed accept (out of descriptors, most likely) the listener is
// left alone this long: the connection stays queued and would wake every poll.
constexpr int kAcceptPauseMs = 100;

// A data connection accepted but not yet identified by its hello.
struct PendingHello {
  Socket sock;
  SocketAddress from;
  DataHello hello{};
  size_t got = 0;
  Deadline by = Deadline::never();
};

void refuse(const PendingHello& p, const std::string& why) {
  // Only a Lanes hello's fields mean something.
  if (p.got < sizeof(DataHello) || p.hello.magic != kDataHelloMagic) {
    LANES_WARN(Transport, -1, "socket transport: refused a data connection from %s (%s)",
               p.from.toString().c_str(), why.c_str());
    return;
  }
  const DataHello& h = p.hello;
  LANES_WARN(Transport, -1,
             "socket transport: refused a data connection from %s claiming to be rank %d "
             "dialling rank %d of communicator %016llx (%s)",
             p.from.toString().c_str(), h.srcRank, h.dstRank,
             static_cast<unsigned long long>(h.commId), why.c_str());
}

class Hub final : public SocketHub {
 public:
  Hub(Socket listener, const SocketAddress& address)
      : listener_(std::move(listener)), address_(address) {}
  ~Hub() override {
    stop_.store(true);
    wake_.signal();
    if (thread_.joinable()) thread_.join();
    for (const PendingHello& p : pending_)
      refuse(p, "it had sent no whole hello when the last communicator left");
  }
  Status start() {
    if (!wake_.valid())
      return systemError("eventfd() for the socket hub failed: " + errnoText(errno));
    thread_ = std::thread([this] { run(); });
    return Status::ok();
  }

  const SocketAddress& address() const override { return address_; }

  Status add(uint64_t commId, int rank, HelloTarget* target) override {
    std::lock_guard lock(mu_);
    if (!targets_.emplace(std::make_pair(commId, rank), target).second) {
      return invalidUsage("rank " + std::to_string(rank) +
                          " joined the same communicator twice in one process; every "
                          "lanesCommInitRank of one unique id needs its own rank");
    }
    return Status::ok();
  }

  void remove(uint64_t commId, int rank) override {
    std::lock_guard lock(mu_);
    targets_.erase({commId, rank});
  }

 private:
  void run();
  void acceptAll();
  void identify(PendingHello& p);

  Socket listener_;
  SocketAddress address_;
  WakeFd wake_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<PendingHello> pending_;  // the hub's thread only
  Deadline acceptPause_ = Deadline::after(0);
  Deadline nextAcceptWarning_ = Deadline::after(0);
  std::mutex mu_;  // guards targets_; held while a target is offered a socket
  std::map<std::pair<uint64_t, int>, HelloTarget*> targets_;
};

void Hub::identify(PendingHello& p) {
  const DataHello& h = p.hello;
  if (h.magic != kDataHelloMagic || h.version != kDataHelloVersion)
    return refuse(p, "wrong hello: not Lanes, or another version");
  std::string why;
  {
    std::lock_guard lock(mu_);
    auto it = targets_.find({h.commId, h.dstRank});
    if (it == targets_.end()) {
      why = "it names rank " + std::to_string(h.dstRank) + " of a communicator not in this process";
    } else {
      it->second->offer(h, &p.sock, &why);
    }
  }
  if (p.sock.valid()) refuse(p, why);
}

void Hub::acceptAll() {
  for (;;) {
    PendingHello p;
    Status st = listener_.accept(Deadline::after(0), &p.sock, &p.from);
    if (st.code() == lanesTimeout) return;
    if (!st.isOk()) {
      // Out of descriptors, most likely: the dialler gets no answer and its
      // error names this address; this process's log says why.
      acceptPause_ = Deadline::after(kAcceptPauseMs / 1000.0);
      if (nextAcceptWarning_.expired()) {
        LANES_WARN(Transport, -1,
                   "socket transport: accepting a data connection on %s: %s; raise the "
                   "descriptor limit (ulimit -n) if it says too many open files",
                   address_.toString().c_str(), st.message().c_str());
        nextAcceptWarning_ = Deadline::after(10);
      }
      return;
    }
    if (pending_.size() >= kMaxPending) {
      refuse(pending_.front(), "too many connections waiting for their hello");
      pending_.erase(pending_.begin());
    }
    p.by = Deadline::after(kHelloSeconds);
    pending_.push_back(std::move(p));
  }
}

void Hub::run() {
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    int waitMs = 1000;
    const bool listen = acceptPause_.expired();
    if (!listen) waitMs = std::max(acceptPause_.remainingMs(), 1);
    fds.assign({pollfd{wake_.fd(), POLLIN, 0}, pollfd{listen ? listener_.fd() : -1, POLLIN, 0}});
    for (const PendingHello& p : pending_) {
      fds.push_back({p.sock.fd(), POLLIN, 0});
      waitMs = std::min(waitMs, std::max(p.by.remainingMs(), 0));
    }
    if (::poll(fds.data(), fds.size(), waitMs) < 0) {
      // EINTR, or ENOMEM for the poll's own tables: try again shortly
      // rather than leave connections unanswered.
      if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (fds[0].revents != 0) wake_.drain();
    for (size_t i = pending_.size(); i-- > 0;) {
      PendingHello& p = pending_[i];
      bool done = false;
      if (fds[i + 2].revents != 0) {
        size_t n = 0;
        Status st = p.sock.tryRecv(reinterpret_cast<uint8_t*>(&p.hello) + p.got,
                                   sizeof(DataHello) - p.got, &n);
        p.got += n;
        if (!st.isOk()) {
          refuse(p, "it closed the connection before a whole hello");
          done = true;
        } else if (p.got == sizeof(DataHello)) {
          identify(p);
          done = true;
        }
      }
      if (!done && p.by.expired()) {
        refuse(p, "it sent no hello in time");
        done = true;
      }
      if (done) pending_.erase(pending_.begin() + static_cast<long>(i));
    }
    if (fds[1].revents & POLLIN) acceptAll();
  }
}

// Network namespace of the calling thread: a process whose threads enter
// different namespaces needs a listener in each.
std::string netNamespace() {
  struct stat st {};
  if (::stat("/proc/thread-self/ns/net", &st) != 0) return "?";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

struct HubRegistry {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<SocketHub>> hubs;
};

HubRegistry& registry() {
  static HubRegistry r;  // the process's listeners, as the C API's communicators share them
  return r;
}

}  // namespace

Status SocketHub::acquire(const std::string& ifname, int family, int rank,
                          std::shared_ptr<SocketHub>* out) {
  const std::string key = netNamespace() + "|" + std::to_string(family) + "|" + ifname;
  HubRegistry& reg = registry();
  std::lock_guard lock(reg.mu);
  if (auto hub = reg.hubs[key].lock()) {
    *out = std::move(hub);
    return Status::ok();
  }
  std::vector<InterfaceAddress> interfaces;
  LANES_RETURN_IF_ERROR(findInterfaces(ifname, &interfaces));
  auto it = std::find_if(interfaces.begin(), interfaces.end(),
                         [&](const InterfaceAddress& i) { return i.address.family() == family; });
  if (it == interfaces.end()) it = interfaces.begin();
  if (it == interfaces.end()) {
    return systemError("rank " + std::to_string(rank) +
                       ": no network interface for the socket transport matches "
                       "LANES_SOCKET_IFNAME; set it to an interface this host has");
  }
  SocketAddress address = it->address;
  address.setPort(0);
  Socket listener;
  LANES_RETURN_IF_ERROR(Socket::listen(&address, kBacklog, &listener));
  auto hub = std::make_shared<Hub>(std::move(listener), address);
  LANES_RETURN_IF_ERROR(hub->start());
  LANES_INFO(Transport, rank, "socket transport listens on %s (%s) for this process",
             address.toString().c_str(), it->name.c_str());
  reg.hubs[key] = hub;
  *out = std::move(hub);
  return Status::ok();
}

}  // namespace lanes
