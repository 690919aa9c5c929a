// Wire formats of the bootstrap: frame types, the hello every connection
// opens with, the rank table the root hands out, error frames. Internal to
// src/bootstrap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/socket.h"
#include "bootstrap/bootstrap.h"

namespace lanes::wire {

enum FrameType : uint16_t {
  kHello = 1,          // secret + identity; first frame on every connection
  kTable = 2,          // root -> rank: its own and its tree neighbours' RankInfo and listen address
  kError = 3,          // root -> rank: why it was refused (code + sentence)
  kData = 4,           // mesh: tagged bytes for the mailbox
  kFailure = 5,        // mesh: "rank X failed: why"
  kProgress = 6,       // mesh: uint64 completed sequence number
  kGoodbye = 7,        // mesh: the sender is leaving normally; its EOF is no failure
  kProgressQuery = 8,  // mesh: "what are you running?" (tag: query id)
  kProgressReply = 9,  // mesh: the answer, an encoded ProgressReport (tag: query id)
  kLeaving = 10,       // mesh, any channel: the process closes this connection on purpose
  kLost = 11,          // mesh, any channel: a failure notice for mesh rank X, passed on
};

// A silent or slow stranger is dropped after this long.
inline constexpr double kHelloTimeoutSeconds = 5.0;
inline constexpr size_t kMaxHelloBytes = 1024;
inline constexpr size_t kMaxErrorBytes = 4096;
// Bootstrap payloads are connection details, never bulk data.
inline constexpr size_t kMaxDataBytes = size_t{64} << 20;

// Fixed-width appends/reads (host order; socket.cc asserts little-endian).
class Writer {
 public:
  void bytes(const void* p, size_t n);
  template <typename T>
  void put(T v) {
    bytes(&v, sizeof(v));
  }
  void str(const std::string& s);  // u32 length + bytes
  std::vector<uint8_t>& data() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), left_(n) {}
  explicit Reader(const std::vector<uint8_t>& v) : Reader(v.data(), v.size()) {}
  bool bytes(void* out, size_t n);
  template <typename T>
  bool get(T* v) {
    return bytes(v, sizeof(*v));
  }
  bool str(std::string* s, size_t maxLen);
  bool atEnd() const { return left_ == 0; }

 private:
  const uint8_t* p_;
  size_t left_;
};

void putAddress(Writer& w, const SocketAddress& a);
bool getAddress(Reader& r, SocketAddress* a);
void putRankInfo(Writer& w, const RankInfo& info);
bool getRankInfo(Reader& r, RankInfo* info);

// The unique id's root address as a socket address, and back.
SocketAddress rootAddress(const UniqueIdData& id);
Status setRootAddress(const SocketAddress& a, UniqueIdData* id);

struct Hello {
  uint8_t secret[32] = {};
  uint64_t commId = 0;
  int32_t nranks = 0;
  int32_t rank = -1;
  // Only in the hello to the root:
  RankInfo info;
  SocketAddress listen;
};
std::vector<uint8_t> encodeHello(const Hello& h, bool toRoot);
Status decodeHello(const std::vector<uint8_t>& payload, bool toRoot, Hello* out);
// The hello on a control connection between two ranks of a mesh.
Hello meshHello(const UniqueIdData& id, int nranks, int rank);
// Checks a mesh hello; an error says why the connection is refused.
Status checkMeshHello(const UniqueIdData& id, int nranks, const std::vector<uint8_t>& payload,
                      uint16_t type, Hello* h);

std::vector<uint8_t> encodeError(const Status& s);
Status decodeError(const std::vector<uint8_t>& payload);

// The root's table for one rank: nranks, the entry count, then (RankInfo,
// listen address) per entry, each naming its rank. The root sends a rank
// only itself and its tree neighbours (kMaxTableEntries), so it moves O(N)
// bytes, not O(N^2); the ranks gather the rest over the tree. Decoding
// checks the count, every entry's rank and that none repeats; the ranks not
// sent keep RankInfo{} (rank -1) and an empty address.
constexpr int kMaxTableEntries = 4;
std::vector<uint8_t> encodeTable(const std::vector<RankInfo>& ranks,
                                 const std::vector<SocketAddress>& listens);
Status decodeTable(const std::vector<uint8_t>& payload, int nranks, std::vector<RankInfo>* ranks,
                   std::vector<SocketAddress>* listens);
// Largest table of `entries` entries (the receive limit).
size_t maxTableBytes(int entries);

// A failure notice on the mesh: "rank `dead` failed: why".
std::vector<uint8_t> encodeFailureNotice(int32_t dead, const std::string& why);
Status decodeFailureNotice(const std::vector<uint8_t>& payload, int nranks, int32_t* dead,
                           std::string* why);

// Compares secrets in time independent of where they differ.
bool constantTimeEqual(const uint8_t* a, const uint8_t* b, size_t n);
Status randomBytes(void* out, size_t n);

// "rank 3 (host a, pid 123)"
std::string describeRank(const RankInfo& info);

}  // namespace lanes::wire
