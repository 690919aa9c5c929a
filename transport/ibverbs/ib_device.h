// IbDevice: one opened RDMA port of one communicator's rank: the device
// context, its protection domain, what the port is (link layer, LID, GID,
// MTU) and what the device can do (queue depths, inline bytes). It also
// watches the device's asynchronous events: a port going down or a queue pair
// turning fatal is remembered here, and every connection of the port asks
// before it waits, so such an event fails the communicator instead of
// leaving a rank to its deadline.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "base/status.h"
#include "transport/ibverbs/verbs_handles.h"

namespace lanes::ib {

// How a peer reaches one queue pair; exchanged through the bootstrap.
struct QpAddress {
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  uint8_t mtu = 0;  // ibv_mtu of the port
  uint8_t linkLayer = 0;
  uint32_t qpn = 0;
};

class IbDevice {
 public:
  // Opens `port` of `name` and checks that it is active and that `gidIndex`
  // (RoCE) is set on it.
  static Status open(const std::string& name, int port, int gidIndex,
                     std::shared_ptr<IbDevice>* out);
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  ibv_context* context() const { return context_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  int port() const { return port_; }
  int gidIndex() const { return gidIndex_; }
  bool roce() const { return linkLayer_ == IBV_LINK_LAYER_ETHERNET; }
  const std::string& name() const { return name_; }
  const ibv_device_attr& attr() const { return attr_; }
  // This port's part of a queue pair's address (qpn left 0).
  QpAddress address() const;
  // "rxe0:1 (RoCE, GID 1)" for log lines and errors.
  std::string label() const;

  // Drains pending async events at most every few milliseconds (cheap to
  // call in a polling loop). Error once the port went down or one of `qpns`
  // was reported in error, naming the event.
  Status checkEvents(std::span<const uint32_t> qpns);

 private:
  IbDevice() = default;
  void drainEvents();

  std::string name_;
  int port_ = 0;
  int gidIndex_ = -1;
  uint8_t linkLayer_ = 0;
  ibv_port_attr portAttr_{};
  ibv_gid gid_{};
  ibv_device_attr attr_{};
  Owned<ibv_context> context_{nullptr, nullptr};
  Owned<ibv_pd> pd_{nullptr, nullptr};

  std::mutex mu_;
  std::chrono::steady_clock::time_point nextDrain_{};
  std::string portError_;                     // set once the port went down
  std::map<uint32_t, std::string> qpErrors_;  // by qp_num
};

}  // namespace lanes::ib
