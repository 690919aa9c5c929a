// libibverbs, opened at run time (dlopen), so one build of Lanes runs on
// machines with and without rdma-core: the verbs transport and lanes-topo
// ask VerbsLibrary::get() and say why verbs are off where it is not ok().
// Only the library's exported functions are here; the data path's
// ibv_post_send, ibv_post_recv and ibv_poll_cq are inline in
// <infiniband/verbs.h> and call the provider through the context.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace lanes::ib {

class VerbsLibrary {
 public:
  // The process's one library, loaded on first use (the C API's lifetime).
  static const VerbsLibrary& get();

  bool ok() const { return why_.empty(); }
  // Empty when ok(), else what is missing and how to get it.
  const std::string& why() const { return why_; }

  ibv_device** (*getDeviceList)(int* count) = nullptr;
  void (*freeDeviceList)(ibv_device** list) = nullptr;
  const char* (*getDeviceName)(ibv_device* device) = nullptr;
  ibv_context* (*openDevice)(ibv_device* device) = nullptr;
  int (*closeDevice)(ibv_context* context) = nullptr;
  // Takes a zeroed ibv_port_attr (the library fills its older prefix).
  int (*queryPort)(ibv_context* context, uint8_t port, ibv_port_attr* attr) = nullptr;
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*allocPd)(ibv_context* context) = nullptr;
  int (*deallocPd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  int (*deregMr)(ibv_mr* mr) = nullptr;
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel,
                      int vector) = nullptr;
  int (*destroyCq)(ibv_cq* cq) = nullptr;
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*destroyQp)(ibv_qp* qp) = nullptr;
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  const char* (*wcStatusStr)(ibv_wc_status status) = nullptr;
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  // Blocks unless the context's async_fd is non-blocking.
  int (*getAsyncEvent)(ibv_context* context, ibv_async_event* event) = nullptr;
  void (*ackAsyncEvent)(ibv_async_event* event) = nullptr;
  const char* (*eventTypeStr)(ibv_event_type type) = nullptr;

  VerbsLibrary(const VerbsLibrary&) = delete;
  VerbsLibrary& operator=(const VerbsLibrary&) = delete;

 private:
  VerbsLibrary();
  std::string why_;
};

}  // namespace lanes::ib
