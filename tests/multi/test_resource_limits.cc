// Resource limits give clear errors, not crashes: a /dev/shm too small for
// the shared-memory rings (a container's 64 MiB default, here 1 MiB), too few
// file descriptors, and a LANES_PORT_RANGE whose every port is taken. Each
// runs its ranks as threads of a forked child, which then shows that the
// advertised fix works in the same process.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

// Results of one communicator init on `nranks` thread ranks.
struct InitResult {
  std::vector<lanesResult_t> codes;
  std::vector<std::string> messages;
  bool allOk() const {
    for (auto c : codes)
      if (c != lanesSuccess) return false;
    return true;
  }
  bool noneOk() const {
    for (auto c : codes)
      if (c == lanesSuccess) return false;
    return true;
  }
};

// Inits `nranks` thread ranks; on success runs an all-reduce on each and
// checks it, then destroys them. A failed all-reduce counts as a failure.
InitResult initThreads(int nranks) {
  InitResult out;
  out.codes.assign(nranks, lanesInternalError);
  out.messages.assign(nranks, "");
  lanesUniqueId id;
  lanesResult_t res = lanesGetUniqueId(&id);
  if (res != lanesSuccess) {
    for (int r = 0; r < nranks; ++r) {
      out.codes[r] = res;
      out.messages[r] = std::string("lanesGetUniqueId: ") + lanesGetLastError(nullptr);
    }
    return out;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      lanesConfig_t config = LANES_CONFIG_INITIALIZER;
      config.timeoutSeconds = 10;
      lanesComm_t comm = nullptr;
      lanesResult_t rc = lanesCommInitRankConfig(&comm, nranks, id, r, &config);
      out.codes[r] = rc;
      out.messages[r] = lanesGetLastError(rc == lanesSuccess ? comm : nullptr);
      if (rc != lanesSuccess) return;
      std::vector<int32_t> mine(100000, r + 1), total(100000, 0);
      rc = lanesAllReduce(mine.data(), total.data(), mine.size(), lanesInt32, lanesSum, comm,
                          nullptr);
      const int32_t expected = nranks * (nranks + 1) / 2;
      if (rc != lanesSuccess) {
        out.codes[r] = rc;
        out.messages[r] = std::string("all-reduce: ") + lanesGetLastError(comm);
      } else if (total.front() != expected || total.back() != expected) {
        out.codes[r] = lanesInternalError;
        out.messages[r] = strprintf("all-reduce gave %d, expected %d", total.front(), expected);
      }
      lanesCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Runs `body` in a forked child and returns what it printed to the pipe; the
// child exits 0 unless `body` returned false. A child stuck past `seconds`
// is killed.
struct ChildReport {
  bool exitedZero = false;
  std::string text;
};

ChildReport inChild(const std::function<bool(std::string* report)>& body, double seconds = 90) {
  int fds[2];
  ChildReport out;
  if (::pipe(fds) != 0) return out;
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string report;
    bool ok = false;
    // Checks that fail mid-way still say what they saw.
    try {
      ok = body(&report);
    } catch (const std::exception& e) {
      report += std::string("exception: ") + e.what();
    }
    size_t done = 0;
    while (done < report.size()) {
      ssize_t n = ::write(fds[1], report.data() + done, report.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  Watchdog watchdog(seconds + 30, "the resource-limit child");
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.text.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.exitedZero = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!out.exitedZero)
    out.text += WIFEXITED(status) ? strprintf("\n(child exited with %d)", WEXITSTATUS(status))
                                  : strprintf("\n(child killed by signal %d)", WTERMSIG(status));
  return out;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

void setenvs(const std::vector<std::pair<const char*, const char*>>& vars) {
  for (const auto& [k, v] : vars) ::setenv(k, v, 1);
}

TEST(ResourceLimits, DevShmTooSmallSaysSoAtInit) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small /dev/shm needs root";
  std::vector<std::string> before = listLanesShm();
  ChildReport child = inChild([](std::string* report) {
    // A private mount namespace: the 1 MiB /dev/shm is this child's alone.
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0) {
      *report =
          std::string("SKIP: cannot mount a private tmpfs on /dev/shm: ") + std::strerror(errno);
      return true;
    }
    setenvs({{"LANES_BOOTSTRAP_TIMEOUT", "20"}, {"LANES_TIMEOUT", "10"}});
    InitResult small = initThreads(3);
    if (!small.noneOk()) {
      *report = "init succeeded on some rank with a 1 MiB /dev/shm: " + small.messages[0];
      return false;
    }
    *report = small.messages[0] + "\n";
    // The fix the message offers works in the same process.
    ::setenv("LANES_SHM_DISABLE", "1", 1);
    InitResult tcp = initThreads(3);
    if (!tcp.allOk()) {
      *report += "with LANES_SHM_DISABLE=1 the init still failed: " + tcp.messages[0];
      return false;
    }
    return true;
  });
  if (child.text.rfind("SKIP: ", 0) == 0) GTEST_SKIP() << child.text.substr(6);
  ASSERT_TRUE(child.exitedZero) << child.text;
  const std::string& m = child.text;
  EXPECT_TRUE(contains(m, "/dev/shm")) << m;
  EXPECT_TRUE(contains(m, "of 1 MiB")) << "does not give /dev/shm's size: " << m;
  EXPECT_TRUE(contains(m, "--shm-size")) << m;
  EXPECT_TRUE(contains(m, "LANES_SHM_DISABLE=1")) << m;
  expectNoShmLeaks(before, "the small-/dev/shm run");
}

// Two limits: with a few descriptors the bootstrap root (a thread of this
// process) cannot accept; with a dozen the ranks run out building their mesh.
// Each way, every failing rank must name the limit and how to raise it.
TEST(ResourceLimits, TooFewFileDescriptorsSaysUlimit) {
  for (int slack : {4, 12}) {
    SCOPED_TRACE("descriptors beyond those open: " + std::to_string(slack));
    ChildReport child = inChild([slack](std::string* report) {
      // A rank that cannot even reach the root is noticed only at this timeout.
      setenvs(
          {{"LANES_BOOTSTRAP_TIMEOUT", "4"}, {"LANES_TIMEOUT", "4"}, {"LANES_SHM_DISABLE", "1"}});
      rlimit old{};
      ::getrlimit(RLIMIT_NOFILE, &old);
      rlim_t low = static_cast<rlim_t>(countOpenFds() + slack);
      rlimit tight{low, old.rlim_max};
      if (::setrlimit(RLIMIT_NOFILE, &tight) != 0) {
        *report = std::string("SKIP: setrlimit: ") + std::strerror(errno);
        return true;
      }
      InitResult starved = initThreads(4);
      ::setrlimit(RLIMIT_NOFILE, &old);
      if (starved.allOk()) {
        *report = strprintf("init of 4 TCP ranks succeeded with %d descriptors", int(low));
        return false;
      }
      for (size_t r = 0; r < starved.codes.size(); ++r)
        if (starved.codes[r] != lanesSuccess) *report += starved.messages[r] + "\n";
      // With the limit back, the same process can build a communicator.
      InitResult again = initThreads(4);
      if (!again.allOk()) {
        *report += "after raising the limit again, init failed: " + again.messages[0];
        return false;
      }
      return true;
    });
    if (child.text.rfind("SKIP: ", 0) == 0) GTEST_SKIP() << child.text.substr(6);
    ASSERT_TRUE(child.exitedZero) << child.text;
    EXPECT_TRUE(contains(child.text, "ulimit -n")) << child.text;
    EXPECT_TRUE(contains(child.text, "may open")) << "does not give the limit: " << child.text;
  }
}

// Listeners on 0.0.0.0 holding `count` consecutive ports.
struct HeldPorts {
  int first = 0;
  std::vector<int> fds;
  ~HeldPorts() {
    for (int fd : fds) ::close(fd);
  }
  std::string range() const {
    return std::to_string(first) + "-" + std::to_string(first + static_cast<int>(fds.size()) - 1);
  }
};

bool holdPorts(int count, HeldPorts* out) {
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 50; ++attempt) {
    int first = std::uniform_int_distribution<int>(30000, 60000)(rng);
    std::vector<int> fds;
    for (int p = first; p < first + count; ++p) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(p));
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
          ::listen(fd, 4) != 0) {
        if (fd >= 0) ::close(fd);
        break;
      }
      fds.push_back(fd);
    }
    if (static_cast<int>(fds.size()) == count) {
      out->first = first;
      out->fds = std::move(fds);
      return true;
    }
    for (int fd : fds) ::close(fd);
  }
  return false;
}

