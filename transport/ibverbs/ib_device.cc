#include "transport/ibverbs/ib_device.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "transport/ibverbs/verbs_library.h"

namespace lanes::ib {
namespace {

// Events are read at most this often: a read() per poll would slow the
// data path, and a port going down is not a microsecond matter.
constexpr auto kDrainPeriod = std::chrono::milliseconds(5);

}  // namespace

Status IbDevice::open(const std::string& name, int port, int gidIndex,
                      std::shared_ptr<IbDevice>* out) {
  const VerbsLibrary& v = VerbsLibrary::get();
  if (!v.ok()) return systemError("verbs transport: " + v.why());
  std::shared_ptr<IbDevice> d(new IbDevice());
  d->name_ = name;
  d->port_ = port;
  d->gidIndex_ = gidIndex;
  int count = 0;
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> list(v.getDeviceList(&count),
                                                            v.freeDeviceList);
  ibv_device* device = nullptr;
  for (int i = 0; list && i < count; ++i)
    if (const char* n = v.getDeviceName(list.get()[i]); n != nullptr && name == n)
      device = list.get()[i];
  if (device == nullptr)
    return systemError("verbs transport: libibverbs lists no device " + name +
                       " (is its provider in ibverbs-providers installed?)");
  d->context_ = owned(v.openDevice(device), v.closeDevice);
  if (!d->context_)
    return systemError("verbs transport: cannot open " + name + ": " + std::strerror(errno));
  if (int rc = v.queryDevice(d->context(), &d->attr_); rc != 0)
    return systemError("verbs transport: ibv_query_device(" + name + "): " + std::strerror(rc));
  if (v.queryPort(d->context(), static_cast<uint8_t>(port), &d->portAttr_) != 0)
    return systemError("verbs transport: ibv_query_port(" + name + ":" + std::to_string(port) +
                       ") failed");
  if (d->portAttr_.state != IBV_PORT_ACTIVE)
    return systemError("verbs transport: " + name + ":" + std::to_string(port) +
                       " is not active; check its link (lanes-topo lists the ports)");
  // IBVERBS_1.1's ibv_query_port fills the fields up to link_layer; an old
  // provider leaves it 0, which means InfiniBand.
  d->linkLayer_ = d->portAttr_.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                                     : IBV_LINK_LAYER_INFINIBAND;
  if (d->roce() && gidIndex < 0)
    return invalidUsage("verbs transport: " + name + ":" + std::to_string(port) +
                        " is RoCE and has no usable GID; set LANES_IB_GID_INDEX");
  if (gidIndex >= 0 &&
      v.queryGid(d->context(), static_cast<uint8_t>(port), gidIndex, &d->gid_) != 0)
    return systemError("verbs transport: ibv_query_gid(" + name + ", " + std::to_string(gidIndex) +
                       ") failed");
  d->pd_ = owned(v.allocPd(d->context()), v.deallocPd);
  if (!d->pd_) return systemError("verbs transport: ibv_alloc_pd(" + name + ") failed");
  const int fd = d->context()->async_fd;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return systemError("verbs transport: cannot make " + name + "'s event channel non-blocking");
  *out = std::move(d);
  return Status::ok();
}

IbDevice::~IbDevice() = default;

QpAddress IbDevice::address() const {
  QpAddress a;
  std::memcpy(a.gid, gid_.raw, sizeof(a.gid));
  a.lid = portAttr_.lid;
  a.mtu = static_cast<uint8_t>(portAttr_.active_mtu);
  a.linkLayer = linkLayer_;
  return a;
}

std::string IbDevice::label() const {
  std::string s = name_ + ":" + std::to_string(port_);
  if (roce()) return s + " (RoCE, GID " + std::to_string(gidIndex_) + ")";
  return s + " (InfiniBand, LID " + std::to_string(portAttr_.lid) + ")";
}

void IbDevice::drainEvents() {
  const VerbsLibrary& v = VerbsLibrary::get();
  ibv_async_event event{};
  while (v.getAsyncEvent(context(), &event) == 0) {
    const std::string what = std::string(v.eventTypeStr(event.event_type)) + " on " + label();
    switch (event.event_type) {
      case IBV_EVENT_PORT_ERR:
        if (static_cast<int>(event.element.port_num) == port_ && portError_.empty())
          portError_ = what;
        break;
      case IBV_EVENT_DEVICE_FATAL:
      case IBV_EVENT_CQ_ERR:  // an overrun completion queue: completions are lost
        if (portError_.empty()) portError_ = what;
        break;
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR:
        qpErrors_.emplace(event.element.qp->qp_num, what);
        break;
      case IBV_EVENT_PORT_ACTIVE:
        if (static_cast<int>(event.element.port_num) == port_) portError_.clear();
        break;
      default:
        break;
    }
    v.ackAsyncEvent(&event);
  }
}

Status IbDevice::checkEvents(std::span<const uint32_t> qpns) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now >= nextDrain_) {
    drainEvents();
    nextDrain_ = now + kDrainPeriod;
  }
  if (!portError_.empty()) return systemError(portError_);
  for (uint32_t qpn : qpns)
    if (auto it = qpErrors_.find(qpn); it != qpErrors_.end()) return systemError(it->second);
  return Status::ok();
}

}  // namespace lanes::ib
