// Joining a job a launcher started: rank, size and root address from the
// launcher's variables, and a unique id every rank derives alike.
#include <cstring>

#include "base/env.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/sha256.h"
#include "bootstrap/wire.h"

namespace lanes {
namespace {

struct Launcher {
  const char* name;
  const char* rankVar;
  const char* sizeVar;
  const char* localVar;
};

// Most specific first: a torchrun job inside a Slurm allocation sees both.
constexpr Launcher kLaunchers[] = {
    {"lanes", "LANES_RANK", "LANES_WORLD_SIZE", "LANES_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

// Job ids launchers export; identical on every rank of one job.
constexpr const char* kJobIdVars[] = {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID",
                                      "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE", "LANES_JOB_ID"};

Status intVar(const char* name, int64_t lo, int64_t hi, int64_t* out) {
  auto v = envString(name);
  if (!v) return invalidArgument(std::string(name) + " is not set");
  if (!parseInt64(*v, out) || *out < lo || *out > hi)
    return invalidArgument(std::string(name) + "=" + *v + " is not an integer in " +
                           std::to_string(lo) + ".." + std::to_string(hi));
  return Status::ok();
}

// "host:port" or "[v6]:port" with a port in 1..65535; no name lookup here.
Status checkHostPort(const std::string& text, const char* var) {
  size_t colon = text.rfind(':');
  bool bracketed = !text.empty() && text[0] == '[';
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < text.size();
  if (ok && bracketed) ok = text[colon - 1] == ']' && colon > 2;
  if (ok && !bracketed) ok = text.find(':') == colon;  // bare IPv6 needs brackets
  int64_t port = 0;
  if (ok) ok = parseInt64(text.substr(colon + 1), &port) && port >= 1 && port <= 65535;
  if (!ok)
    return invalidArgument(std::string(var) + "=" + text +
                           " is not host:port (IPv6 as [addr]:port, port 1..65535)");
  return Status::ok();
}

Status rootFromEnv(const Launcher& l, std::string* out) {
  if (auto addr = envString("LANES_ROOT_ADDR")) {
    LANES_RETURN_IF_ERROR(checkHostPort(*addr, "LANES_ROOT_ADDR"));
    *out = *addr;
    return Status::ok();
  }
  auto host = envString("MASTER_ADDR");
  if (!host)
    return invalidArgument(std::string("the ") + l.name +
                           " launcher variables give no root address: set LANES_ROOT_ADDR="
                           "host:port (a free port on rank 0's host that every rank can reach), "
                           "or MASTER_ADDR and MASTER_PORT");
  int64_t port = 0;
  if (envString("LANES_ROOT_PORT")) {
    LANES_RETURN_IF_ERROR(intVar("LANES_ROOT_PORT", 1, 65535, &port));
  } else {
    // MASTER_PORT belongs to torch's TCPStore; Lanes takes the next one.
    LANES_RETURN_IF_ERROR(intVar("MASTER_PORT", 1, 65534, &port));
    ++port;
  }
  std::string h = *host;
  if (h.find(':') != std::string::npos && h[0] != '[') h = "[" + h + "]";
  *out = h + ":" + std::to_string(port);
  return checkHostPort(*out, "MASTER_ADDR");
}

Status parseHexSecret(const std::string& hex, uint8_t secret[32]) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  bool ok = hex.size() == 64;
  for (size_t i = 0; ok && i < 32; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    if (ok) secret[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  if (!ok)
    return invalidArgument(
        "LANES_BOOTSTRAP_SECRET must be 64 hex digits (32 bytes), e.g. from "
        "`openssl rand -hex 32`; it has " +
        std::to_string(hex.size()) + " characters");
  return Status::ok();
}

}  // namespace

Status readLaunchEnv(LaunchEnv* out) {
  for (const Launcher& l : kLaunchers) {
    if (!envString(l.rankVar) && !envString(l.sizeVar)) continue;
    LaunchEnv env;
    env.source = l.name;
    int64_t size = 0, rank = 0, local = -1;
    LANES_RETURN_IF_ERROR(intVar(l.sizeVar, 1, 1 << 24, &size));
    LANES_RETURN_IF_ERROR(intVar(l.rankVar, 0, size - 1, &rank));
    if (envString(l.localVar)) LANES_RETURN_IF_ERROR(intVar(l.localVar, 0, size - 1, &local));
    env.rank = static_cast<int>(rank);
    env.worldSize = static_cast<int>(size);
    env.localRank = static_cast<int>(local);
    LANES_RETURN_IF_ERROR(rootFromEnv(l, &env.rootAddr));
    *out = env;
    return Status::ok();
  }
  return invalidArgument(
      "no launcher environment found: start the job with lanes-run, torchrun, mpirun or srun, or "
      "set LANES_RANK, LANES_WORLD_SIZE and LANES_ROOT_ADDR yourself");
}

Status launchSecretAndCommId(const LaunchEnv& env, uint8_t secret[32], uint64_t* commId) {
  std::string job;
  for (const char* var : kJobIdVars)
    if (auto v = envString(var)) job += std::string(var) + "=" + *v + ";";
  if (auto hex = envString("LANES_BOOTSTRAP_SECRET")) {
    LANES_RETURN_IF_ERROR(parseHexSecret(*hex, secret));
  } else {
    auto h = sha256("lanes-bootstrap-secret|" + env.rootAddr + "|" + job);
    std::memcpy(secret, h.data(), 32);
  }
  // Not the world size: ranks started with different sizes must still meet
  // at the root, which tells them they disagree (an id per size would have
  // them dropped there as strangers, and wait for the timeout).
  auto c = sha256("lanes-comm-id|" + env.rootAddr + "|" + job);
  std::memcpy(commId, c.data(), sizeof(*commId));
  return Status::ok();
}

Status uniqueIdFromLaunchEnv(const LaunchEnv& env, lanesUniqueId* out) {
  if (env.worldSize < 1 || env.rank < 0 || env.rank >= env.worldSize)
    return invalidArgument("launch environment has rank " + std::to_string(env.rank) + " of " +
                           std::to_string(env.worldSize) + "; call readLaunchEnv first");
  LANES_RETURN_IF_ERROR(checkHostPort(env.rootAddr, "the root address"));
  UniqueIdData id;
  LANES_RETURN_IF_ERROR(launchSecretAndCommId(env, id.secret, &id.commId));
  if (env.rank == 0) return createUniqueIdAndRoot(env.rootAddr, id.secret, &id.commId, out);
  SocketAddress root;
  LANES_RETURN_IF_ERROR(SocketAddress::parse(env.rootAddr, &root));
  LANES_RETURN_IF_ERROR(wire::setRootAddress(root, &id));
  return encodeUniqueId(id, out);
}

}  // namespace lanes
