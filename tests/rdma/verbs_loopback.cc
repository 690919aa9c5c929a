// Runs in the soft-RoCE guest (tests/rdma/guest.sh): the verbs pieces the
// transport is built from (IbDevice, queue_pair.h), on a real device through
// Lanes' run-time loaded libibverbs. Two reliable-connected queue pairs of
// one process, joined through the port's RoCE v2 GID (lanes-topo's choice),
// move 1 MiB as RDMA
// writes ending in a write-with-immediate; the receiver's completion carries
// the immediate and the bytes arrive intact.
//
//   lanes_rdma_loopback [DEVICE]     (default: the first device lanes-topo lists)
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "topology/rdma_ports.h"
#include "transport/ibverbs/ib_device.h"
#include "transport/ibverbs/queue_pair.h"
#include "transport/ibverbs/verbs_library.h"

namespace {

using lanes::ib::Owned;
using lanes::ib::owned;
using lanes::ib::VerbsLibrary;

constexpr size_t kBytes = size_t{1} << 20;
constexpr int kWrites = 4;                   // the last one with the immediate
constexpr uint32_t kImmediate = 0x4c414e45;  // "LANE"

int fail(const std::string& what) {
  std::printf("FAIL: %s\n", what.c_str());
  return 1;
}

// One completion of `cq` within 10 s.
bool pollOne(const VerbsLibrary& v, ibv_cq* cq, ibv_wc* wc, std::string* why) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) {
      *why = "ibv_poll_cq failed";
      return false;
    }
    if (n == 1) {
      if (wc->status == IBV_WC_SUCCESS) return true;
      *why = std::string("completion in error: ") + v.wcStatusStr(wc->status);
      return false;
    }
  }
  *why = "no completion within 10 s";
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const VerbsLibrary& v = VerbsLibrary::get();
  if (!v.ok()) return fail(v.why());
  const std::vector<lanes::topo::RdmaPort> ports = lanes::topo::readRdmaPorts();
  const std::string name = argc > 1 ? argv[1] : ports.empty() ? "" : ports.front().device;
  const lanes::topo::RdmaPort* port = nullptr;
  for (const auto& p : ports)
    if (p.device == name && p.port == 1) port = &p;
  if (port == nullptr) return fail("no port 1 of device '" + name + "' in sysfs");
  const int gidIndex = lanes::topo::chooseGid(*port, -1);
  if (!port->active() || gidIndex < 0) return fail(name + ":1 is not active with a usable GID");

  std::shared_ptr<lanes::ib::IbDevice> device;
  if (lanes::Status st = lanes::ib::IbDevice::open(name, 1, gidIndex, &device); !st.isOk())
    return fail(st.message());
  std::vector<unsigned char> src(kBytes), dst(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  Owned<ibv_mr> srcMr = owned(v.regMr(device->pd(), src.data(), kBytes, access), v.deregMr);
  Owned<ibv_mr> dstMr = owned(v.regMr(device->pd(), dst.data(), kBytes, access), v.deregMr);
  if (!srcMr || !dstMr) return fail("ibv_reg_mr");
  Owned<ibv_cq> cq = owned(v.createCq(device->context(), 16, nullptr, nullptr, 0), v.destroyCq);
  if (!cq) return fail("ibv_create_cq");
  lanes::ib::QpSettings settings;
  settings.sendDepth = settings.recvDepth = 8;
  Owned<ibv_qp> sender{nullptr, nullptr}, receiver{nullptr, nullptr};
  for (Owned<ibv_qp>* qp : {&sender, &receiver})
    if (lanes::Status st = lanes::ib::createQueuePair(*device, cq.get(), settings, qp); !st.isOk())
      return fail(st.message());
  lanes::ib::QpAddress toSender = device->address(), toReceiver = device->address();
  toSender.qpn = sender->qp_num;
  toReceiver.qpn = receiver->qp_num;
  for (auto [qp, remote] :
       {std::pair{sender.get(), toReceiver}, std::pair{receiver.get(), toSender}})
    if (lanes::Status st = lanes::ib::connectQueuePair(*device, qp, remote, settings); !st.isOk())
      return fail("connecting the queue pairs: " + st.message());

  // The receiver's side of a write-with-immediate: a receive without buffers.
  ibv_recv_wr rwr{}, *badR = nullptr;
  rwr.wr_id = 100;
  if (ibv_post_recv(receiver.get(), &rwr, &badR) != 0) return fail("ibv_post_recv");
  const size_t piece = kBytes / kWrites;
  for (int w = 0; w < kWrites; ++w) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(src.data()) + w * piece;
    sge.length = static_cast<uint32_t>(piece);
    sge.lkey = srcMr->lkey;
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = static_cast<uint64_t>(w);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const bool last = w == kWrites - 1;
    wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.imm_data = htonl(kImmediate);
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst.data()) + w * piece;
    wr.wr.rdma.rkey = dstMr->rkey;
    if (ibv_post_send(sender.get(), &wr, &bad) != 0) return fail("ibv_post_send");
  }
  // The queue pairs signal every write (the transport's settings): one
  // completion per write on the sender, then the immediate's on the receiver.
  std::string why;
  int writes = 0;
  bool immediate = false;
  while (writes < kWrites || !immediate) {
    ibv_wc wc{};
    if (!pollOne(v, cq.get(), &wc, &why)) return fail("waiting for completions: " + why);
    if (wc.wr_id == rwr.wr_id) {
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || (wc.wc_flags & IBV_WC_WITH_IMM) == 0 ||
          ntohl(wc.imm_data) != kImmediate)
        return fail("the receiver's completion is not the write's immediate");
      immediate = true;
    } else if (wc.opcode == IBV_WC_RDMA_WRITE && wc.wr_id == static_cast<uint64_t>(writes)) {
      ++writes;
    } else {
      return fail("an unexpected completion (wr_id " + std::to_string(wc.wr_id) + ")");
    }
  }
  if (std::memcmp(src.data(), dst.data(), kBytes) != 0) return fail("the bytes differ");
  std::string gidText = "?";
  for (const auto& g : port->gids)
    if (g.index == gidIndex) gidText = g.text();
  std::printf("PASS: 1 MiB in %d RDMA writes, the last with an immediate, over %s GID %d (%s)\n",
              kWrites, name.c_str(), gidIndex, gidText.c_str());
  return 0;
}
