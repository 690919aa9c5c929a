#include "transport/socket/socket_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "base/deadline.h"
#include "base/log.h"
#include "base/page_buffer.h"
#include "base/wake_fd.h"
#include "transport/common/byte_ring.h"
#include "transport/socket/stripe_map.h"
#include "transport/socket/zero_copy.h"

namespace lanes {
namespace {

constexpr uint16_t kKindData = 1;
constexpr uint16_t kKindCredit = 2;  // offset = bytes the receiver has consumed
// Only a safety net: post(), consume() and credits wake a sleeping worker at once.
constexpr int kIdlePollMs = 100;
// Frames moved per socket per pass, so one busy socket does not starve the others.
constexpr int kFramesPerPass = 16;
// Where the engine moves the bytes, the workers read the sockets again once
// it has made no port call for this long (it is between calls).
constexpr int kEngineQuietMs = 1;
// While the engine goes on making calls, a worker looks again at doubling
// intervals up to this: a look every millisecond per worker was most of the
// wake-ups of a host short of cores (bench/results/tcp_netns/worker_watch).
// The price: once the engine stops calling, its workers may take over the
// reading up to this (plus kEngineQuietMs) late; meanwhile the kernel's
// socket buffers take the peer's bytes, and once they are full its sends wait.
constexpr int kEngineWatchMaxMs = 64;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct WireHeader {
  uint16_t kind;
  uint16_t lane;
  uint32_t length;
  uint64_t offset;  // data: stream offset of the first payload byte
};
static_assert(sizeof(WireHeader) == 16);

// seq_cst: a raised credit limit is the store before wakeSleepers() looks for
// sleepers (the store-buffer pattern of storeCursor below).
void storeMax(std::atomic<uint64_t>& a, uint64_t value) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (cur < value && !a.compare_exchange_weak(cur, value, std::memory_order_seq_cst,
                                                 std::memory_order_relaxed)) {
  }
}

using Cursors = std::unique_ptr<std::atomic<uint64_t>[]>;

// Each socket's worker stores its own cursor and then reads every cursor.
// Both sides are seq_cst: with release/acquire two workers finishing at once
// could each read the other's old cursor (store-buffer reordering), and the
// in-order prefix would stay behind with no later frame to recompute it. In
// one total order, the worker whose store comes last reads every final
// cursor.
void storeCursor(std::atomic<uint64_t>& cursor, uint64_t value) {
  cursor.store(value, std::memory_order_seq_cst);
}

uint64_t minCursor(const Cursors& cursors, int n) {
  uint64_t m = UINT64_MAX;
  for (int i = 0; i < n; ++i) m = std::min(m, cursors[i].load(std::memory_order_seq_cst));
  return m;
}

// One lane, this rank -> peer. Its ring is pages of its own: a connection
// torn down while zero-copy sends from it are still queued in the kernel
// (a peer that stopped reading) must not see them reused by an allocation.
// Both lanes' rings become resident only as their stream first reaches them
// (SocketConnection::reachRing), so a pair that moves a few bytes (an
// all-to-all of many small blocks) does not hold the whole ring, and the
// first pass over it does not take a page fault per page.
struct SendLane {
  PageBuffer buffer;
  std::atomic<uint64_t> produced{0};  // bytes post() copied in
  std::atomic<uint64_t> released{0};  // bytes every socket is done with (reusable)
  std::atomic<uint64_t> limit{0};     // peer's consumed + buffer size (credit)
  Cursors cursor;                     // per socket: next byte it sends
  // Per socket: the bytes before it sent, and the kernel no longer reads
  // them (a zero-copy send's pages are the buffer's until it reports).
  Cursors done;
};

// One lane, peer -> this rank.
struct RecvLane {
  PageBuffer buffer;
  Cursors cursor;                       // per socket: next byte it receives
  std::atomic<uint64_t> committed{0};   // every byte below arrived
  std::atomic<uint64_t> consumed{0};    // freed by consume()
  std::atomic<uint64_t> creditSent{0};  // consumed offset last told to the peer
};

// A data frame sent whose lane is released up to `end` once the kernel
// reports zero-copy send `after` and every one before it done.
struct Unreleased {
  uint32_t after;
  uint16_t lane;
  uint64_t end;
};

// A data socket and its framing state, touched under `busy`: by its worker
// thread, and by the engine's post() that sends a small post itself
// (payloadSent and the zero-copy counts are read by tests).
struct DataSocket {
  std::mutex busy;
  Socket socket;
  int index = 0;
  // Frame being sent.
  bool outPending = false;
  WireHeader out{};
  const std::byte* outPayload = nullptr;
  size_t outDone = 0;        // header + payload bytes sent
  bool outZeroCopy = false;  // its payload goes with MSG_ZEROCOPY
  int nextLane = 0;          // round-robin start
  bool writeBlocked = false;
  ZeroCopySends zeroCopy;
  std::deque<Unreleased> unreleased;  // in the order sent
  // Frame being received.
  WireHeader in{};
  size_t inHeaderGot = 0;
  bool inPayload = false;
  uint64_t inPos = 0;
  size_t inLeft = 0;
  // The peer closed this socket in order (end of file between frames): what
  // it sent before is all here; the socket is no longer read or polled.
  bool peerClosed = false;
  std::atomic<uint64_t> payloadSent{0};
  std::atomic<uint64_t> zeroCopySends{0};
  std::atomic<uint64_t> zeroCopyCopied{0};
  std::atomic<bool> zeroCopyOff{false};
};

struct Worker {
  WakeFd wake;
  std::atomic<bool> sleeping{false};
  std::thread thread;
  int first = 0;  // sockets [first, first + count)
  int count = 0;
  // SocketMoveCounts' share of this worker, written by its thread alone
  // (release: a reader that sees a wake-up sees the restart before it).
  std::atomic<uint64_t> engineWatchWakeups{0};
  std::atomic<uint64_t> engineWatchRestarts{0};
  std::atomic<uint64_t> readBytes{0};
};

class SocketConnection;

class SocketSendPort final : public SendPort {
 public:
  SocketSendPort(SocketConnection* c, int lane) : c_(c), lane_(lane) {}
  Status post(const void* src, size_t bytes, size_t* taken) override;

