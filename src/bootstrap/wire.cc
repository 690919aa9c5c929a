#include "bootstrap/wire.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace lanes::wire {

void Writer::bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  buf_.insert(buf_.end(), b, b + n);
}

void Writer::str(const std::string& s) {
  put<uint32_t>(static_cast<uint32_t>(s.size()));
  bytes(s.data(), s.size());
}

bool Reader::bytes(void* out, size_t n) {
  if (n > left_) return false;
  std::memcpy(out, p_, n);
  p_ += n;
  left_ -= n;
  return true;
}

bool Reader::str(std::string* s, size_t maxLen) {
  uint32_t n = 0;
  if (!get(&n) || n > maxLen || n > left_) return false;
  s->assign(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  left_ -= n;
  return true;
}

void putAddress(Writer& w, const SocketAddress& a) {
  UniqueIdData tmp;
  (void)setRootAddress(a, &tmp);  // family 0 for an unset address
  w.put<uint8_t>(tmp.family == AF_INET6 ? 6 : tmp.family == AF_INET ? 4 : 0);
  w.put<uint16_t>(tmp.port);
  w.bytes(tmp.addr, sizeof(tmp.addr));
}

bool getAddress(Reader& r, SocketAddress* a) {
  uint8_t fam = 0;
  UniqueIdData tmp;
  if (!r.get(&fam) || !r.get(&tmp.port) || !r.bytes(tmp.addr, sizeof(tmp.addr))) return false;
  if (fam != 4 && fam != 6) return false;
  tmp.family = fam == 4 ? AF_INET : AF_INET6;
  *a = rootAddress(tmp);
  return true;
}

void putRankInfo(Writer& w, const RankInfo& info) {
  w.put<int32_t>(info.rank);
  w.put<uint64_t>(info.hostHash);
  w.put<int32_t>(info.pid);
  w.put<int32_t>(info.cudaDev);
  w.bytes(info.hostname, sizeof(info.hostname));
}

bool getRankInfo(Reader& r, RankInfo* info) {
  int32_t rank, pid, dev;
  if (!r.get(&rank) || !r.get(&info->hostHash) || !r.get(&pid) || !r.get(&dev) ||
      !r.bytes(info->hostname, sizeof(info->hostname)))
    return false;
  info->rank = rank;
  info->pid = pid;
  info->cudaDev = dev;
  info->hostname[sizeof(info->hostname) - 1] = '\0';
  return true;
}

SocketAddress rootAddress(const UniqueIdData& id) {
  SocketAddress a;
  if (id.family == AF_INET) {
    auto& in = reinterpret_cast<sockaddr_in&>(a.storage);
    in.sin_family = AF_INET;
    std::memcpy(&in.sin_addr, id.addr, 4);
    a.length = sizeof(sockaddr_in);
  } else if (id.family == AF_INET6) {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(a.storage);
    in6.sin6_family = AF_INET6;
    std::memcpy(&in6.sin6_addr, id.addr, 16);
    a.length = sizeof(sockaddr_in6);
  }
  a.setPort(id.port);
  return a;
}

Status setRootAddress(const SocketAddress& a, UniqueIdData* id) {
  std::memset(id->addr, 0, sizeof(id->addr));
  id->family = 0;
  id->port = 0;
  if (a.family() == AF_INET) {
    std::memcpy(id->addr, &reinterpret_cast<const sockaddr_in&>(a.storage).sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    std::memcpy(id->addr, &reinterpret_cast<const sockaddr_in6&>(a.storage).sin6_addr, 16);
  } else {
    return invalidArgument("address family " + std::to_string(a.family()) +
                           " is neither IPv4 nor IPv6");
  }
  id->family = static_cast<uint8_t>(a.family());
  id->port = a.port();
  return Status::ok();
}

std::vector<uint8_t> encodeHello(const Hello& h, bool toRoot) {
  Writer w;
  w.bytes(h.secret, sizeof(h.secret));
  w.put<uint64_t>(h.commId);
  w.put<int32_t>(h.nranks);
  w.put<int32_t>(h.rank);
  if (toRoot) {
    putRankInfo(w, h.info);
    putAddress(w, h.listen);
  }
  return std::move(w.data());
}

Status decodeHello(const std::vector<uint8_t>& payload, bool toRoot, Hello* out) {
  Reader r(payload);
  bool ok = r.bytes(out->secret, sizeof(out->secret)) && r.get(&out->commId) &&
            r.get(&out->nranks) && r.get(&out->rank);
  if (ok && toRoot) ok = getRankInfo(r, &out->info) && getAddress(r, &out->listen);
  if (!ok || !r.atEnd())
    return invalidArgument("malformed hello (" + std::to_string(payload.size()) + " bytes)");
  return Status::ok();
}

Hello meshHello(const UniqueIdData& id, int nranks, int rank) {
  Hello h;
  std::copy(id.secret, id.secret + sizeof(id.secret), h.secret);
  h.commId = id.commId;
  h.nranks = nranks;
  h.rank = rank;
  return h;
}

Status checkMeshHello(const UniqueIdData& id, int nranks, const std::vector<uint8_t>& payload,
                      uint16_t type, Hello* h) {
  if (type != kHello)
    return invalidArgument("its first frame was of type " + std::to_string(type) + ", not a hello");
  LANES_RETURN_IF_ERROR(decodeHello(payload, /*toRoot=*/false, h));
  if (!constantTimeEqual(h->secret, id.secret, sizeof(id.secret)))
    return invalidArgument("it presented the wrong secret");
  if (h->commId != id.commId || h->nranks != nranks)
    return invalidArgument("it belongs to another communicator");
  return Status::ok();
}

std::vector<uint8_t> encodeError(const Status& s) {
  Writer w;
  w.put<int32_t>(s.code());
  w.str(s.message().substr(0, kMaxErrorBytes - 16));
  return std::move(w.data());
}

Status decodeError(const std::vector<uint8_t>& payload) {
  Reader r(payload);
  int32_t code = 0;
  std::string msg;
  if (!r.get(&code) || !r.str(&msg, kMaxErrorBytes) || code <= 0 || code > lanesTimeout)
    return remoteError("the bootstrap root refused this rank with a malformed error frame");
  return Status(static_cast<lanesResult_t>(code), msg);
}

std::vector<uint8_t> encodeTable(const std::vector<RankInfo>& ranks,
                                 const std::vector<SocketAddress>& listens) {
  int32_t entries = 0;
  for (size_t i = 0; i < ranks.size(); ++i) entries += ranks[i].rank == static_cast<int>(i);
  Writer w;
  w.put<int32_t>(static_cast<int32_t>(ranks.size()));
  w.put<int32_t>(entries);
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].rank != static_cast<int>(i)) continue;  // not known: not sent
    putRankInfo(w, ranks[i]);
    putAddress(w, listens[i]);
  }
  return std::move(w.data());
}

