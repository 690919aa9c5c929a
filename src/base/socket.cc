#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/env.h"

namespace lanes {

static_assert(std::endian::native == std::endian::little,
              "frames and ids cross the wire in host order; Lanes hosts are little-endian");

// ---- SocketAddress ---------------------------------------------------------

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(storage).sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(storage).sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in&>(storage).sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6&>(storage).sin6_port = htons(port);
}

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(storage).sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(storage).sin6_addr, host,
              sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "<no address>";
}

namespace {

// LANES_SOCKET_FAMILY as an AF_ value; AF_UNSPEC when unset or unknown.
int familyFromEnv() {
  auto v = envString("LANES_SOCKET_FAMILY");
  if (!v) return AF_UNSPEC;
  if (*v == "AF_INET" || *v == "inet" || *v == "4") return AF_INET;
  if (*v == "AF_INET6" || *v == "inet6" || *v == "6") return AF_INET6;
  return AF_UNSPEC;
}

bool parsePort(const std::string& text, uint16_t* out) {
  int64_t v = 0;
  if (!parseInt64(text, &v) || v < 0 || v > 65535) return false;
  *out = static_cast<uint16_t>(v);
  return true;
}

}  // namespace

Status SocketAddress::parse(const std::string& text, SocketAddress* out) {
  std::string host = text;
  std::string portText;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos)
      return invalidArgument("address '" + text + "' opens '[' without closing it");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':')
        return invalidArgument("address '" + text + "' has text after ']' that is not ':port'");
      portText = text.substr(close + 2);
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    size_t colon = text.find(':');
    host = text.substr(0, colon);
    portText = text.substr(colon + 1);
  }  // more than one ':' and no brackets: a bare IPv6 address
  uint16_t port = 0;
  if (!portText.empty() && !parsePort(portText, &port))
    return invalidArgument("address '" + text + "' has port '" + portText +
                           "', which is not a number in 0..65535");
  if (host.empty()) return invalidArgument("address '" + text + "' names no host");

  addrinfo hints{};
  hints.ai_family = familyFromEnv();
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    return invalidArgument("cannot resolve host '" + host + "' of address '" + text +
                           "': " + gai_strerror(rc));
  // Prefer IPv4 so every rank resolving the same name picks the same family.
  const addrinfo* pick = res;
  for (const addrinfo* a = res; a; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  SocketAddress addr;
  std::memcpy(&addr.storage, pick->ai_addr, pick->ai_addrlen);
  addr.length = pick->ai_addrlen;
  freeaddrinfo(res);
  addr.setPort(port);
  *out = addr;
  return Status::ok();
}

// ---- Socket ----------------------------------------------------------------

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    peer_ = o.peer_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdownBoth() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

std::string Socket::peerName() const {
  return peer_.length ? peer_.toString() : std::string("an unknown peer");
}

Status parsePortRange(const std::string& text, PortRange* out) {
  auto bad = [&] {
    return invalidArgument("LANES_PORT_RANGE=" + text +
                           " is not a port range; write it as FIRST-LAST, e.g. 50000-50100");
  };
  size_t dash = text.find('-');
  if (dash == std::string::npos) return bad();
  int64_t lo = 0, hi = 0;
  if (!parseInt64(text.substr(0, dash), &lo) || !parseInt64(text.substr(dash + 1), &hi) || lo < 1 ||
      hi > 65535 || lo > hi)
    return bad();
  out->first = static_cast<uint16_t>(lo);
  out->last = static_cast<uint16_t>(hi);
  return Status::ok();
}

namespace {

// A listening socket on exactly `a`; errno of the failed step otherwise
// (EADDRINUSE at bind, or at listen: with SO_REUSEADDR two sockets, here
// thread ranks of one process, can bind one port and only the first to
// listen gets it).
int listenOn(const SocketAddress& a, int backlog, Socket* out, const char** step) {
  Socket s(::socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  *step = "socket()";
  if (!s.valid()) return errno;
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  *step = "bind";
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&a.storage), a.length) != 0) return errno;
  *step = "listen";
  if (::listen(s.fd(), backlog) != 0) return errno;
  *out = std::move(s);
  return 0;
}

}  // namespace

