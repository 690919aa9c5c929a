// Runs in the soft-RoCE guest (tests/rdma/guest.sh): the verbs pieces the
// transport is built from, on a real device through Lanes' run-time loaded
// libibverbs. Two reliable-connected queue pairs of one process, joined
// through the port's RoCE v2 GID (lanes-topo's choice), move 1 MiB as RDMA
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
#include "transport/ibverbs/verbs_library.h"

namespace {

using lanes::ib::VerbsLibrary;

constexpr size_t kBytes = size_t{1} << 20;
constexpr int kWrites = 4;                   // the last one with the immediate
constexpr uint32_t kImmediate = 0x4c414e45;  // "LANE"

int fail(const std::string& what) {
  std::printf("FAIL: %s\n", what.c_str());
  return 1;
}

// A verbs object freed by the library's own destroy function.
template <class T>
using Owned = std::unique_ptr<T, int (*)(T*)>;

// Moves a QP through INIT, RTR and RTS towards `remoteQpn` at `gid`.
bool connectQp(const VerbsLibrary& v, ibv_qp* qp, uint32_t remoteQpn, const ibv_gid& gid,
               int gidIndex, ibv_mtu mtu, std::string* why) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (int rc = v.modifyQp(qp, &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    *why = "INIT: " + std::string(std::strerror(rc));
    return false;
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu;
  a.dest_qp_num = remoteQpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gidIndex);
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  if (int rc = v.modifyQp(qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    *why = "RTR: " + std::string(std::strerror(rc));
    return false;
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  if (int rc = v.modifyQp(qp, &a,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
    *why = "RTS: " + std::string(std::strerror(rc));
    return false;
  }
  return true;
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

  int count = 0;
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> list(v.getDeviceList(&count),
                                                            v.freeDeviceList);
  ibv_device* device = nullptr;
  for (int i = 0; list && i < count; ++i)
    if (const char* n = v.getDeviceName(list.get()[i]); n != nullptr && name == n)
      device = list.get()[i];
  if (device == nullptr) return fail("libibverbs does not list " + name);
  Owned<ibv_context> ctx(v.openDevice(device), v.closeDevice);
  if (!ctx) return fail("ibv_open_device " + name);
  ibv_port_attr attr{};
  if (v.queryPort(ctx.get(), 1, &attr) != 0) return fail("ibv_query_port");
  ibv_gid gid{};
  if (v.queryGid(ctx.get(), 1, gidIndex, &gid) != 0) return fail("ibv_query_gid");
  Owned<ibv_pd> pd(v.allocPd(ctx.get()), v.deallocPd);
  if (!pd) return fail("ibv_alloc_pd");
  std::vector<unsigned char> src(kBytes), dst(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  Owned<ibv_mr> srcMr(v.regMr(pd.get(), src.data(), kBytes, access), v.deregMr);
  Owned<ibv_mr> dstMr(v.regMr(pd.get(), dst.data(), kBytes, access), v.deregMr);
  if (!srcMr || !dstMr) return fail("ibv_reg_mr");
  Owned<ibv_cq> sendCq(v.createCq(ctx.get(), 16, nullptr, nullptr, 0), v.destroyCq);
  Owned<ibv_cq> recvCq(v.createCq(ctx.get(), 16, nullptr, nullptr, 0), v.destroyCq);
  if (!sendCq || !recvCq) return fail("ibv_create_cq");
  auto makeQp = [&]() {
    ibv_qp_init_attr init{};
    init.send_cq = sendCq.get();
    init.recv_cq = recvCq.get();
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    return Owned<ibv_qp>(v.createQp(pd.get(), &init), v.destroyQp);
  };
  Owned<ibv_qp> sender = makeQp(), receiver = makeQp();
  if (!sender || !receiver) return fail("ibv_create_qp");
  std::string why;
  if (!connectQp(v, sender.get(), receiver->qp_num, gid, gidIndex, attr.active_mtu, &why) ||
      !connectQp(v, receiver.get(), sender->qp_num, gid, gidIndex, attr.active_mtu, &why))
    return fail("connecting the queue pairs: " + why);

  // The receiver's side of a write-with-immediate: a receive without buffers.
  ibv_recv_wr rwr{}, *badR = nullptr;
  rwr.wr_id = 2;
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
    wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
    wr.imm_data = htonl(kImmediate);
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst.data()) + w * piece;
    wr.wr.rdma.rkey = dstMr->rkey;
    if (ibv_post_send(sender.get(), &wr, &bad) != 0) return fail("ibv_post_send");
  }
  ibv_wc wc{};
  if (!pollOne(v, sendCq.get(), &wc, &why)) return fail("the sender's completion: " + why);
  if (!pollOne(v, recvCq.get(), &wc, &why)) return fail("the receiver's completion: " + why);
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || (wc.wc_flags & IBV_WC_WITH_IMM) == 0 ||
      wc.wr_id != rwr.wr_id || ntohl(wc.imm_data) != kImmediate)
    return fail("the receiver's completion is not the write's immediate");
  if (std::memcmp(src.data(), dst.data(), kBytes) != 0) return fail("the bytes differ");
  std::string gidText = "?";
  for (const auto& g : port->gids)
    if (g.index == gidIndex) gidText = g.text();
  std::printf("PASS: 1 MiB in %d RDMA writes, the last with an immediate, over %s GID %d (%s)\n",
              kWrites, name.c_str(), gidIndex, gidText.c_str());
  return 0;
}