TEST(ResourceLimits, PortRangeTakenSaysWhichRange) {
  HeldPorts held;
  ASSERT_TRUE(holdPorts(4, &held)) << "could not find 4 free consecutive ports";
  const std::string range = held.range();
  ChildReport child = inChild([&range](std::string* report) {
    setenvs({{"LANES_BOOTSTRAP_TIMEOUT", "20"},
             {"LANES_TIMEOUT", "10"},
             {"LANES_SOCKET_FAMILY", "AF_INET"},
             {"LANES_PORT_RANGE", range.c_str()}});
    InitResult taken = initThreads(2);
    if (!taken.noneOk()) {
      *report = "init succeeded with every port of the range taken";
      return false;
    }
    *report = taken.messages[0] + "\n";
    return true;
  });
  ASSERT_TRUE(child.exitedZero) << child.text;
  EXPECT_TRUE(contains(child.text, "LANES_PORT_RANGE=" + range)) << child.text;
  EXPECT_TRUE(contains(child.text, "already in use")) << child.text;
}

// (local port, remote port) of this process's TCP sockets; remote 0 for a
// listener.
std::vector<std::pair<int, int>> tcpPorts() {
  auto portOf = [](const sockaddr_storage& ss) {
    if (ss.ss_family == AF_INET)
      return int(ntohs(reinterpret_cast<const sockaddr_in&>(ss).sin_port));
    if (ss.ss_family == AF_INET6)
      return int(ntohs(reinterpret_cast<const sockaddr_in6&>(ss).sin6_port));
    return -1;
  };
  std::vector<std::pair<int, int>> out;
  for (int fd = 0; fd < 4096; ++fd) {
    int type = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage local{}, remote{};
    socklen_t llen = sizeof local, rlen = sizeof remote;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0 || portOf(local) < 0)
      continue;
    int rport =
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &rlen) == 0 ? portOf(remote) : 0;
    out.emplace_back(portOf(local), rport);
  }
  return out;
}