Status Socket::listen(SocketAddress* address, int backlog, Socket* out) {
  Socket s;
  const char* step = "";
  auto rangeText = envString("LANES_PORT_RANGE");
  if (address->port() != 0 || !rangeText) {
    if (int err = listenOn(*address, backlog, &s, &step); err != 0)
      return systemError("cannot listen on " + address->toString() + ": " + step +
                         " failed: " + errnoText(err) +
                         "; pick another port or an address of this host (LANES_SOCKET_IFNAME)");
  } else {
    // With port 0 and LANES_PORT_RANGE set: the first free port of the range
    // (firewalled clusters open only such a range).
    PortRange range;
    LANES_RETURN_IF_ERROR(parsePortRange(*rangeText, &range));
    int lastErr = EADDRINUSE;
    for (uint32_t port = range.first; port <= range.last; ++port) {
      SocketAddress a = *address;
      a.setPort(static_cast<uint16_t>(port));
      lastErr = listenOn(a, backlog, &s, &step);
      if (lastErr != EADDRINUSE) break;
    }
    const std::string ports = std::to_string(range.first) + "-" + std::to_string(range.last);
    if (lastErr == EADDRINUSE)
      return systemError("cannot listen on " + address->toString() + ": every port of " +
                         "LANES_PORT_RANGE=" + ports + " (" +
                         std::to_string(range.last - range.first + 1) +
                         " ports) is already in use; widen the range or stop what holds those "
                         "ports");
    if (lastErr != 0)
      return systemError("cannot listen on " + address->toString() + " in LANES_PORT_RANGE=" +
                         ports + ": " + step + " failed: " + errnoText(lastErr));
  }
  LANES_RETURN_IF_ERROR(s.localAddress(address));
  *out = std::move(s);
  return Status::ok();
}

Status Socket::connect(const SocketAddress& address, Deadline deadline, Socket* out,
                       bool retryRefused, const std::atomic<bool>* stop) {
  constexpr int kStopCheckMs = 100;
  auto stopped = [stop] { return stop != nullptr && stop->load(std::memory_order_acquire); };
  // Ranks may start before the listener: a refused connection is retried
  // until the deadline, with a growing pause.
  int pauseMs = 5;
  int lastErr = 0;
  for (;;) {
    Socket s(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.valid()) return systemError("socket() failed: " + errnoText(errno));
    s.peer_ = address;
    int rc = ::connect(s.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{s.fd(), POLLOUT, 0};
      int n;
      do {
        if (stopped())
          return remoteError("connecting to " + address.toString() + " was given up on");
        int waitMs = deadline.remainingMs();
        if (stop != nullptr) waitMs = std::min(waitMs, kStopCheckMs);
        n = ::poll(&p, 1, waitMs);
      } while ((n < 0 && errno == EINTR) || (n == 0 && stop != nullptr && !deadline.expired()));
      if (n == 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof(err);
        getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      (void)s.setNoDelay();
      *out = std::move(s);
      return Status::ok();
    }
    lastErr = err;
    bool retry = (err == ECONNREFUSED && retryRefused) || err == ECONNRESET || err == EAGAIN ||
                 err == ENETUNREACH || err == EHOSTUNREACH;
    if (!retry || deadline.expired() || stopped()) break;
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(pauseMs, std::max(1, deadline.remainingMs()))));
    pauseMs = std::min(pauseMs * 2, 200);
    if (deadline.expired()) break;
  }
  if (lastErr == ECONNREFUSED && !retryRefused)
    return remoteError("connection to " + address.toString() + " refused (" + errnoText(lastErr) +
                       "): the process that listened there is gone");
  if (lastErr == ETIMEDOUT || lastErr == ECONNREFUSED)
    return timeoutError("could not connect to " + address.toString() + " before the deadline (" +
                        errnoText(lastErr) +
                        "): is the process listening there running, and is the address "
                        "reachable from this host?");
  return systemError("connect to " + address.toString() + " failed: " + errnoText(lastErr));
}

