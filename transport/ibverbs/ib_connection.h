// IbConnection: one peer reached through reliable-connected queue pairs on
// an RDMA port (ib_wire.h says how slots are granted and filled).
//
// One registered block holds every lane's receive ring, its send ring (a
// post is copied there, then written from there) and the FIFO the peer's
// grants land in. Slot s of lane l travels on queue pair (l * slots + s) %
// qps, so the queue pairs share the load and one slot's write and its
// immediate stay ordered. Nothing runs in the background: every port call
// polls the completion queue and the FIFO, so the executor's polling drives
// the connection, and every completion in error, a queue pair or port
// reported down, or close() fails all its ports with a sentence naming both
// ranks and the port.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/ibverbs/ib_device.h"
#include "transport/ibverbs/queue_pair.h"
#include "transport/ibverbs/verbs_handles.h"
#include "transport/transport.h"

namespace lanes::ib {

inline constexpr int kMaxQpsPerPeer = 8;

// What a completion is for (the top byte of its work request id).
enum class WorkKind : uint64_t { Data = 1, Grant = 2, Receive = 3, Probe = 4 };

struct IbGeometry {
  int lanes = 1;
  int slots = 8;  // per lane and direction
  size_t slotBytes = size_t{128} << 10;
  int qps = 2;
  friend bool operator==(const IbGeometry&, const IbGeometry&) = default;
};

// What one side tells the other to connect (through the bootstrap).
struct IbHello {
  uint32_t magic = 0;
  int32_t lanes = 0, slots = 0, qps = 0;
  uint64_t slotBytes = 0;
  QpAddress qp[kMaxQpsPerPeer] = {};
  uint64_t recvRings = 0;  // where the peer writes its data for this side
  uint64_t fifo = 0;       // where the peer writes its grants for this side
  uint32_t rkey = 0;
};

class IbConnection final : public Connection {
 public:
  // Makes the queue pairs and memory; connect() joins them to the peer's.
  static Status create(std::shared_ptr<IbDevice> device, const IbGeometry& geometry,
                       const QpSettings& qpSettings, int rank, int peer,
                       std::unique_ptr<IbConnection>* out);
  ~IbConnection() override;

  IbHello hello() const;
  // Checks that the peer's geometry matches, posts the receives and brings
  // the queue pairs to ready-to-send. The peer may write once both sides
  // returned (the transport agrees on that before any port is used).
  // *unreachable: it failed because this port finds no way to the peer's
  // (connectQueuePair), so the pair may go to another transport.
  Status connect(const IbHello& remote, bool* unreachable);

  // Reachability, checked once after connect(): each queue pair writes a
  // word into the peer's probe area; probesArrived() says whether every one
  // of the peer's landed here. Ports on fabrics that cannot reach each other
  // show here at init instead of as a first collective's retries.
  Status sendProbes();
  Status probesArrived(bool* arrived);

  int peer() const override { return peer_; }
  const char* transportName() const override { return "ib"; }
  int lanes() const override { return geometry_.lanes; }
  SendPort& sendPort(int lane) override { return *sendPorts_[static_cast<size_t>(lane)]; }
  RecvPort& recvPort(int lane) override { return *recvPorts_[static_cast<size_t>(lane)]; }
  void close() override;
  bool drain(Deadline deadline) override;

  Status post(int lane, const void* src, size_t bytes, size_t* taken);
  Status peek(int lane, std::span<const std::byte>* view);
  void consume(int lane, size_t bytes);

 private:
  struct SendLane {
    uint64_t granted = 0;          // slots granted so far (every slot at the start)
    uint64_t used = 0;             // slots written so far
    std::vector<uint8_t> writing;  // by slot: a write from it is in flight
  };
  struct RecvLane {
    uint64_t read = 0;             // slots consumed so far
    size_t offset = 0;             // bytes of slot `read` consumed
    std::vector<uint32_t> filled;  // by slot: bytes arrived, 0 while empty
  };

  IbConnection(std::shared_ptr<IbDevice> device, const IbGeometry& geometry, int rank, int peer);
  size_t ringBytes() const { return static_cast<size_t>(geometry_.slots) * geometry_.slotBytes; }
  std::byte* recvSlot(int lane, int slot) const;
  std::byte* sendSlot(int lane, int slot) const;
  int qpOf(int lane, int slot) const;
  uint64_t* probeWords() const;  // after the FIFO, one per queue pair
  // Polls completions, grants and device events; the first failure sticks.
  Status progressLocked();
  Status pollCompletionsLocked();
  void readGrantsLocked();
  void flushGrantsLocked();
  // Posts an inline RDMA write of `word` to `remoteAddr` on queue pair `q`;
  // false (and the connection failed) where the post fails.
  bool writeWordLocked(WorkKind kind, int q, uint64_t remoteAddr, uint64_t word, const char* what);
  Status postReceiveLocked(int qp);
  void failLocked(const std::string& why);
  std::string describe(const std::string& what) const;

  std::shared_ptr<IbDevice> device_;
  IbGeometry geometry_;
  int rank_, peer_;
  QpSettings qpSettings_;
  RegisteredBuffer memory_;
  Owned<ibv_cq> cq_{nullptr, nullptr};
  std::vector<Owned<ibv_qp>> qps_;
  std::vector<uint32_t> qpNumbers_;
  std::vector<std::unique_ptr<SendPort>> sendPorts_;
  std::vector<std::unique_ptr<RecvPort>> recvPorts_;

  std::mutex mu_;
  Status failed_;
  uint64_t remoteRecvRings_ = 0, remoteFifo_ = 0;
  uint32_t remoteKey_ = 0;
  std::vector<SendLane> send_;
  std::vector<RecvLane> recv_;
  std::vector<uint32_t> sendsInFlight_;  // by queue pair
  uint64_t grantsRead_ = 0;              // FIFO entries taken
  uint64_t grantsWritten_ = 0;           // FIFO entries written into the peer's FIFO
  std::vector<uint64_t> grantsPending_;  // packed entries waiting for a send queue
  bool drained_ = false;                 // drain() ran: destruction does not wait again
};

}  // namespace lanes::ib