Status decodeTable(const std::vector<uint8_t>& payload, int nranks, std::vector<RankInfo>* ranks,
                   std::vector<SocketAddress>* listens) {
  Reader r(payload);
  int32_t n = 0, entries = 0;
  if (!r.get(&n) || n != nranks)
    return internalError("the bootstrap root sent a table for " + std::to_string(n) +
                         " ranks, but this rank expected " + std::to_string(nranks));
  if (!r.get(&entries) || entries < 0 || entries > std::min(n, kMaxTableEntries))
    return internalError("the bootstrap root sent a rank table of a wrong size");
  ranks->assign(static_cast<size_t>(n), RankInfo{});
  listens->assign(static_cast<size_t>(n), SocketAddress{});
  for (int i = 0; i < entries; ++i) {
    RankInfo info;
    SocketAddress listen;
    if (!getRankInfo(r, &info) || !getAddress(r, &listen) || info.rank < 0 || info.rank >= n ||
        (*ranks)[static_cast<size_t>(info.rank)].rank >= 0)
      return internalError("the bootstrap root sent a malformed rank table");
    (*listens)[static_cast<size_t>(info.rank)] = listen;
    (*ranks)[static_cast<size_t>(info.rank)] = info;
  }
  if (!r.atEnd()) return internalError("the bootstrap root sent a rank table with trailing bytes");
  return Status::ok();
}

size_t maxTableBytes(int entries) {
  // Per entry: RankInfo (4+8+4+4+hostname) and an address (1+2+16).
  constexpr size_t kEntry = 20 + sizeof(RankInfo::hostname) + 19;
  return 2 * sizeof(int32_t) + static_cast<size_t>(entries > 0 ? entries : 0) * kEntry;
}

std::vector<uint8_t> encodeFailureNotice(int32_t dead, const std::string& why) {
  Writer w;
  w.put<int32_t>(dead);
  w.str(why.substr(0, kMaxErrorBytes));
  return std::move(w.data());
}

Status decodeFailureNotice(const std::vector<uint8_t>& payload, int nranks, int32_t* dead,
                           std::string* why) {
  Reader r(payload);
  if (!r.get(dead) || !r.str(why, kMaxErrorBytes) || !r.atEnd() || *dead < 0 || *dead >= nranks)
    return invalidArgument("malformed failure notice (" + std::to_string(payload.size()) +
                           " bytes)");
  return Status::ok();
}

bool constantTimeEqual(const uint8_t* a, const uint8_t* b, size_t n) {
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= a[i] ^ b[i];
  // volatile read keeps the compiler from short-circuiting the loop
  volatile uint8_t v = diff;
  return v == 0;
}

Status randomBytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return systemError("getrandom failed: " + errnoText(errno));
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return Status::ok();
}

std::string describeRank(const RankInfo& info) {
  return "rank " + std::to_string(info.rank) + " (host " +
         (info.hostname[0] ? std::string(info.hostname) : std::string("?")) + ", pid " +
         std::to_string(info.pid) + ")";
}

}  // namespace lanes::wire
