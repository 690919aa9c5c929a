#include "tools/lanes_run_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "base/env.h"

namespace lanes::run {
namespace {

Status freeLoopbackPort(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return systemError("lanes-run could not open a socket: " + errnoText(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  Status st;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    st = systemError("lanes-run could not find a free port on 127.0.0.1: " + errnoText(errno) +
                     "; set LANES_ROOT_ADDR=host:port.");
  } else {
    *port = ntohs(a.sin_port);
  }
  ::close(fd);
  return st;
}

Status randomSecret(std::string* out) {
  uint8_t bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return systemError("lanes-run could not read random bytes: " + errnoText(errno) +
                         "; set LANES_BOOTSTRAP_SECRET to 64 hex characters.");
    }
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  out->clear();
  for (uint8_t b : bytes) {
    out->push_back(kHex[b >> 4]);
    out->push_back(kHex[b & 15]);
  }
  return Status::ok();
}

}  // namespace

Status makeJobEnv(JobEnv* out) {
  JobEnv job;
  if (auto addr = envString("LANES_ROOT_ADDR")) {
    job.rootAddr = *addr;
  } else {
    int port = 0;
    LANES_RETURN_IF_ERROR(freeLoopbackPort(&port));
    job.rootAddr = "127.0.0.1:" + std::to_string(port);
  }
  if (auto secret = envString("LANES_BOOTSTRAP_SECRET")) {
    job.secret = *secret;
  } else {
    LANES_RETURN_IF_ERROR(randomSecret(&job.secret));
  }
  *out = std::move(job);
  return Status::ok();
}

std::vector<std::pair<std::string, std::string>> rankEnv(const JobEnv& job, int rank, int nranks) {
  return {
      {"LANES_RANK", std::to_string(rank)},       {"LANES_WORLD_SIZE", std::to_string(nranks)},
      {"LANES_LOCAL_RANK", std::to_string(rank)}, {"LANES_LOCAL_SIZE", std::to_string(nranks)},
      {"LANES_ROOT_ADDR", job.rootAddr},          {"LANES_BOOTSTRAP_SECRET", job.secret},
  };
}

}  // namespace lanes::run