 private:
  SocketConnection* c_;
  int lane_;
};

class SocketRecvPort final : public RecvPort {
 public:
  SocketRecvPort(SocketConnection* c, int lane) : c_(c), lane_(lane) {}
  Status peek(std::span<const std::byte>* view) override;
  void consume(size_t bytes) override;

 private:
  SocketConnection* c_;
  int lane_;
};

class SocketConnection final : public Connection {
 public:
  SocketConnection(const SocketConnectionConfig& config, EstablishSockets establish);
  ~SocketConnection() override {
    if (!drained_) drain(Deadline::after(kConnectionDrainSeconds));
    close();
    // The first worker starts the others: once it is joined, they are all known.
    for (auto& w : workers_) {
      if (w->thread.joinable()) w->thread.join();
    }
  }

  int peer() const override { return cfg_.peer; }
  const char* transportName() const override { return "tcp"; }
  bool pollingMakesSystemCalls() const override { return cfg_.engineMoves; }
  int lanes() const override { return cfg_.lanes; }
  SendPort& sendPort(int lane) override { return sendPorts_.at(static_cast<size_t>(lane)); }
  RecvPort& recvPort(int lane) override { return recvPorts_.at(static_cast<size_t>(lane)); }
  void close() override;
  bool drain(Deadline deadline) override;

  Status post(int lane, const void* src, size_t bytes, size_t* taken);
  Status peek(int lane, std::span<const std::byte>* view);
  void consume(int lane, size_t bytes);
  std::vector<uint64_t> payloadSent() const;
  std::vector<ZeroCopyCounts> zeroCopyCounts() const;
  SocketMoveCounts moveCounts() const;

 private:
  // The first use starts the connection; later calls return at once.
  void ensureStarted();
  void firstWorker();
  Status takeSockets(std::vector<Socket> sockets);
  void workerLoop(Worker& w);
  // zeroCopy: large frames may go with MSG_ZEROCOPY (the workers' sends).
  Status sendSome(DataSocket& s, bool* progressed, bool zeroCopy = true);
  void sent(DataSocket& s);
  void release(int lane, int socket, uint64_t end);
  Status reapZeroCopy(DataSocket& s, bool* progressed);
  // *bytes (when given) adds the payload bytes read off the socket.
  Status recvSome(DataSocket& s, bool* progressed, uint64_t* bytes = nullptr);
  Status receive(DataSocket& s, void* into, size_t bytes, size_t* got, bool* eof);
  Status onPeerClosed(DataSocket& s);
  Status onHeader(DataSocket& s);
  bool creditDue(int lane) const;
  bool buildFrame(DataSocket& s, bool zeroCopy);
  bool hasSendWork(const DataSocket& s) const;
  Status socketError(const DataSocket& s, const std::string& what) const;
  void fail(const Status& why);
  Status failure() const;
  void wakeSleepers();
  bool sendInline(int lane, uint64_t from, uint64_t to);
  Status postFromCaller(int lane, const std::byte* src, size_t bytes, size_t* taken);
  size_t sendFromCaller(int lane, const std::byte* src, size_t bytes);
  void sendRing();
  void readSockets();
  void sendOn(DataSocket& s);
  void sendCredit(int lane);
  // Runs one socket's step under its lock, unless another thread holds it;
  // a failure fails the connection.
  template <typename Step>
  void trySocket(DataSocket& s, Step step);
  void noteEngineCall() { engineCalledNs_.store(nowNs(), std::memory_order_relaxed); }
  // The clock is read before the engine's last call: a worker preempted
  // between the two then sees the engine as more recent, never as quiet.
  bool engineActive() const {
    if (!cfg_.engineMoves) return false;
    const int64_t now = nowNs();
    return now - engineCalledNs_.load(std::memory_order_relaxed) <
           int64_t{kEngineQuietMs} * 1000000;
  }
  int creditSocket(int lane) const { return lane % nsockets_; }
  // Makes a lane's ring resident up to stream offset `end` (PageBuffer::prefault).
  void reachRing(PageBuffer& ring, uint64_t end) const {
    ring.prefault(static_cast<size_t>(std::min<uint64_t>(end, capacity_)));
  }

  SocketConnectionConfig cfg_;
  EstablishSockets establish_;
  int nsockets_;
  size_t capacity_;
  uint64_t creditThreshold_;
  StripeMap map_;
  std::vector<SendLane> send_;
  std::vector<RecvLane> recv_;
  std::vector<std::unique_ptr<DataSocket>> sockets_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<SocketSendPort> sendPorts_;
  std::vector<SocketRecvPort> recvPorts_;

