#include "core/comm_registry.h"

#include <condition_variable>
#include <mutex>
#include <unordered_map>

namespace lanes {
namespace {
struct Entry {
  int calls = 0;         // API calls inside the communicator now
  bool retired = false;  // destroy/abort started: no new calls
};
// Process-wide by nature: the C API hands out raw handles.
struct Registry {
  std::mutex mutex;
  std::condition_variable idle;
  std::unordered_map<lanesComm_t, Entry> entries;
};
// Never destroyed: the flight recorder's SIGUSR1 thread (core/flight_dump.h)
// may walk it while the process exits and destroys its statics.
Registry& registry() {
  union Immortal {
    Registry r;
    Immortal() : r() {}
    ~Immortal() {}
  };
  static Immortal holder;
  return holder.r;
}
}  // namespace

void registerComm(lanesComm_t comm) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().entries[comm] = Entry{};
}

CommRef::CommRef(lanesComm_t comm) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto it = registry().entries.find(comm);
  if (it == registry().entries.end() || it->second.retired) return;
  ++it->second.calls;
  comm_ = comm;
}

CommRef::~CommRef() {
  if (comm_ == nullptr) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.entries.find(comm_);
  if (it != r.entries.end() && --it->second.calls == 0 && it->second.retired) r.idle.notify_all();
}

std::vector<lanesComm_t> liveComms() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  std::vector<lanesComm_t> out;
  for (const auto& [comm, entry] : registry().entries)
    if (!entry.retired) out.push_back(comm);
  return out;
}

bool retireComm(lanesComm_t comm) {
  Registry& r = registry();
  std::unique_lock<std::mutex> lock(r.mutex);
  auto it = r.entries.find(comm);
  if (it == r.entries.end() || it->second.retired) return false;
  it->second.retired = true;
  r.idle.wait(lock, [&] { return r.entries[comm].calls == 0; });
  r.entries.erase(comm);
  return true;
}

}  // namespace lanes
