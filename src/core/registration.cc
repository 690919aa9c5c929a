// lanesMemAlloc/Free and buffer and window registration. No path needs a
// registered buffer yet, so registering only records it: the handle names the
// buffer until it is deregistered or the communicator goes away.
#include "core/registration.h"

#include <algorithm>
#include <memory>

#include "core/comm.h"
#include "core/comm_registry.h"
#include "core/errors.h"
#include "exec/device_path.h"

using namespace lanes;

namespace {

Status add(lanesComm* comm, const char* fn, Registration::Kind kind, void* buff, size_t size,
           int flags, void** handle) {
  if (handle == nullptr) return invalidArgument(std::string(fn) + ": the handle pointer is NULL");
  *handle = nullptr;
  if (buff == nullptr) return invalidArgument(std::string(fn) + ": buff is NULL");
  if (size == 0) return invalidArgument(std::string(fn) + ": size is 0");
  auto reg = std::make_unique<Registration>();
  reg->kind = kind;
  reg->base = buff;
  reg->bytes = size;
  reg->flags = flags;
  std::lock_guard<std::mutex> lock(comm->registrationsMutex);
  *handle = reg.get();
  comm->registrations.push_back(std::move(reg));
  return Status::ok();
}

Status remove(lanesComm* comm, const char* fn, Registration::Kind kind, void* handle) {
  std::lock_guard<std::mutex> lock(comm->registrationsMutex);
  auto& regs = comm->registrations;
  auto it = std::find_if(regs.begin(), regs.end(), [&](const std::unique_ptr<Registration>& r) {
    return r.get() == handle && r->kind == kind;
  });
  if (it == regs.end())
    return invalidArgument(
        std::string(fn) + ": the handle was not returned by " +
        (kind == Registration::Kind::Buffer ? "lanesCommRegister" : "lanesCommWindowRegister") +
        " on this communicator, or was already deregistered");
  regs.erase(it);
  return Status::ok();
}

}  // namespace

extern "C" {

lanesResult_t lanesMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return report(nullptr, invalidArgument("lanesMemAlloc: ptr is NULL"));
  *ptr = nullptr;
  if (size == 0) return report(nullptr, invalidArgument("lanesMemAlloc: size is 0"));
  return report(nullptr, deviceAlloc(ptr, size));
}

lanesResult_t lanesMemFree(void* ptr) {
  if (ptr == nullptr) return lanesSuccess;  // like free(NULL)
  return report(nullptr, deviceFree(ptr));
}

lanesResult_t lanesCommRegister(const lanesComm_t comm, void* buff, size_t size, void** handle) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommRegister"));
  return report(comm,
                add(comm, "lanesCommRegister", Registration::Kind::Buffer, buff, size, 0, handle));
}

lanesResult_t lanesCommDeregister(const lanesComm_t comm, void* handle) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommDeregister"));
  return report(comm, remove(comm, "lanesCommDeregister", Registration::Kind::Buffer, handle));
}

lanesResult_t lanesCommWindowRegister(lanesComm_t comm, void* buff, size_t size, lanesWindow_t* win,
                                      int winFlags) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommWindowRegister"));
  void* handle = nullptr;
  Status st = add(comm, "lanesCommWindowRegister", Registration::Kind::Window, buff, size, winFlags,
                  win == nullptr ? nullptr : &handle);
  if (win != nullptr) *win = static_cast<lanesWindow_t>(handle);
  return report(comm, st);
}

lanesResult_t lanesCommWindowDeregister(lanesComm_t comm, lanesWindow_t win) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommWindowDeregister"));
  return report(comm, remove(comm, "lanesCommWindowDeregister", Registration::Kind::Window, win));
}

}  // extern "C"
