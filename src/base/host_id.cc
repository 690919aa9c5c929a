#include "base/host_id.h"

#include <unistd.h>

#include <fstream>

#include "base/env.h"

namespace lanes {

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}
}  // namespace

std::string hostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

uint64_t hostHash() {
  if (auto id = envString("LANES_HOSTID")) return fnv1a("hostid:" + *id);
  std::string key = hostName();
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  if (boot && std::getline(boot, bootId)) key += ":" + bootId;
  return fnv1a(key);
}

}  // namespace lanes
