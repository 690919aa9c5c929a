// Fuzzes the decoders of bootstrap payloads: the hello a stranger can send to
// the root or to a rank's control listener, the root's table and error
// frames, mesh failure notices, and frame headers. The first byte picks the
// decoder; the rest is the payload. Whatever decodes must re-encode to
// something that decodes to the same thing.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/socket.h"
#include "bootstrap/wire.h"

namespace {

using namespace lanes;

void check(bool ok) {
  if (!ok) std::abort();  // libFuzzer records the input as a crash
}

void hello(const std::vector<uint8_t>& payload, bool toRoot) {
  wire::Hello h;
  if (!wire::decodeHello(payload, toRoot, &h).isOk()) return;
  const auto again = wire::encodeHello(h, toRoot);
  wire::Hello h2;
  check(wire::decodeHello(again, toRoot, &h2).isOk());
  check(std::memcmp(h.secret, h2.secret, sizeof(h.secret)) == 0 && h.commId == h2.commId &&
        h.nranks == h2.nranks && h.rank == h2.rank);
  if (!toRoot) check(again == payload);  // the mesh hello has no field to normalize
}

void table(const std::vector<uint8_t>& payload) {
  int32_t n = 1;
  if (payload.size() >= sizeof(n)) std::memcpy(&n, payload.data(), sizeof(n));
  if (n < 1 || n > 256) n = 1;
  std::vector<RankInfo> ranks;
  std::vector<SocketAddress> listens;
  if (!wire::decodeTable(payload, n, &ranks, &listens).isOk()) return;
  check(payload.size() <= wire::maxTableBytes(wire::kMaxTableEntries));
  const auto again = wire::encodeTable(ranks, listens);
  check(wire::decodeTable(again, n, &ranks, &listens).isOk());
  for (const auto& a : listens) (void)a.toString();
}

void error(const std::vector<uint8_t>& payload) {
  Status s = wire::decodeError(payload);
  check(!s.isOk());  // an error frame never decodes to success
  const auto again = wire::encodeError(s);
  check(wire::decodeError(again).code() == s.code());
}

void failureNotice(const std::vector<uint8_t>& payload) {
  int32_t dead = -1;
  std::string why;
  if (!wire::decodeFailureNotice(payload, 16, &dead, &why).isOk()) return;
  check(dead >= 0 && dead < 16 && why.size() <= wire::kMaxErrorBytes);
  check(wire::encodeFailureNotice(dead, why) == payload);
}

void frameHeader(const std::vector<uint8_t>& payload) {
  FrameHeader h{};
  if (!payload.empty()) std::memcpy(&h, payload.data(), std::min(payload.size(), sizeof(h)));
  if (checkFrameHeader(h, wire::kMaxHelloBytes).isOk())
    check(h.magic == kFrameMagic && h.version == kFrameVersion && h.length <= wire::kMaxHelloBytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<uint8_t> payload(data + 1, data + size);
  switch (data[0] % 6) {
    case 0:
      hello(payload, /*toRoot=*/true);
      break;
    case 1:
      hello(payload, /*toRoot=*/false);
      break;
    case 2:
      table(payload);
      break;
    case 3:
      error(payload);
      break;
    case 4:
      failureNotice(payload);
      break;
    default:
      frameHeader(payload);
      break;
  }
  return 0;
}
