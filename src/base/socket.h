// Socket: RAII TCP socket with deadline-bounded I/O, shared by the bootstrap
// and the TCP transport. IPv4 and IPv6.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"

namespace lanes {

// A socket address that fits in a lanesUniqueId and crosses the wire as bytes.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  std::string toString() const;  // "1.2.3.4:80" or "[::1]:80"
  // Parses "host:port", "[v6]:port", or a bare host (port 0). Resolves names.
  static Status parse(const std::string& text, SocketAddress* out);
};

// One local interface address picked for listening/advertising.
struct InterfaceAddress {
  std::string name;  // e.g. "eth0"
  SocketAddress address;
};

// Interfaces by NCCL's LANES_SOCKET_IFNAME syntax: "eth,ib" (prefixes),
// "^docker,lo" (exclude prefixes), "=eth0" (exact names). Without a spec:
// non-loopback interfaces first, loopback last. LANES_SOCKET_FAMILY=AF_INET
// or AF_INET6 restricts the family.
Status findInterfaces(const std::string& ifnameSpec, std::vector<InterfaceAddress>* out);
// Whether interface `name` matches `spec` (exposed for tests).
bool interfaceMatches(const std::string& spec, const std::string& name);

// LANES_PORT_RANGE ("50000-50100"): where listeners asked for port 0 bind.
struct PortRange {
  uint16_t first = 0;
  uint16_t last = 0;
};
Status parsePortRange(const std::string& text, PortRange* out);

// Sockets made by listen/connect/accept are non-blocking and close-on-exec;
// sendAll/recvAll wait in poll() until the deadline. Writes use MSG_NOSIGNAL.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_), peer_(o.peer_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();
  // shutdown(SHUT_RDWR): wakes any thread blocked in poll on this socket.
  void shutdownBoth();

  // Listens on `address`; address gets the real port. Port 0 picks a free
  // one: the first free port of LANES_PORT_RANGE when set, else any.
  static Status listen(SocketAddress* address, int backlog, Socket* out);
  // A refused connection is retried until the deadline (ranks may start
  // before the listener) unless `retryRefused` is false: a listener that is
  // known to be up refuses only once its process is gone. Once `*stop` is
  // set (when given), gives up within 100 ms with a RemoteError.
  static Status connect(const SocketAddress& address, Deadline deadline, Socket* out,
                        bool retryRefused = true, const std::atomic<bool>* stop = nullptr);
  Status accept(Deadline deadline, Socket* out, SocketAddress* peer = nullptr) const;

  // Whole-buffer I/O bounded by the deadline. A closed peer is a RemoteError
  // ("connection closed by peer"), a reset likewise.
  Status sendAll(const void* data, size_t bytes, Deadline deadline) const;
  Status recvAll(void* data, size_t bytes, Deadline deadline) const;
  // Non-blocking attempts: bytes moved (0 if it would block); error on close/reset.
  Status trySend(const void* data, size_t bytes, size_t* done) const;
  Status tryRecv(void* data, size_t bytes, size_t* done) const;

  Status setNonBlocking(bool on) const;
  Status setNoDelay() const;
  Status localAddress(SocketAddress* out) const;
  // The remote end, remembered at connect/accept so errors can name it even
  // after a reset (getpeername fails then). Empty for listening sockets.
  const SocketAddress& peerAddress() const { return peer_; }
  std::string peerName() const;  // peer_.toString(), or "an unknown peer"

 private:
  int fd_ = -1;
  SocketAddress peer_;
};

// Framed messages: magic, version, type, tag, channel, length, payload. A
// frame with a wrong magic/version or a length over `maxPayload` is rejected.
// The channel names the communicator a control frame belongs to where
// several share one connection (bootstrap/control_mesh.h).
inline constexpr uint32_t kFrameMagic = 0x4c4e4553;  // "LNES"
inline constexpr uint16_t kFrameVersion = 2;
struct FrameHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t tag;
  uint32_t channel;
  uint64_t length;
};
static_assert(sizeof(FrameHeader) == 24);

Status sendFrame(const Socket& s, uint16_t type, uint32_t tag, const void* payload, size_t bytes,
                 Deadline deadline, uint32_t channel = 0);
Status recvFrame(const Socket& s, uint16_t* type, uint32_t* tag, std::vector<uint8_t>* payload,
                 size_t maxPayload, Deadline deadline);
// Parses a header already received; checks magic/version/length.
Status checkFrameHeader(const FrameHeader& h, size_t maxPayload);

// Assembles one frame at a time from a non-blocking socket without blocking,
// so one thread can read many sockets (the root, the monitor).
class FrameReader {
 public:
  // Reads what is available; *complete once a whole frame is buffered (then
  // stops reading). Errors: closed/reset connection, bad header.
  Status readSome(const Socket& s, size_t maxPayload, bool* complete);
  const FrameHeader& header() const { return header_; }
  std::vector<uint8_t>& payload() { return payload_; }
  void reset();

 private:
  FrameHeader header_{};
  size_t headerDone_ = 0;
  bool headerChecked_ = false;
  std::vector<uint8_t> payload_;
  size_t payloadDone_ = 0;
};

}  // namespace lanes
