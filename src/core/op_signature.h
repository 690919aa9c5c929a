// OpSignature: what one collective or send/recv call looks like, compactly,
// so ranks can compare their calls (LANES_CHECK_MISMATCH) and describe what
// they are running to a peer diagnosing a hang.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/collective.h"
#include "base/status.h"

namespace lanes {

struct Request;

// Which side of a send/recv a signature describes; None for a collective.
enum class P2pSide : uint8_t { None, Send, Recv };

struct OpSignature {
  CollType coll = CollType::AllReduce;  // AllReduce for a send/recv, so equal calls compare equal
  P2pSide p2p = P2pSide::None;
  uint8_t datatype = 0;  // lanesDataType_t
  uint8_t redop = 0;     // RedOpKind; 0 where the call has no op
  int32_t root = 0;      // root of a rooted collective, peer of a send/recv, else 0
  uint64_t count = 0;    // elements as the API counts them

  bool isPointToPoint() const { return p2p != P2pSide::None; }
  bool operator==(const OpSignature&) const = default;
};

inline constexpr size_t kSignatureBytes = 16;

OpSignature signatureOf(const Request& r);
// "allreduce(count 1024 float32 sum)", "broadcast(count 8 int32 root 0)",
// "send(count 4 float32 to rank 1)".
std::string describeSignature(const OpSignature& s);

// Wire form: u64 index of the first call, u32 count, then 16 bytes per call:
// kind (the CollType value, 16 for a send, 17 for a receive), datatype,
// redop, a zero byte, i32 root, u64 count.
std::vector<uint8_t> encodeSignatures(uint64_t firstIndex, const std::vector<OpSignature>& sigs);
// Appends to *out; fails on a malformed payload.
Status decodeSignatures(const std::vector<uint8_t>& bytes, uint64_t* firstIndex,
                        std::vector<OpSignature>* out);

// Collective calls of one group as each rank issued them (byRank[r]); every
// rank must have issued the same list. Empty when they agree, else a
// sentence naming the first difference and both ranks' calls. `firstIndex`
// numbers the group's first collective on this communicator.
std::string findCollectiveMismatch(const std::vector<std::vector<OpSignature>>& byRank,
                                   uint64_t firstIndex);

// Send/recv calls two ranks posted to each other in one group: `mine` from
// rank `me`, `theirs` from rank `peer` (each the rank's sends and receives
// addressed to the other, in call order). The i-th send of one side must
// match the i-th receive of the other in count and datatype. Empty when they
// agree, else a sentence naming both calls.
std::string findP2pMismatch(int me, const std::vector<OpSignature>& mine, int peer,
                            const std::vector<OpSignature>& theirs);

}  // namespace lanes
