// One object per communicator in this process, shared by the communicator's
// ranks that are threads here: they find it by the communicator's id. The
// first rank to ask makes it; it dies with the last rank that holds it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace lanes {

template <class T, class... Args>
std::shared_ptr<T> sharedPerCommunicator(uint64_t commId, Args&&... args) {
  // The process-wide table the C API's thread ranks need (one per T).
  static std::mutex mutex;
  static std::map<uint64_t, std::weak_ptr<T>> table;
  std::lock_guard<std::mutex> lock(mutex);
  std::erase_if(table, [](const auto& entry) { return entry.second.expired(); });
  if (auto existing = table[commId].lock()) return existing;
  auto made = std::make_shared<T>(std::forward<Args>(args)...);
  table[commId] = made;
  return made;
}

}  // namespace lanes