  std::atomic<bool> started_{false};
  // Set once sockets_ hold the connected sockets; fail() shuts them down
  // only then (before, the first worker sees failed_ and gives up).
  std::atomic<bool> socketsReady_{false};
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> engineCalledNs_{0};  // the engine's last port call
  std::atomic<uint64_t> sentFromCaller_{0};
  // Data sockets the peer closed in order; the connection fails when all
  // are: one socket's end of file may overtake data still on the others.
  std::atomic<int> peerClosedSockets_{0};
  mutable std::mutex failMu_;
  Status failure_;
  std::mutex lifeMu_;  // orders the start against close()
  bool closed_ = false;
  bool drained_ = false;  // drain() ran: destruction does not wait again
};

Status SocketSendPort::post(const void* src, size_t bytes, size_t* taken) {
  return c_->post(lane_, src, bytes, taken);
}
Status SocketRecvPort::peek(std::span<const std::byte>* view) { return c_->peek(lane_, view); }
void SocketRecvPort::consume(size_t bytes) { c_->consume(lane_, bytes); }
SocketConnection::SocketConnection(const SocketConnectionConfig& config, EstablishSockets establish)
    : cfg_(config),
      establish_(std::move(establish)),
      nsockets_(config.threads * config.socketsPerThread),
      capacity_(config.bufferBytes),
      creditThreshold_(std::max<uint64_t>(config.bufferBytes / 4, kRingGranule)),
      map_{config.stripeBytes, config.threads * config.socketsPerThread},
      send_(static_cast<size_t>(config.lanes)),
      recv_(static_cast<size_t>(config.lanes)) {
  for (int l = 0; l < cfg_.lanes; ++l) {
    sendPorts_.emplace_back(this, l);
    recvPorts_.emplace_back(this, l);
  }
}

void SocketConnection::ensureStarted() {
  if (started_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(lifeMu_);
  if (started_.load(std::memory_order_relaxed) || closed_) return;
  for (int l = 0; l < cfg_.lanes; ++l) {
    SendLane& s = send_[static_cast<size_t>(l)];
    s.buffer = PageBuffer(capacity_);
    s.limit.store(capacity_);
    s.cursor = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(nsockets_));
    s.done = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(nsockets_));
    RecvLane& r = recv_[static_cast<size_t>(l)];
    r.buffer = PageBuffer(capacity_);
    r.cursor = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(nsockets_));
    for (int i = 0; i < nsockets_; ++i) {
      s.cursor[i].store(map_.firstOffset(l, i));
      s.done[i].store(map_.firstOffset(l, i));
      r.cursor[i].store(map_.firstOffset(l, i));
    }
  }
  for (int i = 0; i < nsockets_; ++i) {
    auto ds = std::make_unique<DataSocket>();
    ds->index = i;
    sockets_.push_back(std::move(ds));
  }
  for (int t = 0; t < cfg_.threads; ++t) {
    auto w = std::make_unique<Worker>();
    w->first = t * cfg_.socketsPerThread;
    w->count = cfg_.socketsPerThread;
    workers_.push_back(std::move(w));
  }
  started_.store(true, std::memory_order_release);
  auto ringMapped = [&](const PageBuffer& ring, const char* direction) {
    if (ring.valid()) return true;
    fail(systemError("mmap() of a " + std::to_string(capacity_) + "-byte " + direction +
                     " ring for peer rank " + std::to_string(cfg_.peer) +
                     " failed: " + errnoText(ring.error()) + "; lower LANES_SOCKET_RING_BYTES"));
    return false;
  };
  for (int l = 0; l < cfg_.lanes; ++l) {
    if (!ringMapped(send_[static_cast<size_t>(l)].buffer, "send") ||
        !ringMapped(recv_[static_cast<size_t>(l)].buffer, "receive"))
      return;
  }
  for (auto& w : workers_) {
    if (!w->wake.valid()) {
      fail(systemError("eventfd() for a socket worker failed: " + errnoText(errno)));
      return;
    }
  }
  workers_[0]->thread = std::thread([this] { firstWorker(); });
}

Status SocketConnection::takeSockets(std::vector<Socket> sockets) {
  if (sockets.size() != static_cast<size_t>(nsockets_))
    return internalError("socket connection: established the wrong number of sockets");
  std::string zeroCopyRefused, busyPollRefused;
  for (int i = 0; i < nsockets_; ++i) {
    Socket& s = sockets[static_cast<size_t>(i)];
    LANES_RETURN_IF_ERROR(s.setNonBlocking(true));
    LANES_RETURN_IF_ERROR(s.setNoDelay());
    DataSocket& ds = *sockets_[static_cast<size_t>(i)];
    ds.zeroCopy.enable(s.fd(), cfg_.zeroCopyMinBytes, &zeroCopyRefused);
    // The kernel's own busy polling of the device queue (where the driver
    // has it, and above net.core.busy_read only with CAP_NET_ADMIN).
    if (cfg_.busyPollUs > 0 && ::setsockopt(s.fd(), SOL_SOCKET, SO_BUSY_POLL, &cfg_.busyPollUs,
                                            sizeof(cfg_.busyPollUs)) != 0)
      busyPollRefused = "setsockopt(SO_BUSY_POLL) failed: " + errnoText(errno);
    ds.socket = std::move(s);
  }
  if (!zeroCopyRefused.empty())
    LANES_INFO(Transport, cfg_.rank, "tcp to peer rank %d: plain sends only: %s", cfg_.peer,
               zeroCopyRefused.c_str());
  if (!busyPollRefused.empty())
    LANES_INFO(Transport, cfg_.rank,
               "tcp to peer rank %d: the workers poll, the kernel does not (%s)", cfg_.peer,
               busyPollRefused.c_str());
  return Status::ok();
}

void SocketConnection::firstWorker() {
  std::vector<Socket> sockets;
  Status st = establish_(failed_, &sockets);
  if (st.isOk()) st = takeSockets(std::move(sockets));
  if (!st.isOk()) {
    if (!failed_.load(std::memory_order_acquire))
      LANES_INFO(Transport, cfg_.rank, "%s", st.message().c_str());
    fail(st);
    return;
  }
  // seq_cst pairs with fail(): either it sees the sockets and shuts them
  // down, or this sees the failure.
  socketsReady_.store(true, std::memory_order_seq_cst);
  if (failed_.load(std::memory_order_seq_cst)) {
    for (auto& s : sockets_) s->socket.shutdownBoth();
    return;
  }
  for (size_t t = 1; t < workers_.size(); ++t) {
    Worker* worker = workers_[t].get();
    worker->thread = std::thread([this, worker] { workerLoop(*worker); });
  }
  workerLoop(*workers_[0]);
}

void SocketConnection::close() {
  std::lock_guard lock(lifeMu_);
  if (closed_) return;
  closed_ = true;
  // No join here: a communicator closes all its connections first, so their
  // workers (some perhaps still connecting) stop together, not one by one.
  fail(remoteError("the socket connection to peer rank " + std::to_string(cfg_.peer) + " (" +
                   cfg_.peerAddress + ") was closed on rank " + std::to_string(cfg_.rank)));
}

