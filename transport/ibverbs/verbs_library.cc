#include "transport/ibverbs/verbs_library.h"

#include <dlfcn.h>

#include <type_traits>

namespace lanes::ib {
namespace {

constexpr const char* kLibrary = "libibverbs.so.1";
// The symbols' version since rdma-core replaced the 1.0 ABI.
constexpr const char* kVersion = "IBVERBS_1.1";

}  // namespace

const VerbsLibrary& VerbsLibrary::get() {
  static const VerbsLibrary library;
  return library;
}

VerbsLibrary::VerbsLibrary() {
  // Kept open for the process: providers loaded through it stay mapped.
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    why_ = std::string(kLibrary) + " could not be loaded (" + (err ? err : "?") +
           "): install rdma-core's libibverbs1 and ibverbs-providers";
    return;
  }
  auto bind = [&](auto** fn, const char* name) {
    void* sym = dlvsym(handle, name, kVersion);
    if (sym == nullptr) sym = dlsym(handle, name);
    if (sym == nullptr && why_.empty())
      why_ = std::string(kLibrary) + " lacks " + name + ": rdma-core is too old";
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(sym);
  };
  bind(&getDeviceList, "ibv_get_device_list");
  bind(&freeDeviceList, "ibv_free_device_list");
  bind(&getDeviceName, "ibv_get_device_name");
  bind(&openDevice, "ibv_open_device");
  bind(&closeDevice, "ibv_close_device");
  bind(&queryPort, "ibv_query_port");
  bind(&queryGid, "ibv_query_gid");
  bind(&allocPd, "ibv_alloc_pd");
  bind(&deallocPd, "ibv_dealloc_pd");
  bind(&regMr, "ibv_reg_mr");
  bind(&deregMr, "ibv_dereg_mr");
  bind(&createCq, "ibv_create_cq");
  bind(&destroyCq, "ibv_destroy_cq");
  bind(&createQp, "ibv_create_qp");
  bind(&destroyQp, "ibv_destroy_qp");
  bind(&modifyQp, "ibv_modify_qp");
  bind(&wcStatusStr, "ibv_wc_status_str");
  bind(&queryDevice, "ibv_query_device");
  bind(&getAsyncEvent, "ibv_get_async_event");
  bind(&ackAsyncEvent, "ibv_ack_async_event");
  bind(&eventTypeStr, "ibv_event_type_str");
}

}  // namespace lanes::ib
