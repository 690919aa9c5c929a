// Ranks an MPI launcher started, with no root address: the unique id goes
// over MPI through the plugin liblanes-mpi.so (src/mpi_plugin), loaded from
// beside the code of Lanes itself.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/env.h"
#include "bootstrap/bootstrap.h"
#include "mpi_plugin/plugin_abi.h"

namespace lanes {
namespace {

constexpr const char* kPluginName = "liblanes-mpi.so";

bool isSet(const char* name) {
  auto v = envString(name);
  return v && !v->empty();
}

// Rank 0's broadcast: the id, or why it has none, so every rank can say.
struct IdMessage {
  int32_t made;  // lanesResult_t of making the id
  char why[480];
  lanesUniqueId id;
};

// The folder of the file that holds this code: liblanes.so, or a program
// linked with liblanes.a (then the plugin is in ../lib of its bin/).
std::string ownFolder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ownFolder), &info) == 0 || info.dli_fname == nullptr)
    return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

Status loadPlugin(const lanesMpiPlugin** out) {
  std::vector<std::string> tried;
  std::string dir = ownFolder();
  if (!dir.empty()) {
    tried.push_back(dir + "/" + kPluginName);
    tried.push_back(dir + "/../lib/" + kPluginName);
  }
  tried.push_back(kPluginName);  // the loader's search path
  std::string errors;
  for (const std::string& path : tried) {
    // Open MPI's own components expect libmpi's symbols to be global.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (handle == nullptr) {
      const char* e = dlerror();
      if (path == tried.back()) errors = e ? e : path + ": not found";
      continue;
    }
    using Entry = const lanesMpiPlugin* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, "lanesMpiPluginV1"));
    const lanesMpiPlugin* plugin = entry ? entry() : nullptr;
    if (plugin == nullptr || plugin->version != lanesMpiPluginAbiVersion)
      return internalError(path + " is not a Lanes MPI plugin of version " +
                           std::to_string(lanesMpiPluginAbiVersion) + " (another Lanes build?)");
    *out = plugin;
    return Status::ok();
  }
  return invalidArgument(std::string("no ") + kPluginName + " beside Lanes (" + dir +
                         ") or on the " + "library path (" + errors +
                         "); a build without MPI has none");
}

}  // namespace

bool mpiLaunchWithoutRoot(std::string* var) {
  if (isSet("LANES_RANK") || isSet("LANES_ROOT_ADDR") || isSet("MASTER_ADDR")) return false;
  const char* found = isSet("OMPI_COMM_WORLD_SIZE")            ? "OMPI_COMM_WORLD_SIZE"
                      : isSet("PMIX_RANK")                     ? "PMIX_RANK"
                      : isSet("PMI_RANK") && isSet("PMI_SIZE") ? "PMI_RANK"
                      : isSet("MV2_COMM_WORLD_SIZE")           ? "MV2_COMM_WORLD_SIZE"
                                                               : nullptr;
  if (found != nullptr && var != nullptr) *var = found;
  return found != nullptr;
}

int launchLocalRank() {
  for (const char* name : {"LANES_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "SLURM_LOCALID", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK"}) {
    int64_t v = 0;
    auto text = envString(name);
    if (text && parseInt64(*text, &v) && v >= 0 && v < (1 << 24)) return static_cast<int>(v);
  }
  return -1;
}

Status mpiUniqueId(LaunchEnv* env, lanesUniqueId* out) {
  std::string var = "an MPI launcher's variables";
  mpiLaunchWithoutRoot(&var);
  const lanesMpiPlugin* mpi = nullptr;
  Status loaded = loadPlugin(&mpi);
  if (!loaded)
    return Status(loaded.code(),
                  "started by an MPI launcher (" + var +
                      " is set) with no root address, and the unique id cannot go over MPI: " +
                      loaded.message() +
                      ". Give every rank LANES_ROOT_ADDR=host:port (mpirun -x "
                      "LANES_ROOT_ADDR=host:port), or rebuild where CMake finds MPI (Debian: apt "
                      "install libopenmpi-dev)");
  char err[512] = "";
  if (mpi->start(&env->rank, &env->worldSize, err, sizeof(err)) != 0)
    return systemError(std::string("joining over MPI: ") + err);
  env->localRank = launchLocalRank();
  env->source = "mpi";
  IdMessage m{};
  if (env->rank == 0) {
    Status made = createUniqueIdAndRoot("", nullptr, &m.id);
    m.made = static_cast<int32_t>(made.code());
    std::snprintf(m.why, sizeof(m.why), "%s", made.message().c_str());
  }
  if (mpi->broadcast(&m, sizeof(m), err, sizeof(err)) != 0)
    return systemError(std::string("joining over MPI: ") + err);
  if (m.made != lanesSuccess)
    return Status(static_cast<lanesResult_t>(m.made),
                  std::string("rank 0 could not make the unique id: ") + m.why);
  *out = m.id;
  return Status::ok();
}

}  // namespace lanes
