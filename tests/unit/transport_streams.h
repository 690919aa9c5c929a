// Stream checks shared by the transport tests: connect N thread-ranks all to
// all, then push a sequence of messages (each padded to the granule, as the
// executor posts them) on every lane of every connection at once, verifying
// every received byte against a pattern keyed by (src, dst, lane, offset).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "exec/comm_config.h"
#include "tests/unit/fake_bootstrap.h"
#include "transport/common/byte_ring.h"
#include "transport/transport.h"

namespace lanes::testing {

inline uint8_t patternByte(int src, int dst, int lane, uint64_t offset) {
  uint64_t x = (offset / 8) ^ (static_cast<uint64_t>(src) << 48) ^
               (static_cast<uint64_t>(dst) << 32) ^ (static_cast<uint64_t>(lane) << 16);
  x += 0x9e3779b97f4a7c15ull;  // splitmix64: neighbouring words differ, so reorders show
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<uint8_t>(x >> (8 * (offset % 8)));
}

struct RankConnections {
  Status status;
  std::vector<std::unique_ptr<Connection>> owned;
  std::vector<Connection*> byPeer;  // nullptr for self
};

// Every rank connects to every other through a transport from `make`;
// `adjust` (when given) changes a rank's config after the environment's.
using AdjustConfig = std::function<void(int rank, TransportConfig* config)>;
inline std::vector<RankConnections> connectAll(
    FakeBootstrapGroup& group, const std::function<std::unique_ptr<Transport>()>& make, int lanes,
    double timeoutSeconds = 60, const AdjustConfig& adjust = {}) {
  int n = group.nranks();
  std::vector<RankConnections> result(static_cast<size_t>(n));
  runRanks(n, [&](int rank) {
    FakeBootstrap bootstrap(&group, rank);
    TransportContext ctx;
    ctx.bootstrap = &bootstrap;
    ctx.rank = rank;
    ctx.nranks = n;
    ctx.ranks = &group.ranks();
    ctx.commTag = group.commTag();
    ctx.lanes = lanes;
    ctx.timeoutSeconds = timeoutSeconds;
    ctx.config = CommConfig::fromEnv().transport;  // as a communicator reads it
    if (adjust) adjust(rank, &ctx.config);
    std::vector<int> peers;
    for (int p = 0; p < n; ++p)
      if (p != rank) peers.push_back(p);
    auto transport = make();
    RankConnections& mine = result[static_cast<size_t>(rank)];
    mine.status = transport->connect(ctx, peers, &mine.owned);
    mine.byPeer.assign(static_cast<size_t>(n), nullptr);
    if (mine.status.isOk()) {
      for (auto& c : mine.owned)
        if (c) mine.byPeer[static_cast<size_t>(c->peer())] = c.get();
    }
  });
  return result;
}

// Drives every port of `rank` like the executor does (non-blocking, one
// thread) until each lane has sent and received sum(padToGranule(sizes))
// bytes. Returns "" on success, else what went wrong.
inline std::string driveStreams(int rank, const std::vector<Connection*>& byPeer,
                                const std::vector<size_t>& sizes, Deadline deadline) {
  struct Lane {
    Connection* conn;
    int lane;
    size_t msg = 0;        // message being sent
    size_t msgSent = 0;    // bytes of it taken
    uint64_t sendOff = 0;  // stream offset of the message start
    std::vector<uint8_t> buffer;
    uint64_t received = 0;
  };
  uint64_t total = 0;
  for (size_t s : sizes) total += padToGranule(s);
  std::vector<Lane> lanes;
  for (Connection* c : byPeer) {
    if (c == nullptr) continue;
    for (int l = 0; l < c->lanes(); ++l) lanes.push_back(Lane{c, l, 0, 0, 0, {}, 0});
  }
  Backoff backoff;
  for (;;) {
    bool done = true;
    bool progress = false;
    for (Lane& ln : lanes) {
      int peer = ln.conn->peer();
      if (ln.msg < sizes.size()) {
        done = false;
        size_t padded = padToGranule(sizes[ln.msg]);
        if (ln.buffer.size() != padded) {
          ln.buffer.resize(padded);
          for (size_t i = 0; i < padded; ++i)
            ln.buffer[i] = patternByte(rank, peer, ln.lane, ln.sendOff + i);
        }
        size_t taken = 0;
        Status st = ln.conn->sendPort(ln.lane).post(ln.buffer.data() + ln.msgSent,
                                                    padded - ln.msgSent, &taken);
        if (!st.isOk()) return "rank " + std::to_string(rank) + " post failed: " + st.message();
        if (taken != padded - ln.msgSent && taken % kRingGranule != 0)
          return "post took a partial amount that is not a granule multiple";
        ln.msgSent += taken;
        progress |= taken > 0;
        if (ln.msgSent == padded) {
          ln.sendOff += padded;
          ++ln.msg;
          ln.msgSent = 0;
          ln.buffer.clear();
        }
      }
      if (ln.received < total) {
        done = false;
        std::span<const std::byte> view;
        Status st = ln.conn->recvPort(ln.lane).peek(&view);
        if (!st.isOk()) return "rank " + std::to_string(rank) + " peek failed: " + st.message();
        if (view.size() % kRingGranule != 0) return "peek returned a non-granule view";
        if (ln.received + view.size() > total) return "received more bytes than were sent";
        for (size_t i = 0; i < view.size(); ++i) {
          if (static_cast<uint8_t>(view[i]) != patternByte(peer, rank, ln.lane, ln.received + i)) {
            return "rank " + std::to_string(rank) + " lane " + std::to_string(ln.lane) +
                   " from peer " + std::to_string(peer) + ": wrong byte at stream offset " +
                   std::to_string(ln.received + i);
          }
        }
        ln.conn->recvPort(ln.lane).consume(view.size());
        ln.received += view.size();
        progress |= !view.empty();
      }
    }
    if (done) return "";
    if (deadline.expired()) return "rank " + std::to_string(rank) + ": streams timed out";
    if (progress) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

// Connects all ranks, runs driveStreams on each, then barriers so no rank
// closes its connections while a peer still reads. Returns per-rank errors.
inline std::vector<std::string> exchangeAll(FakeBootstrapGroup& group,
                                            std::vector<RankConnections>& conns,
                                            const std::vector<size_t>& sizes, double seconds) {
  int n = group.nranks();
  std::vector<std::string> errors(static_cast<size_t>(n));
  runRanks(n, [&](int rank) {
    std::string& error = errors[static_cast<size_t>(rank)];
    error = driveStreams(rank, conns[static_cast<size_t>(rank)].byPeer, sizes,
                         Deadline::after(seconds));
    // A rank that gave up closes its connections, so its peers fail fast
    // where the transport can tell them (transport.h, Connection::close).
    if (!error.empty()) {
      for (auto& c : conns[static_cast<size_t>(rank)].owned) c->close();
    }
    FakeBootstrap bootstrap(&group, rank);
    (void)bootstrap.barrier(Deadline::after(seconds));
  });
  return errors;
}

}  // namespace lanes::testing
