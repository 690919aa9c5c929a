#include "tests/multi/veth_namespaces.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

std::optional<std::string> findIp() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return std::string(p);
  return std::nullopt;
}

CommandResult run(const std::vector<std::string>& argv) { return runCommand(argv, {}, 20); }
bool ok(const CommandResult& r) { return r.exited && r.exitCode == 0; }

}  // namespace

VethNamespaces::VethNamespaces(const std::string& tag) {
  const int pid = static_cast<int>(::getpid());
  nsA = strprintf("lanes-%sa-%d", tag.c_str(), pid);
  nsB = strprintf("lanes-%sb-%d", tag.c_str(), pid);
  ifA = strprintf("veth%sa%d", tag.c_str(), pid).substr(0, 15);
  ifB = strprintf("veth%sb%d", tag.c_str(), pid).substr(0, 15);
  const int x = 1 + (pid + 97) % 250;
  addrA = strprintf("10.202.%d.1", x);
  addrB = strprintf("10.202.%d.2", x);
}

VethNamespaces::~VethNamespaces() {
  if (!ip_) return;
  if (createdB_) run({*ip_, "netns", "del", nsB});
  if (createdA_) run({*ip_, "netns", "del", nsA});
}

bool VethNamespaces::create(std::string* why) {
  ip_ = findIp();
  if (!ip_) {
    *why = "iproute2's `ip` is not installed";
    return false;
  }
  const std::string& ip = *ip_;
  CommandResult r = run({ip, "netns", "add", nsA});
  if (!ok(r)) {
    *why = "cannot create a network namespace (needs CAP_NET_ADMIN): " + r.output;
    return false;
  }
  createdA_ = true;
  createdB_ = ok(r = run({ip, "netns", "add", nsB}));
  const std::vector<std::vector<std::string>> steps = {
      {ip, "link", "add", ifA, "netns", nsA, "type", "veth", "peer", "name", ifB, "netns", nsB},
      {ip, "-n", nsA, "addr", "add", addrA + "/24", "dev", ifA},
      {ip, "-n", nsB, "addr", "add", addrB + "/24", "dev", ifB},
      {ip, "-n", nsA, "link", "set", ifA, "up"},
      {ip, "-n", nsB, "link", "set", ifB, "up"},
      {ip, "-n", nsA, "link", "set", "lo", "up"},
      {ip, "-n", nsB, "link", "set", "lo", "up"},
  };
  for (const auto& step : steps) {
    if (!createdB_) break;
    r = run(step);
    if (!ok(r)) break;
  }
  if (!createdB_ || !ok(r)) {
    *why = "cannot set up the veth pair between namespaces: " + r.output;
    return false;
  }
  return true;
}

bool VethNamespaces::setLinkB(bool up, std::string* why) {
  CommandResult r = run({*ip_, "-n", nsB, "link", "set", "dev", ifB, up ? "up" : "down"});
  if (!ok(r)) *why = r.describe();
  return ok(r);
}

std::string enterNetworkNamespace(const std::string& name) {
  std::string path = "/var/run/netns/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return strprintf("open %s: %s", path.c_str(), std::strerror(errno));
  int rc = ::setns(fd, CLONE_NEWNET);
  int err = errno;
  ::close(fd);
  return rc == 0 ? "" : strprintf("setns %s: %s", name.c_str(), std::strerror(err));
}

}  // namespace lanes::test
