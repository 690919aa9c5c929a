#include "transport/common/loopback.h"

#include <cstring>

#include "transport/common/byte_ring.h"

namespace lanes {
namespace {

class RingSendPort final : public SendPort {
 public:
  explicit RingSendPort(ByteRing* ring) : ring_(ring) {}
  Status post(const void* src, size_t bytes, size_t* taken) override {
    if (ring_->closed()) return remoteError("loopback connection closed");
    *taken = ring_->write(src, bytes);
    return Status::ok();
  }

 private:
  ByteRing* ring_;
};

class RingRecvPort final : public RecvPort {
 public:
  explicit RingRecvPort(ByteRing* ring) : ring_(ring) {}
  Status peek(std::span<const std::byte>* view) override {
    *view = ring_->readable();
    if (view->empty() && ring_->closed()) return remoteError("loopback connection closed");
    return Status::ok();
  }
  void consume(size_t bytes) override { ring_->consume(bytes); }

 private:
  ByteRing* ring_;
};

}  // namespace

struct LoopbackMesh::Impl {
  int nranks;
  int lanes;
  // rings[(src * nranks + dst) * lanes + lane]: src -> dst on that lane.
  std::vector<std::unique_ptr<std::byte[]>> memory;
  std::vector<ByteRing> rings;

  class Conn final : public Connection {
   public:
    Conn(Impl* mesh, int rank, int peer) : mesh_(mesh), rank_(rank), peer_(peer) {
      for (int l = 0; l < mesh->lanes; ++l) {
        sends_.emplace_back(&mesh->ring(rank, peer, l));
        recvs_.emplace_back(&mesh->ring(peer, rank, l));
      }
    }
    int peer() const override { return peer_; }
    const char* transportName() const override { return "loopback"; }
    int lanes() const override { return mesh_->lanes; }
    SendPort& sendPort(int lane) override { return sends_.at(lane); }
    RecvPort& recvPort(int lane) override { return recvs_.at(lane); }
    bool drain(Deadline) override { return true; }  // the rings are the mesh's
    void close() override {
      for (int l = 0; l < mesh_->lanes; ++l) {
        mesh_->ring(rank_, peer_, l).close();
        mesh_->ring(peer_, rank_, l).close();
      }
    }

   private:
    Impl* mesh_;
    int rank_, peer_;
    std::vector<RingSendPort> sends_;
    std::vector<RingRecvPort> recvs_;
  };
  std::vector<std::unique_ptr<Conn>> conns;  // [rank * nranks + peer]

  ByteRing& ring(int src, int dst, int lane) { return rings[(src * nranks + dst) * lanes + lane]; }
};

LoopbackMesh::LoopbackMesh(int nranks, int lanes, size_t ringBytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->nranks = nranks;
  impl_->lanes = lanes;
  size_t capacity = padToGranule(ringBytes);
  size_t total = static_cast<size_t>(nranks) * nranks * lanes;
  impl_->rings.resize(total);
  for (size_t i = 0; i < total; ++i) {
    impl_->memory.push_back(std::make_unique<std::byte[]>(ByteRing::bytesFor(capacity) + 64));
    // ByteRingHeader wants 64-byte alignment.
    auto addr = reinterpret_cast<uintptr_t>(impl_->memory.back().get());
    void* aligned = reinterpret_cast<void*>((addr + 63) & ~uintptr_t{63});
    impl_->rings[i] = ByteRing(aligned, ByteRing::bytesFor(capacity), true);
  }
  impl_->conns.resize(static_cast<size_t>(nranks) * nranks);
  for (int r = 0; r < nranks; ++r)
    for (int p = 0; p < nranks; ++p)
      if (r != p) impl_->conns[r * nranks + p] = std::make_unique<Impl::Conn>(impl_.get(), r, p);
}

LoopbackMesh::~LoopbackMesh() = default;

Connection* LoopbackMesh::connection(int rank, int peer) {
  return impl_->conns[rank * impl_->nranks + peer].get();
}

std::vector<Connection*> LoopbackMesh::table(int rank) {
  std::vector<Connection*> t(impl_->nranks, nullptr);
  for (int p = 0; p < impl_->nranks; ++p) t[p] = connection(rank, p);
  return t;
}

}  // namespace lanes
