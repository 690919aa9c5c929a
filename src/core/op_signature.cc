#include "core/op_signature.h"

#include <cstring>

#include "base/datatype.h"
#include "exec/request.h"

namespace lanes {
namespace {

// The kind byte of the wire form: CollType values stay below these.
constexpr uint8_t kSendWireKind = 16;
constexpr uint8_t kRecvWireKind = 17;
static_assert(static_cast<uint8_t>(CollType::Scatter) < kSendWireKind);

bool hasRedOp(const OpSignature& s) { return !s.isPointToPoint() && isReduction(s.coll); }
bool hasRoot(const OpSignature& s) { return !s.isPointToPoint() && isRooted(s.coll); }

const char* callName(const OpSignature& s) {
  switch (s.p2p) {
    case P2pSide::Send:
      return "send";
    case P2pSide::Recv:
      return "recv";
    case P2pSide::None:
      break;
  }
  return collTypeName(s.coll);
}

// "kind, datatype" — the fields in which two calls differ.
std::string differences(const OpSignature& a, const OpSignature& b) {
  std::string out;
  auto add = [&out](const char* what) { out += (out.empty() ? "" : ", ") + std::string(what); };
  if (a.coll != b.coll || a.p2p != b.p2p) add("collective");
  if (a.count != b.count) add("count");
  if (a.datatype != b.datatype) add("datatype");
  if (a.redop != b.redop) add("reduction op");
  if (a.root != b.root) add(a.isPointToPoint() ? "peer" : "root");
  return out;
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::vector<OpSignature> ofSide(const std::vector<OpSignature>& sigs, P2pSide side) {
  std::vector<OpSignature> out;
  for (const OpSignature& s : sigs)
    if (s.p2p == side) out.push_back(s);
  return out;
}

// The sends of rank `from` to `to` against the receives `to` posted from `from`.
std::string matchDirection(int from, const std::vector<OpSignature>& sends, int to,
                           const std::vector<OpSignature>& recvs) {
  if (sends.size() != recvs.size())
    return "rank " + std::to_string(from) + " posts " + plural(sends.size(), "send", "sends") +
           " to rank " + std::to_string(to) + " in this group but rank " + std::to_string(to) +
           " posts " + plural(recvs.size(), "receive", "receives") + " from rank " +
           std::to_string(from);
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i].count == recvs[i].count && sends[i].datatype == recvs[i].datatype) continue;
    return "send #" + std::to_string(i) + " of rank " + std::to_string(from) + " to rank " +
           std::to_string(to) + " in this group is " + describeSignature(sends[i]) +
           " but the matching receive of rank " + std::to_string(to) + " is " +
           describeSignature(recvs[i]);
  }
  return "";
}

}  // namespace

OpSignature signatureOf(const Request& r) {
  OpSignature s;
  s.count = r.args.count;
  s.datatype = static_cast<uint8_t>(r.args.type);
  if (r.isP2p) {
    s.p2p = r.isSend ? P2pSide::Send : P2pSide::Recv;
    s.root = r.peer;
    return s;
  }
  s.coll = r.args.coll;
  if (hasRedOp(s)) s.redop = static_cast<uint8_t>(r.op.kind);
  if (hasRoot(s)) s.root = r.args.root;
  return s;
}

std::string describeSignature(const OpSignature& s) {
  std::string out = std::string(callName(s)) + "(count " + std::to_string(s.count) + " " +
                    datatypeName(static_cast<lanesDataType_t>(s.datatype));
  if (hasRedOp(s)) out += std::string(" ") + redOpName(static_cast<RedOpKind>(s.redop));
  if (hasRoot(s)) out += " root " + std::to_string(s.root);
  if (s.p2p == P2pSide::Send) out += " to rank " + std::to_string(s.root);
  if (s.p2p == P2pSide::Recv) out += " from rank " + std::to_string(s.root);
  return out + ")";
}