bool SocketConnection::drain(Deadline deadline) {
  drained_ = true;
  if (!started_.load(std::memory_order_acquire)) return true;
  Backoff backoff;
  for (;;) {
    if (failed_.load(std::memory_order_acquire)) return true;
    bool sent = true;
    for (const SendLane& lane : send_) {
      sent &= lane.released.load(std::memory_order_acquire) >=
              lane.produced.load(std::memory_order_relaxed);
    }
    if (sent) return true;
    if (deadline.expired()) return false;
    backoff.pause();
  }
}

void SocketConnection::fail(const Status& why) {
  {
    std::lock_guard lock(failMu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    failure_ = why;
    failed_.store(true, std::memory_order_seq_cst);
  }
  // The peer sees EOF at once instead of waiting for its own timeout, and
  // workers blocked in poll() wake.
  if (socketsReady_.load(std::memory_order_seq_cst)) {
    for (auto& s : sockets_) s->socket.shutdownBoth();
  }
  for (auto& w : workers_) w->wake.signal();
}

Status SocketConnection::failure() const {
  std::lock_guard lock(failMu_);
  return failure_;
}

void SocketConnection::wakeSleepers() {
  for (auto& w : workers_) {
    if (w->sleeping.load(std::memory_order_seq_cst)) w->wake.signal();
  }
}

Status SocketConnection::post(int lane, const void* src, size_t bytes, size_t* taken) {
  *taken = 0;
  ensureStarted();
  if (failed_.load(std::memory_order_acquire)) return failure();
  // Until the sockets are up the ring holds the first posts, as below.
  if (cfg_.engineMoves && socketsReady_.load(std::memory_order_acquire))
    return postFromCaller(lane, static_cast<const std::byte*>(src), bytes, taken);
  SendLane& s = send_[static_cast<size_t>(lane)];
  uint64_t p = s.produced.load(std::memory_order_relaxed);
  size_t room = capacity_ - static_cast<size_t>(p - s.released.load(std::memory_order_acquire));
  size_t n = std::min(bytes, room);
  if (n < bytes) n &= ~(kRingGranule - 1);
  if (n == 0) return Status::ok();
  reachRing(s.buffer, p + n);
  // Published in pieces so the workers start sending the first bytes while
  // the rest are still being copied.
  auto* in = static_cast<const std::byte*>(src);
  for (size_t done = 0; done < n;) {
    size_t at = static_cast<size_t>((p + done) % capacity_);
    size_t piece = std::min({n - done, capacity_ - at, kRingCommitBytes});
    std::memcpy(s.buffer.get() + at, in + done, piece);
    done += piece;
    // seq_cst pairs with the worker's sleeping flag: either it sees the
    // bytes before sleeping, or we see it asleep and wake it.
    s.produced.store(p + done, std::memory_order_seq_cst);
    if (n > kRingCommitBytes || !sendInline(lane, p + done - piece, p + done)) wakeSleepers();
  }
  *taken = n;
  return Status::ok();
}

// A small post goes out from the engine's own thread, on the sockets that
// carry its stripes [from, to) where they are free: waking a worker for it
// costs more than the send (a hand-off, and on a host short of cores a
// context switch). Large posts stay with the workers, which send one piece
// while post() copies the next. Plain sends only: a zero-copy send's report
// would need a worker anyway. True once nothing is left for a worker to do
// on those sockets.
bool SocketConnection::sendInline(int lane, uint64_t from, uint64_t to) {
  if (!socketsReady_.load(std::memory_order_acquire)) return false;
  bool done = true;
  int last = -1;
  for (uint64_t at = from; at < to; at = map_.stripeEnd(at)) {
    const int index = map_.socketOf(lane, at);
    if (index == last) continue;
    last = index;
    DataSocket& s = *sockets_[static_cast<size_t>(index)];
    std::unique_lock<std::mutex> busy(s.busy, std::try_to_lock);
    if (!busy.owns_lock()) {
      done = false;
      continue;
    }
    bool progressed = false;
    if (Status st = sendSome(s, &progressed, /*zeroCopy=*/false); !st.isOk()) {
      if (!failed_.load(std::memory_order_acquire))
        LANES_INFO(Transport, cfg_.rank, "%s", st.message().c_str());
      fail(st);
      return false;
    }
    done = done && !hasSendWork(s) && s.zeroCopy.idle();
  }
  return done;
}

template <typename Step>
void SocketConnection::trySocket(DataSocket& s, Step step) {
  std::unique_lock<std::mutex> busy(s.busy, std::try_to_lock);
  if (!busy.owns_lock()) return;
  bool progressed = false;
  Status st = step(s, &progressed);
  if (st.isOk()) return;
  if (!failed_.load(std::memory_order_acquire))
    LANES_INFO(Transport, cfg_.rank, "%s", st.message().c_str());
  fail(st);
}

Status SocketConnection::postFromCaller(int lane, const std::byte* src, size_t bytes,
                                        size_t* taken) {
  noteEngineCall();
  SendLane& l = send_[static_cast<size_t>(lane)];
  const uint64_t p = l.produced.load(std::memory_order_relaxed);
  // What the ring still holds goes first: each socket's stream is in order.
  if (l.released.load(std::memory_order_acquire) != p) sendRing();
  *taken = sendFromCaller(lane, src, bytes);
  // Held back by the kernel or by the peer's credit: read what the peer
  // sent meanwhile (its credits among it).
  if (*taken < bytes) readSockets();
  return failed_.load(std::memory_order_acquire) ? failure() : Status::ok();
}

// Sends the frames of [produced, produced + bytes) from `src` while their
// sockets are free; returns the bytes taken. A frame the kernel did not
// take whole is taken all the same where the ring has room for it: its rest
// is copied there at its stream offset, left pending on its socket for the
// next sender of that socket (this engine's next post, or the woken
// worker), and the next frame goes on, on the next socket: a single full
// socket does not hold back the others. Plain sends: a zero-copy send
// would hold the caller's pages past the call.
size_t SocketConnection::sendFromCaller(int lane, const std::byte* src, size_t bytes) {
  SendLane& l = send_[static_cast<size_t>(lane)];
  const uint64_t p = l.produced.load(std::memory_order_relaxed);
  const uint64_t end = std::min<uint64_t>(p + bytes, l.limit.load(std::memory_order_acquire));
  uint64_t at = p;
  bool leftToWorker = false;
  while (at < end) {
    const int index = map_.socketOf(lane, at);
    DataSocket& s = *sockets_[static_cast<size_t>(index)];
    std::unique_lock<std::mutex> busy(s.busy, std::try_to_lock);
    if (!busy.owns_lock() || s.outPending || !s.unreleased.empty() || !s.zeroCopy.idle() ||
        l.cursor[index].load(std::memory_order_relaxed) != at)
      break;
    const uint64_t len = std::min(end, map_.stripeEnd(at)) - at;
    // Room in the ring for the frame, should the kernel not take it whole.
    if (at + len - l.released.load(std::memory_order_acquire) > capacity_) break;
    const std::byte* payload = src + (at - p);
    s.out = WireHeader{kKindData, static_cast<uint16_t>(lane), static_cast<uint32_t>(len), at};
    iovec iov[2] = {{&s.out, sizeof(WireHeader)},
                    {const_cast<std::byte*>(payload), static_cast<size_t>(len)}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    ssize_t n;
    do {
      n = ::sendmsg(s.socket.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      Status st = socketError(s, "send failed: " + errnoText(errno));
      if (!failed_.load(std::memory_order_acquire))
        LANES_INFO(Transport, cfg_.rank, "%s", st.message().c_str());
      fail(st);
      break;
    }
    const size_t done = n < 0 ? 0 : static_cast<size_t>(n);
    if (done == sizeof(WireHeader) + len) {
      s.writeBlocked = false;
      sentFromCaller_.fetch_add(len, std::memory_order_relaxed);
      sent(s);
      at += len;
      continue;
    }
    const size_t ringAt = static_cast<size_t>(at % capacity_);  // a stripe never wraps
    reachRing(l.buffer, at + len);
    std::memcpy(l.buffer.get() + ringAt, payload, len);
    s.outPayload = l.buffer.get() + ringAt;
    s.outDone = done;
    s.outZeroCopy = false;
    s.outPending = true;
    s.writeBlocked = true;
    leftToWorker = true;
    at += len;
  }
  // seq_cst pairs with the workers' sleeping flag, as in post().
  if (at > p) l.produced.store(at, std::memory_order_seq_cst);
  if (leftToWorker) wakeSleepers();
  return static_cast<size_t>(at - p);
}

// What a worker would do for the sockets' incoming side, from a call that
// found nothing to move: without it a credit, or a frame's rest the peer
// can only send once this side reads, would wait for a socket the engine
// is not reading.
void SocketConnection::readSockets() {
  for (auto& socket : sockets_) {
    trySocket(*socket, [this](DataSocket& s, bool* progressed) { return recvSome(s, progressed); });
  }
}

void SocketConnection::sendRing() {
  for (auto& socket : sockets_) sendOn(*socket);
}

// Sends what socket s has (a credit, a frame's rest, ring bytes) from this
// thread; what the kernel did not take is left to the socket's worker,
// woken so that it watches the socket for room.
void SocketConnection::sendOn(DataSocket& s) {
  bool left = false;
  trySocket(s, [&](DataSocket& d, bool* progressed) {
    Status st = sendSome(d, progressed, /*zeroCopy=*/false);
    left = d.outPending || hasSendWork(d);
    return st;
  });
  if (!left) return;
  Worker& w = *workers_[static_cast<size_t>(s.index / cfg_.socketsPerThread)];
  if (w.sleeping.load(std::memory_order_seq_cst)) w.wake.signal();
}

Status SocketConnection::peek(int lane, std::span<const std::byte>* view) {
  ensureStarted();
  if (!started_.load(std::memory_order_acquire)) {  // closed before its first use
    *view = {};
    return failure();
  }
  RecvLane& r = recv_[static_cast<size_t>(lane)];
  if (cfg_.engineMoves && socketsReady_.load(std::memory_order_acquire)) {
    noteEngineCall();
    if (r.committed.load(std::memory_order_acquire) - r.consumed.load(std::memory_order_relaxed) <
        kRingGranule)
      readSockets();
  }
  bool failed = failed_.load(std::memory_order_acquire);
  // Partial reads leave the cursor mid-granule; hand out whole granules only.
  uint64_t committed = r.committed.load(std::memory_order_acquire) & ~uint64_t{kRingGranule - 1};
  uint64_t consumed = r.consumed.load(std::memory_order_relaxed);
  if (committed > consumed) {
    size_t at = static_cast<size_t>(consumed % capacity_);
    size_t len = std::min(static_cast<size_t>(committed - consumed), capacity_ - at);
    *view = {r.buffer.get() + at, len};
    return Status::ok();
  }
  *view = {};
  if (failed) return failure();
  return Status::ok();
}

void SocketConnection::consume(int lane, size_t bytes) {
  RecvLane& r = recv_[static_cast<size_t>(lane)];
  uint64_t c = r.consumed.load(std::memory_order_relaxed) + bytes;
  r.consumed.store(c, std::memory_order_seq_cst);
  if (c - r.creditSent.load(std::memory_order_seq_cst) >= creditThreshold_) sendCredit(lane);
}

void SocketConnection::sendCredit(int lane) {
  const int index = creditSocket(lane);
  if (cfg_.engineMoves && socketsReady_.load(std::memory_order_acquire)) {
    sendOn(*sockets_[static_cast<size_t>(index)]);
    if (!creditDue(lane)) return;
  }
  Worker& w = *workers_[static_cast<size_t>(index / cfg_.socketsPerThread)];
  if (w.sleeping.load(std::memory_order_seq_cst)) w.wake.signal();
}

std::vector<uint64_t> SocketConnection::payloadSent() const {
  std::vector<uint64_t> out;
  if (!started_.load(std::memory_order_acquire)) return out;
  for (const auto& s : sockets_) out.push_back(s->payloadSent.load(std::memory_order_relaxed));
  return out;
}

std::vector<ZeroCopyCounts> SocketConnection::zeroCopyCounts() const {
  std::vector<ZeroCopyCounts> out;
  if (!started_.load(std::memory_order_acquire)) return out;
  for (const auto& s : sockets_) {
    out.push_back({s->zeroCopySends.load(std::memory_order_relaxed),
                   s->zeroCopyCopied.load(std::memory_order_relaxed),
                   s->zeroCopyOff.load(std::memory_order_relaxed)});
  }
  return out;
}

Status SocketConnection::socketError(const DataSocket& s, const std::string& what) const {
  return remoteError("socket connection to peer rank " + std::to_string(cfg_.peer) + " (" +
                     cfg_.peerAddress + ") failed on data socket " + std::to_string(s.index) +
                     ": " + what);
}

bool SocketConnection::creditDue(int lane) const {
  const RecvLane& r = recv_[static_cast<size_t>(lane)];
  return r.consumed.load(std::memory_order_seq_cst) -
             r.creditSent.load(std::memory_order_relaxed) >=
         creditThreshold_;
}

bool SocketConnection::hasSendWork(const DataSocket& s) const {
  if (s.outPending) return true;
  for (int l = s.index; l < cfg_.lanes; l += nsockets_) {
    if (creditDue(l)) return true;
  }
  for (const SendLane& lane : send_) {
    // seq_cst pairs with the credit's wakeSleepers() as produced does with post().
    uint64_t lim = std::min(lane.produced.load(std::memory_order_seq_cst),
                            lane.limit.load(std::memory_order_seq_cst));
    if (lim > lane.cursor[s.index].load(std::memory_order_relaxed)) return true;
  }
  return false;
}

bool SocketConnection::buildFrame(DataSocket& s, bool zeroCopy) {
  // Credits first: they are what unblocks the peer's sender.
  for (int l = s.index; l < cfg_.lanes; l += nsockets_) {
    if (!creditDue(l)) continue;
    RecvLane& r = recv_[static_cast<size_t>(l)];
    uint64_t c = r.consumed.load(std::memory_order_seq_cst);
    r.creditSent.store(c, std::memory_order_seq_cst);
    s.out = WireHeader{kKindCredit, static_cast<uint16_t>(l), 0, c};
    s.outPayload = nullptr;
    s.outDone = 0;
    s.outZeroCopy = false;
    s.outPending = true;
    return true;
  }
  for (int k = 0; k < cfg_.lanes; ++k) {
    int l = (s.nextLane + k) % cfg_.lanes;
    SendLane& lane = send_[static_cast<size_t>(l)];
    uint64_t cur = lane.cursor[s.index].load(std::memory_order_relaxed);
    uint64_t lim = std::min(lane.produced.load(std::memory_order_acquire),
                            lane.limit.load(std::memory_order_acquire));
    if (lim <= cur) continue;
    uint64_t len = std::min(lim - cur, map_.stripeEnd(cur) - cur);
    s.out = WireHeader{kKindData, static_cast<uint16_t>(l), static_cast<uint32_t>(len), cur};
    s.outPayload = lane.buffer.get() + cur % capacity_;
    s.outDone = 0;
    s.outZeroCopy = zeroCopy && s.zeroCopy.wants(len);
    s.outPending = true;
    s.nextLane = (l + 1) % cfg_.lanes;
    return true;
  }
  return false;
}

// A frame goes in as few sendmsg() calls as the socket takes: header and
// payload together, except that a zero-copy payload goes alone after its
// header (sent with MSG_MORE: the header is this socket's struct, rewritten
// for the next frame, so it must be copied).
Status SocketConnection::sendSome(DataSocket& s, bool* progressed, bool zeroCopy) {
  for (int frames = 0; frames < kFramesPerPass;) {
    if (!s.outPending && !buildFrame(s, zeroCopy)) return Status::ok();
    const size_t total = sizeof(WireHeader) + s.out.length;
    iovec iov[2];
    int count = 0;
    int flags = MSG_NOSIGNAL | MSG_DONTWAIT;
    if (s.outDone < sizeof(WireHeader)) {
      iov[count++] = {reinterpret_cast<std::byte*>(&s.out) + s.outDone,
                      sizeof(WireHeader) - s.outDone};
      if (s.outZeroCopy) flags |= MSG_MORE;
    }
    size_t payloadDone = s.outDone > sizeof(WireHeader) ? s.outDone - sizeof(WireHeader) : 0;
    if (s.out.length > payloadDone && (count == 0 || !s.outZeroCopy)) {
      iov[count++] = {const_cast<std::byte*>(s.outPayload) + payloadDone,
                      s.out.length - payloadDone};
      if (s.outZeroCopy) flags |= MSG_ZEROCOPY;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(s.socket.fd(), &msg, flags);
    // ENOBUFS: too many zero-copy reports outstanding; this part is copied.
    if (n < 0 && errno == ENOBUFS && (flags & MSG_ZEROCOPY))
      n = ::sendmsg(s.socket.fd(), &msg, flags & ~MSG_ZEROCOPY);
    else if (n > 0 && (flags & MSG_ZEROCOPY)) {
      s.zeroCopy.accepted();
      s.zeroCopySends.fetch_add(1, std::memory_order_relaxed);
    }
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) {
        s.writeBlocked = true;
        return Status::ok();
      }
      return socketError(s, "send failed: " + errnoText(err));
    }
    *progressed = true;
    s.outDone += static_cast<size_t>(n);
    if (s.outDone < total) continue;  // the next try most likely would block
    ++frames;
    s.outPending = false;
    if (s.out.kind == kKindData) sent(s);
  }
  return Status::ok();
}

// A data frame is all in the kernel: the socket's next stripe may go, and
// the lane's buffer up to the frame's end is free once no zero-copy send
// before it still reads its pages.
void SocketConnection::sent(DataSocket& s) {
  SendLane& lane = send_[s.out.lane];
  const uint64_t end = map_.advance(s.out.offset + s.out.length);
  lane.cursor[s.index].store(end, std::memory_order_relaxed);  // read under s.busy only
  if (s.unreleased.empty() && s.zeroCopy.idle()) {
    release(s.out.lane, s.index, end);
  } else {
    s.unreleased.push_back({s.zeroCopy.last(), s.out.lane, end});
  }
  s.payloadSent.fetch_add(s.out.length, std::memory_order_relaxed);
}

void SocketConnection::release(int lane, int socket, uint64_t end) {
  SendLane& l = send_[static_cast<size_t>(lane)];
  storeCursor(l.done[socket], end);
  storeMax(l.released, minCursor(l.done, nsockets_));
}

Status SocketConnection::reapZeroCopy(DataSocket& s, bool* progressed) {
  if (s.zeroCopy.idle()) return Status::ok();
  Status st = s.zeroCopy.reap(s.socket.fd());
  if (!st.isOk()) return socketError(s, st.message());
  for (; !s.unreleased.empty() && s.zeroCopy.done(s.unreleased.front().after);
       s.unreleased.pop_front()) {
    release(s.unreleased.front().lane, s.index, s.unreleased.front().end);
    *progressed = true;
  }
  s.zeroCopyCopied.store(s.zeroCopy.copiedReports(), std::memory_order_relaxed);
  if (s.zeroCopy.turnedOffByCopies() && !s.zeroCopyOff.load(std::memory_order_relaxed)) {
    s.zeroCopyOff.store(true, std::memory_order_relaxed);
    LANES_INFO(Transport, cfg_.rank,
               "tcp to peer rank %d, data socket %d: the kernel copied %d zero-copy sends in a "
               "row (loopback, a veth, or a device without scatter-gather); plain sends from "
               "here on",
               cfg_.peer, s.index, ZeroCopySends::kCopiedReportsBeforeOff);
  }
  return Status::ok();
}

Status SocketConnection::onHeader(DataSocket& s) {
  const WireHeader& h = s.in;
  if (h.lane >= cfg_.lanes) {
    return socketError(s, "frame for lane " + std::to_string(h.lane) + " of only " +
                              std::to_string(cfg_.lanes) + "; is the peer the same Lanes build?");
  }
  if (h.kind == kKindCredit) {
    storeMax(send_[h.lane].limit, h.offset + capacity_);
    wakeSleepers();  // the stripes of this lane may wait on other workers' sockets
    return Status::ok();
  }
  if (h.kind != kKindData) {
    return socketError(s, "frame of unknown kind " + std::to_string(h.kind) +
                              "; is the peer the same Lanes build?");
  }
  RecvLane& r = recv_[h.lane];
  uint64_t cur = r.cursor[s.index].load(std::memory_order_relaxed);
  uint64_t room = r.consumed.load(std::memory_order_acquire) + capacity_;
  if (h.offset != cur || h.length == 0 || h.length > map_.stripeEnd(cur) - cur ||
      cur + h.length > room) {
    return socketError(s, "frame of lane " + std::to_string(h.lane) + " at offset " +
                              std::to_string(h.offset) + " (+" + std::to_string(h.length) +
                              ") out of place, expected offset " + std::to_string(cur) +
                              "; both ranks must use the same LANES_SOCKET_* settings");
  }
  s.inPayload = true;
  s.inPos = cur;
  s.inLeft = h.length;
  return Status::ok();
}

// Non-blocking read of up to `bytes`; *eof when the peer closed in order.
Status SocketConnection::receive(DataSocket& s, void* into, size_t bytes, size_t* got, bool* eof) {
  *got = 0;
  *eof = false;
  for (;;) {
    ssize_t n = ::recv(s.socket.fd(), into, bytes, MSG_DONTWAIT);
    if (n > 0) {
      *got = static_cast<size_t>(n);
      return Status::ok();
    }
    if (n == 0) {
      *eof = true;
      return Status::ok();
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
    return socketError(s, "connection to " + s.socket.peerName() + " failed: " + errnoText(errno));
  }
}

Status SocketConnection::onPeerClosed(DataSocket& s) {
  const std::string why = "connection closed by peer " + s.socket.peerName() +
                          " (the process there exited or closed the connection)";
  if (s.inPayload || s.inHeaderGot != 0) return socketError(s, why + " in the middle of a frame");
  s.peerClosed = true;
  if (peerClosedSockets_.fetch_add(1) + 1 == nsockets_) return socketError(s, why);
  return Status::ok();
}

Status SocketConnection::recvSome(DataSocket& s, bool* progressed, uint64_t* bytes) {
  if (s.peerClosed) return Status::ok();
  for (int reads = 0; reads < 2 * kFramesPerPass; ++reads) {
    size_t got = 0;
    bool eof = false;
    if (!s.inPayload) {
      LANES_RETURN_IF_ERROR(receive(s, reinterpret_cast<std::byte*>(&s.in) + s.inHeaderGot,
                                    sizeof(WireHeader) - s.inHeaderGot, &got, &eof));
      if (eof) return onPeerClosed(s);
      if (got == 0) return Status::ok();
      *progressed = true;
      s.inHeaderGot += got;
      if (s.inHeaderGot < sizeof(WireHeader)) continue;
      s.inHeaderGot = 0;
      LANES_RETURN_IF_ERROR(onHeader(s));
      continue;
    }
    RecvLane& r = recv_[s.in.lane];
    reachRing(r.buffer, s.inPos + s.inLeft);
    LANES_RETURN_IF_ERROR(receive(s, r.buffer.get() + s.inPos % capacity_, s.inLeft, &got, &eof));
    if (eof) return onPeerClosed(s);
    if (got == 0) return Status::ok();
    *progressed = true;
    if (bytes != nullptr) *bytes += got;
    s.inPos += got;
    s.inLeft -= got;
    if (s.inLeft == 0) s.inPayload = false;
    storeCursor(r.cursor[s.index], s.inLeft == 0 ? map_.advance(s.inPos) : s.inPos);
    storeMax(r.committed, minCursor(r.cursor, nsockets_));
  }
  return Status::ok();
}

void SocketConnection::workerLoop(Worker& w) {
  using Clock = std::chrono::steady_clock;
  const auto busyPoll = std::chrono::microseconds(cfg_.busyPollUs);
  Clock::time_point lastProgress = Clock::now();
  std::vector<pollfd> fds(static_cast<size_t>(w.count) + 1);
  int engineWatchMs = kEngineQuietMs;
  while (!failed_.load(std::memory_order_acquire)) {
    bool progressed = false;
    // While the engine makes port calls it reads the sockets itself.
    const bool engineReads = engineActive();
    if (!engineReads && engineWatchMs > kEngineQuietMs) {
      engineWatchMs = kEngineQuietMs;
      w.engineWatchRestarts.fetch_add(1, std::memory_order_release);
    }
    for (int i = w.first; i < w.first + w.count; ++i) {
      DataSocket& s = *sockets_[static_cast<size_t>(i)];
      std::lock_guard<std::mutex> busy(s.busy);
      Status st = reapZeroCopy(s, &progressed);
      if (st.isOk() && !engineReads) {
        uint64_t read = 0;
        st = recvSome(s, &progressed, &read);
        if (read > 0) w.readBytes.fetch_add(read, std::memory_order_release);
      }
      if (st.isOk()) st = sendSome(s, &progressed);
      if (!st.isOk()) {
        // INFO only: at teardown the peer closing is expected, and a real
        // failure reaches the user through the ports.
        if (!failed_.load(std::memory_order_acquire)) {
          LANES_INFO(Transport, cfg_.rank, "%s", st.message().c_str());
        }
        fail(st);
        return;
      }
    }
    if (busyPoll.count() > 0) {
      const Clock::time_point now = Clock::now();
      if (progressed) lastProgress = now;
      if (now - lastProgress < busyPoll) continue;
    }
    if (progressed) continue;

    // Announce sleep, then look once more (post/consume check the flag
    // after publishing), then sleep in poll.
    w.sleeping.store(true, std::memory_order_seq_cst);
    bool work = failed_.load(std::memory_order_seq_cst);
    for (int i = w.first; i < w.first + w.count && !work; ++i) {
      DataSocket& s = *sockets_[static_cast<size_t>(i)];
      std::lock_guard<std::mutex> busy(s.busy);
      work = !s.writeBlocked && hasSendWork(s);
    }
    if (work) {
      w.sleeping.store(false, std::memory_order_relaxed);
      continue;
    }
    for (int i = 0; i < w.count; ++i) {
      DataSocket& s = *sockets_[static_cast<size_t>(w.first + i)];
      std::lock_guard<std::mutex> busy(s.busy);
      // A socket the peer closed is no longer read: polling it for input
      // would wake at once, forever. Zero-copy reports still come (as POLLERR).
      const bool watch = !s.peerClosed || s.writeBlocked || !s.zeroCopy.idle();
      fds[static_cast<size_t>(i)] = {watch ? s.socket.fd() : -1,
                                     static_cast<short>((s.peerClosed || engineReads ? 0 : POLLIN) |
                                                        (s.writeBlocked ? POLLOUT : 0)),
                                     0};
    }
    fds.back() = {w.wake.fd(), POLLIN, 0};
    int n = ::poll(fds.data(), fds.size(), engineReads ? engineWatchMs : kIdlePollMs);
    w.sleeping.store(false, std::memory_order_relaxed);
    if (n == 0 && engineReads) {
      w.engineWatchWakeups.fetch_add(1, std::memory_order_release);
      engineWatchMs = std::min(2 * engineWatchMs, kEngineWatchMaxMs);
    }
    if (n < 0 && errno != EINTR) {
      fail(systemError("poll() in a socket worker for peer rank " + std::to_string(cfg_.peer) +
                       " failed: " + errnoText(errno)));
      return;
    }
    if (fds.back().revents & POLLIN) w.wake.drain();
    for (int i = 0; i < w.count; ++i) {
      if (fds[static_cast<size_t>(i)].revents & (POLLOUT | POLLERR | POLLHUP)) {
        DataSocket& s = *sockets_[static_cast<size_t>(w.first + i)];
        std::lock_guard<std::mutex> busy(s.busy);
        s.writeBlocked = false;
      }
    }
  }
}

}  // namespace

Status makeSocketConnection(const SocketConnectionConfig& config, EstablishSockets establish,
                            std::unique_ptr<Connection>* out) {
  if (config.threads <= 0 || config.socketsPerThread <= 0 || config.lanes <= 0 || !establish ||
      config.busyPollUs < 0 || config.stripeBytes == 0 ||
      config.bufferBytes % config.stripeBytes != 0 || config.stripeBytes % kRingGranule != 0 ||
      config.stripeBytes > (1u << 30)) {
    return invalidArgument("socket connection: inconsistent configuration");
  }
  *out = std::make_unique<SocketConnection>(config, std::move(establish));
  return Status::ok();
}

std::vector<uint64_t> socketPayloadBytesSent(const Connection& c) {
  if (auto* sc = dynamic_cast<const SocketConnection*>(&c)) return sc->payloadSent();
  return {};
}

std::vector<ZeroCopyCounts> socketZeroCopyCounts(const Connection& c) {
  if (auto* sc = dynamic_cast<const SocketConnection*>(&c)) return sc->zeroCopyCounts();
  return {};
}

SocketMoveCounts SocketConnection::moveCounts() const {
  SocketMoveCounts counts{sentFromCaller_.load(std::memory_order_relaxed)};
  if (!started_.load(std::memory_order_acquire)) return counts;
  for (const auto& w : workers_) {
    counts.engineWatchWakeups += w->engineWatchWakeups.load(std::memory_order_acquire);
    counts.engineWatchRestarts += w->engineWatchRestarts.load(std::memory_order_acquire);
    counts.workerReadBytes += w->readBytes.load(std::memory_order_acquire);
  }
  return counts;
}

SocketMoveCounts socketMoveCounts(const Connection& c) {
  if (auto* sc = dynamic_cast<const SocketConnection*>(&c)) return sc->moveCounts();
  return {};
}

}  // namespace lanes