TEST(ResourceLimits, ListenersStayInPortRange) {
  // A free range: hold it to find it, then let it go for the library.
  int first = 0;
  {
    HeldPorts probe;
    ASSERT_TRUE(holdPorts(32, &probe)) << "could not find 32 free consecutive ports";
    first = probe.first;
  }
  const std::string range = std::to_string(first) + "-" + std::to_string(first + 31);
  ChildReport child = inChild([&](std::string* report) {
    setenvs({{"LANES_BOOTSTRAP_TIMEOUT", "20"},
             {"LANES_TIMEOUT", "10"},
             {"LANES_SHM_DISABLE", "1"},
             {"LANES_PORT_RANGE", range.c_str()}});
    lanesUniqueId id;
    if (lanesGetUniqueId(&id) != lanesSuccess) {
      *report = std::string("lanesGetUniqueId: ") + lanesGetLastError(nullptr);
      return false;
    }
    std::vector<lanesComm_t> comms(3, nullptr);
    std::vector<std::thread> threads;
    std::vector<lanesResult_t> codes(3, lanesInternalError);
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] {
        lanesConfig_t config = LANES_CONFIG_INITIALIZER;
        config.timeoutSeconds = 10;
        codes[r] = lanesCommInitRankConfig(&comms[r], 3, id, r, &config);
      });
    for (auto& t : threads) t.join();
    bool ok = true;
    for (int r = 0; r < 3; ++r)
      if (codes[r] != lanesSuccess) {
        *report += strprintf("rank %d init: %s\n", r, lanesGetLastError(nullptr));
        ok = false;
      }
    // Root, bootstrap mesh and TCP transport listeners were all in the
    // range: every connection has one end (the accepting one) there.
    auto inRange = [&](int p) { return p >= first && p <= first + 31; };
    std::vector<std::pair<int, int>> sockets = tcpPorts();
    for (auto [local, remote] : sockets)
      if (!inRange(local) && !inRange(remote)) {
        *report += strprintf("a TCP socket %d -> %d has neither end in LANES_PORT_RANGE=%s\n",
                             local, remote, range.c_str());
        ok = false;
      }
    if (sockets.size() < 6) {
      *report +=
          strprintf("only %zu TCP sockets found, expected 3 ranks' meshes\n", sockets.size());
      ok = false;
    }
    for (auto c : comms)
      if (c) lanesCommDestroy(c);
    return ok;
  });
  EXPECT_TRUE(child.exitedZero) << child.text;
}

TEST(ResourceLimits, MalformedPortRangeIsRejected) {
  ChildReport child = inChild([](std::string* report) {
    ::setenv("LANES_PORT_RANGE", "70000-10", 1);
    lanesUniqueId id;
    lanesResult_t rc = lanesGetUniqueId(&id);
    *report = lanesGetLastError(nullptr);
    return rc == lanesInvalidArgument;
  });
  EXPECT_TRUE(child.exitedZero) << child.text;
  EXPECT_TRUE(contains(child.text, "LANES_PORT_RANGE=70000-10")) << child.text;
}

}  // namespace
}  // namespace lanes::test
