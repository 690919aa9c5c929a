// The first bytes on every data socket: who dials whom, for which
// communicator, with which settings. The acceptor answers with one byte
// (HelloReply) before any frame, so a dialler never sends data on a socket
// its peer is going to drop.
#pragma once

#include <cstdint>

namespace lanes {

constexpr uint32_t kDataHelloMagic = 0x4c4e4454;  // "LNDT"
constexpr uint32_t kDataHelloVersion = 2;

// What both ends of a socket connection must agree on.
struct SocketSettings {
  int32_t sockets = 0;
  int32_t lanes = 0;
  uint64_t bufferBytes = 0;
  uint64_t stripeBytes = 0;
  bool operator==(const SocketSettings&) const = default;
};

struct DataHello {
  uint32_t magic;
  uint32_t version;
  uint8_t secret[32];
  uint64_t commId;
  int32_t srcRank;
  int32_t dstRank;
  int32_t socketIndex;
  int32_t reserved;
  SocketSettings settings;
};

enum class HelloReply : uint8_t {
  kAccept = 1,
  // Both ranks dialled at once and the replying (lower) rank's dial wins:
  // the dialler waits for it instead.
  kDialedAlready = 2,
};

}  // namespace lanes
