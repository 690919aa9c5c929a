#include "transport/ibverbs/queue_pair.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "transport/ibverbs/verbs_library.h"

namespace lanes::ib {
namespace {

Status modifyFailed(const IbDevice& device, const char* state, int rc) {
  return systemError(std::string("moving a queue pair to ") + state +
                     " failed: " + std::strerror(rc));
}

}  // namespace

Status createQueuePair(IbDevice& device, ibv_cq* cq, const QpSettings& settings,
                       Owned<ibv_qp>* out) {
  const VerbsLibrary& v = VerbsLibrary::get();
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 1;
  init.cap.max_send_wr = settings.sendDepth;
  init.cap.max_recv_wr = settings.recvDepth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = settings.inlineBytes;
  Owned<ibv_qp> qp = owned(v.createQp(device.pd(), &init), v.destroyQp);
  if (!qp)
    return systemError("ibv_create_qp (" + std::to_string(settings.sendDepth) + " sends, " +
                       std::to_string(settings.recvDepth) + " receives, " +
                       std::to_string(settings.inlineBytes) +
                       " inline bytes) failed: " + std::strerror(errno) +
                       "; lower LANES_IB_RING_BYTES or raise LANES_IB_SLOT_BYTES");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = static_cast<uint8_t>(device.port());
  a.pkey_index = 0;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (int rc = v.modifyQp(qp.get(), &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return modifyFailed(device, "INIT", rc);
  *out = std::move(qp);
  return Status::ok();
}

Status connectQueuePair(IbDevice& device, ibv_qp* qp, const QpAddress& remote,
                        const QpSettings& settings, bool* unreachable) {
  const VerbsLibrary& v = VerbsLibrary::get();
  const QpAddress local = device.address();
  if (remote.linkLayer != local.linkLayer)
    return invalidUsage("verbs transport: " + device.label() +
                        " cannot reach a peer whose port has the other link layer (InfiniBand "
                        "vs RoCE); pick matching ports with LANES_IB_HCA");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(local.mtu, remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(device.port());
  if (device.roce()) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(device.gidIndex());
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = static_cast<uint8_t>(settings.trafficClass);
  } else {
    a.ah_attr.dlid = remote.lid;
  }
  if (int rc = v.modifyQp(qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    // RoCE resolves the peer's MAC here: an address no route or neighbour
    // leads to fails this step.
    if (unreachable != nullptr)
      *unreachable = rc == ETIMEDOUT || rc == EHOSTUNREACH || rc == ENETUNREACH;
    return modifyFailed(device, "RTR", rc);
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = static_cast<uint8_t>(settings.timeout);
  a.retry_cnt = static_cast<uint8_t>(settings.retryCount);
  // Receives are posted ahead of every grant, so a peer never finds none;
  // were it to, 6 retries end in an error where 7 would retry forever.
  a.rnr_retry = 6;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  if (int rc = v.modifyQp(qp, &a,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    return modifyFailed(device, "RTS", rc);
  return Status::ok();
}

void failQueuePair(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  VerbsLibrary::get().modifyQp(qp, &a, IBV_QP_STATE);
}

}  // namespace lanes::ib