Status Socket::accept(Deadline deadline, Socket* out, SocketAddress* peer) const {
  for (;;) {
    SocketAddress addr;
    addr.length = sizeof(addr.storage);
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&addr.storage), &addr.length,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Socket s(fd);
      s.peer_ = addr;
      (void)s.setNoDelay();
      if (peer) *peer = addr;
      *out = std::move(s);
      return Status::ok();
    }
    int err = errno;
    if (err == EINTR || err == ECONNABORTED) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) return systemError("accept failed: " + errnoText(err));
    if (deadline.expired()) return timeoutError("no connection arrived before the deadline");
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, deadline.remainingMs());
    if (n < 0 && errno != EINTR)
      return systemError("poll on a listener failed: " + errnoText(errno));
  }
}

namespace {

Status closedError(const Socket& s, int err) {
  if (err == 0)
    return remoteError("connection closed by peer " + s.peerName() +
                       " (the process there exited or closed the connection)");
  return remoteError("connection to " + s.peerName() + " failed: " + errnoText(err));
}

// Waits until `events` on fd or the deadline.
Status waitFor(const Socket& s, short events, Deadline deadline, const char* what) {
  for (;;) {
    if (deadline.expired())
      return timeoutError(std::string("timed out ") + what + " " + s.peerName());
    pollfd p{s.fd(), events, 0};
    int n = ::poll(&p, 1, deadline.remainingMs());
    if (n > 0) return Status::ok();  // errors surface from the next send/recv
    if (n < 0 && errno != EINTR) return systemError("poll failed: " + errnoText(errno));
  }
}

}  // namespace

Status Socket::trySend(const void* data, size_t bytes, size_t* done) const {
  *done = 0;
  for (;;) {
    ssize_t n = ::send(fd_, data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      *done = static_cast<size_t>(n);
      return Status::ok();
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
    return closedError(*this, errno);
  }
}

Status Socket::tryRecv(void* data, size_t bytes, size_t* done) const {
  *done = 0;
  if (bytes == 0) return Status::ok();
  for (;;) {
    ssize_t n = ::recv(fd_, data, bytes, MSG_DONTWAIT);
    if (n > 0) {
      *done = static_cast<size_t>(n);
      return Status::ok();
    }
    if (n == 0) return closedError(*this, 0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
    return closedError(*this, errno);
  }
}

Status Socket::sendAll(const void* data, size_t bytes, Deadline deadline) const {
  auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    size_t done = 0;
    LANES_RETURN_IF_ERROR(trySend(p, bytes, &done));
    p += done;
    bytes -= done;
    if (bytes > 0 && done == 0)
      LANES_RETURN_IF_ERROR(waitFor(*this, POLLOUT, deadline, "sending to"));
  }
  return Status::ok();
}

Status Socket::recvAll(void* data, size_t bytes, Deadline deadline) const {
  auto* p = static_cast<uint8_t*>(data);
  while (bytes > 0) {
    size_t done = 0;
    LANES_RETURN_IF_ERROR(tryRecv(p, bytes, &done));
    p += done;
    bytes -= done;
    if (bytes > 0 && done == 0)
      LANES_RETURN_IF_ERROR(waitFor(*this, POLLIN, deadline, "receiving from"));
  }
  return Status::ok();
}

Status Socket::setNonBlocking(bool on) const {
  int flags = fcntl(fd_, F_GETFL);
  if (flags < 0) return systemError("fcntl(F_GETFL) failed: " + errnoText(errno));
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd_, F_SETFL, flags) != 0)
    return systemError("fcntl(F_SETFL) failed: " + errnoText(errno));
  return Status::ok();
}