std::vector<uint8_t> encodeSignatures(uint64_t firstIndex, const std::vector<OpSignature>& sigs) {
  std::vector<uint8_t> out(12 + kSignatureBytes * sigs.size());
  auto n = static_cast<uint32_t>(sigs.size());
  std::memcpy(out.data(), &firstIndex, 8);
  std::memcpy(out.data() + 8, &n, 4);
  uint8_t* p = out.data() + 12;
  for (const OpSignature& s : sigs) {
    p[0] = s.p2p == P2pSide::Send   ? kSendWireKind
           : s.p2p == P2pSide::Recv ? kRecvWireKind
                                    : static_cast<uint8_t>(s.coll);
    p[1] = s.datatype;
    p[2] = s.redop;
    p[3] = 0;
    std::memcpy(p + 4, &s.root, 4);
    std::memcpy(p + 8, &s.count, 8);
    p += kSignatureBytes;
  }
  return out;
}

Status decodeSignatures(const std::vector<uint8_t>& bytes, uint64_t* firstIndex,
                        std::vector<OpSignature>* out) {
  uint32_t n = 0;
  if (bytes.size() < 12)
    return internalError("call signature of " + std::to_string(bytes.size()) +
                         " bytes is too short; a peer runs another Lanes?");
  std::memcpy(firstIndex, bytes.data(), 8);
  std::memcpy(&n, bytes.data() + 8, 4);
  if (bytes.size() != 12 + kSignatureBytes * size_t{n})
    return internalError("call signature announces " + std::to_string(n) + " calls but holds " +
                         std::to_string(bytes.size()) + " bytes; a peer runs another Lanes?");
  const uint8_t* p = bytes.data() + 12;
  for (uint32_t i = 0; i < n; ++i, p += kSignatureBytes) {
    OpSignature s;
    if (p[0] == kSendWireKind)
      s.p2p = P2pSide::Send;
    else if (p[0] == kRecvWireKind)
      s.p2p = P2pSide::Recv;
    else
      s.coll = static_cast<CollType>(p[0]);
    s.datatype = p[1];
    s.redop = p[2];
    std::memcpy(&s.root, p + 4, 4);
    std::memcpy(&s.count, p + 8, 8);
    out->push_back(s);
  }
  return Status::ok();
}

std::string findCollectiveMismatch(const std::vector<std::vector<OpSignature>>& byRank,
                                   uint64_t firstIndex) {
  if (byRank.empty()) return "";
  const std::vector<OpSignature>& ref = byRank[0];
  for (size_t r = 1; r < byRank.size(); ++r) {
    const std::vector<OpSignature>& other = byRank[r];
    size_t common = std::min(ref.size(), other.size());
    for (size_t i = 0; i < common; ++i) {
      if (other[i] == ref[i]) continue;
      return "collective #" + std::to_string(firstIndex + i) +
             " on this communicator does not match across ranks: rank " + std::to_string(r) +
             " called " + describeSignature(other[i]) + " while rank 0 called " +
             describeSignature(ref[i]) + " (they differ in " + differences(other[i], ref[i]) + ")";
    }
    if (ref.size() != other.size())
      return "the collectives of one group do not match across ranks: rank " + std::to_string(r) +
             " issued " + plural(other.size(), "collective", "collectives") + " (from #" +
             std::to_string(firstIndex) + ") while rank 0 issued " + std::to_string(ref.size());
  }
  return "";
}

std::string findP2pMismatch(int me, const std::vector<OpSignature>& mine, int peer,
                            const std::vector<OpSignature>& theirs) {
  // Lower rank first, so both sides write the same sentence.
  int a = std::min(me, peer), b = std::max(me, peer);
  const std::vector<OpSignature>& A = me == a ? mine : theirs;
  const std::vector<OpSignature>& B = me == a ? theirs : mine;
  std::string out = matchDirection(a, ofSide(A, P2pSide::Send), b, ofSide(B, P2pSide::Recv));
  if (out.empty()) out = matchDirection(b, ofSide(B, P2pSide::Send), a, ofSide(A, P2pSide::Recv));
  return out;
}

}  // namespace lanes
