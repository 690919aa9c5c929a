// Probe cache: one JSON file holding probe results per topology hash, so a
// home directory shared by several machines keeps each machine's figures.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/env.h"
#include "base/log.h"
#include "topology/json_io.h"
#include "topology/probe.h"

namespace lanes::topo {

std::string topologyHash(const Topology& t) {
  std::string key = t.hostname + "|" + t.driverVersion + "|" + std::to_string(t.cores) + "c" +
                    std::to_string(t.pus) + "t" + std::to_string(t.numaCount()) + "n";
  for (const Gpu& g : t.gpus) {
    const PciLink& l = t.nodes[g.node].link;
    key += "|" + g.busId + "," + g.name + "," + std::to_string(g.cudaIndex) + "," +
           std::to_string(l.maxGen) + "x" + std::to_string(l.maxWidth) + "," +
           std::to_string(l.curWidth);
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  char buf[24];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string probeCachePath() {
  auto v = envString("LANES_TOPO_CACHE");
  if (v) return (*v == "0" || *v == "none") ? "" : *v;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/lanes/topo_probes.json";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/lanes/topo_probes.json";
  return "";
}

namespace {

Json readCache(const std::string& path) {
  std::string text, error;
  Json j;
  if (!readTextFile(path, &text) || !Json::parse(text, &j, &error) ||
      j["format"].str() != "lanes-topo-cache-1")
    return Json::object();
  return j;
}

}  // namespace

bool loadCachedProbes(const std::string& path, Topology* t) {
  if (path.empty()) return false;
  Json entry = readCache(path)["entries"][topologyHash(*t)];
  if (entry.isNull()) return false;
  Probes p = probesFromJson(entry);
  for (const GpuProbe& g : p.gpus)
    if (g.gpu < 0 || g.gpu >= static_cast<int>(t->gpus.size())) return false;
  t->probes = std::move(p);
  LANES_INFO(Topo, -1, "topology: probe results from %s", path.c_str());
  return true;
}

Status saveCachedProbes(const std::string& path, const Topology& t) {
  if (path.empty()) return Status::ok();
  Json cache = readCache(path);
  Json entries = cache["entries"].isNull() ? Json::object() : cache["entries"];
  entries.set(topologyHash(t), probesToJson(t.probes));
  Json out = Json::object();
  out.set("format", "lanes-topo-cache-1").set("entries", std::move(entries));
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  // Write a sibling and rename: a reader at init never sees half a file.
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  LANES_RETURN_IF_ERROR(writeTextFile(tmp, out.dump() + "\n"));
  std::filesystem::rename(tmp, path, ec);
  if (ec) return systemError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::ok();
}

}  // namespace lanes::topo