Status Socket::setNoDelay() const {
  int one = 1;
  if (setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    return systemError("setting TCP_NODELAY failed: " + errnoText(errno));
  return Status::ok();
}

Status Socket::localAddress(SocketAddress* out) const {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0)
    return systemError("getsockname failed: " + errnoText(errno));
  *out = a;
  return Status::ok();
}

// ---- Frames ----------------------------------------------------------------

Status checkFrameHeader(const FrameHeader& h, size_t maxPayload) {
  if (h.magic != kFrameMagic)
    return invalidArgument("received a control frame with bad magic 0x" + [&] {
      char buf[16];
      snprintf(buf, sizeof(buf), "%08x", h.magic);
      return std::string(buf);
    }() + ": the sender is not a Lanes process, or the stream is corrupt");
  if (h.version != kFrameVersion)
    return invalidArgument("received a control frame of protocol version " +
                           std::to_string(h.version) + " (this build speaks " +
                           std::to_string(kFrameVersion) +
                           "): every rank must run the same Lanes version");
  if (h.length > maxPayload)
    return invalidArgument("received a control frame announcing " + std::to_string(h.length) +
                           " bytes, more than the " + std::to_string(maxPayload) +
                           " allowed here: the stream is corrupt or the sender is not Lanes");
  return Status::ok();
}

Status sendFrame(const Socket& s, uint16_t type, uint32_t tag, const void* payload, size_t bytes,
                 Deadline deadline, uint32_t channel) {
  FrameHeader h{kFrameMagic, kFrameVersion, type, tag, channel, bytes};
  // One send for small frames so a frame is rarely split across segments.
  if (bytes <= 4096) {
    uint8_t buf[sizeof(FrameHeader) + 4096];
    std::memcpy(buf, &h, sizeof(h));
    if (bytes) std::memcpy(buf + sizeof(h), payload, bytes);
    return s.sendAll(buf, sizeof(h) + bytes, deadline);
  }
  LANES_RETURN_IF_ERROR(s.sendAll(&h, sizeof(h), deadline));
  return s.sendAll(payload, bytes, deadline);
}

Status recvFrame(const Socket& s, uint16_t* type, uint32_t* tag, std::vector<uint8_t>* payload,
                 size_t maxPayload, Deadline deadline) {
  FrameHeader h{};
  LANES_RETURN_IF_ERROR(s.recvAll(&h, sizeof(h), deadline));
  LANES_RETURN_IF_ERROR(checkFrameHeader(h, maxPayload));
  payload->resize(h.length);
  LANES_RETURN_IF_ERROR(s.recvAll(payload->data(), h.length, deadline));
  *type = h.type;
  *tag = h.tag;
  return Status::ok();
}

void FrameReader::reset() {
  header_ = {};
  headerDone_ = 0;
  headerChecked_ = false;
  payload_.clear();
  payloadDone_ = 0;
}

Status FrameReader::readSome(const Socket& s, size_t maxPayload, bool* complete) {
  *complete = false;
  while (headerDone_ < sizeof(header_)) {
    size_t done = 0;
    LANES_RETURN_IF_ERROR(s.tryRecv(reinterpret_cast<uint8_t*>(&header_) + headerDone_,
                                    sizeof(header_) - headerDone_, &done));
    if (done == 0) return Status::ok();
    headerDone_ += done;
  }
  if (!headerChecked_) {
    LANES_RETURN_IF_ERROR(checkFrameHeader(header_, maxPayload));
    payload_.resize(header_.length);
    headerChecked_ = true;
  }
  while (payloadDone_ < payload_.size()) {
    size_t done = 0;
    LANES_RETURN_IF_ERROR(
        s.tryRecv(payload_.data() + payloadDone_, payload_.size() - payloadDone_, &done));
    if (done == 0) return Status::ok();
    payloadDone_ += done;
  }
  *complete = true;
  return Status::ok();
}

}  // namespace lanes
