// JSON form of the model: one object per tree node (parent by index), GPUs
// and NICs pointing at their nodes, and the driver's matrices.
#include "topology/json_io.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "topology/discovery.h"

namespace lanes::topo {

namespace {

Json linkJson(const PciLink& l) {
  Json j = Json::object();
  j.set("cur_gen", l.curGen).set("cur_width", l.curWidth);
  j.set("max_gen", l.maxGen).set("max_width", l.maxWidth).set("gbps", l.gbps);
  return j;
}

PciLink linkFrom(const Json& j) {
  PciLink l;
  l.curGen = j["cur_gen"].integer();
  l.curWidth = j["cur_width"].integer();
  l.maxGen = j["max_gen"].integer();
  l.maxWidth = j["max_width"].integer();
  l.gbps = j["gbps"].num();
  if (l.gbps == 0) l.gbps = pcieGbps(l.curGen, l.curWidth);
  return l;
}

Json matrixJson(const std::vector<std::vector<int>>& m) {
  Json out = Json::array();
  for (const auto& row : m) {
    Json r = Json::array();
    for (int v : row) r.push(v);
    out.push(std::move(r));
  }
  return out;
}

void matrixFrom(const Json& j, std::vector<std::vector<int>>* m, int fallback) {
  size_t n = m->size();
  for (size_t a = 0; a < n && a < j.items().size(); ++a)
    for (size_t b = 0; b < n && b < j.items()[a].items().size(); ++b)
      (*m)[a][b] = j.items()[a].items()[b].integer(fallback);
}

// Doubles, for the bandwidth matrix; written only when it holds something,
// so files of boxes without NVLink stay as they were.
Json gbpsJson(const std::vector<std::vector<double>>& m) {
  Json out = Json::array();
  for (const auto& row : m) {
    Json r = Json::array();
    for (double v : row) r.push(v);
    out.push(std::move(r));
  }
  return out;
}

bool anyNonZero(const std::vector<std::vector<double>>& m) {
  for (const auto& row : m)
    for (double v : row)
      if (v != 0) return true;
  return false;
}

void gbpsFrom(const Json& j, std::vector<std::vector<double>>* m) {
  size_t n = m->size();
  for (size_t a = 0; a < n && a < j.items().size(); ++a)
    for (size_t b = 0; b < n && b < j.items()[a].items().size(); ++b)
      (*m)[a][b] = j.items()[a].items()[b].num();
}

Json strings(const std::vector<std::string>& v) {
  Json out = Json::array();
  for (const auto& s : v) out.push(s);
  return out;
}

Json numbers(const std::vector<double>& v) {
  Json out = Json::array();
  for (double x : v) out.push(Json(x));
  return out;
}

std::vector<double> numbersFrom(const Json& j) {
  std::vector<double> out;
  for (const Json& x : j.items()) out.push_back(x.num());
  return out;
}

}  // namespace

Json probesToJson(const Probes& p) {
  Json out = Json::object();
  Json gpus = Json::array();
  for (const GpuProbe& g : p.gpus) {
    Json j = Json::object();
    j.set("gpu", g.gpu).set("h2d_gbps", g.h2d).set("d2h_gbps", g.d2h).set("bidir_gbps", g.bidir);
    // Written when measured, so entries from before these probes read back as they were.
    if (!g.h2dCurve.empty()) j.set("h2d_gbps_by_size", numbers(g.h2dCurve));
    if (!g.d2hCurve.empty()) j.set("d2h_gbps_by_size", numbers(g.d2hCurve));
    if (!g.d2dCurve.empty()) j.set("d2d_gbps_by_size", numbers(g.d2dCurve));
    if (g.flagUs > 0) j.set("flag_us", g.flagUs);
    if (g.launchUs > 0) j.set("launch_us", g.launchUs);
    gpus.push(std::move(j));
  }
  Json pairs = Json::array();
  for (const PairProbe& q : p.pairs) {
    Json j = Json::object();
    j.set("a", q.a).set("b", q.b).set("advertised", q.advertised).set("tested", q.tested);
    j.set("correct", q.correct).set("gbps", q.gbps).set("error", q.error);
    pairs.push(std::move(j));
  }
  out.set("gpus", std::move(gpus)).set("pairs", std::move(pairs));
  out.set("all_h2d_gbps", p.allH2d).set("all_d2h_gbps", p.allD2h);
  out.set("measured_by", p.measuredBy);
  if (p.copyBytes > 0) out.set("copy_bytes", static_cast<double>(p.copyBytes));
  if (p.host.measured()) {
    Json host = Json::object();
    host.set("hop_latency_us", p.host.hopLatencyUs).set("call_us", p.host.callUs);
    if (p.host.stepUs > 0) host.set("step_us", p.host.stepUs);
    if (p.host.rootedUs > 0) host.set("rooted_us", p.host.rootedUs);
    if (p.host.sumUs > 0) host.set("sum_us", p.host.sumUs);
    host.set("hop_gbps_by_size", numbers(p.host.hopGBs))
        .set("reduce_gbps_by_size", numbers(p.host.reduceGBs));
    host.set("mem_gbps", p.host.memGBs).set("exchange_gbps", p.host.exchangeGBs);
    if (p.host.tcpGBs > 0)
      host.set("tcp_latency_us", p.host.tcpLatencyUs).set("tcp_gbps", p.host.tcpGBs);
    if (p.host.crossPackageGBs > 0)
      host.set("cross_package_latency_us", p.host.crossPackageLatencyUs)
          .set("cross_package_gbps", p.host.crossPackageGBs);
    if (p.host.wireEncodeNs[0] > 0) {
      Json wire = Json::object();
      wire.set("bf16_encode", p.host.wireEncodeNs[0])
          .set("bf16_decode_add", p.host.wireDecodeNs[0]);
      wire.set("fp8_encode", p.host.wireEncodeNs[1]).set("fp8_decode_add", p.host.wireDecodeNs[1]);
      host.set("wire_ns_per_value", std::move(wire));
    }
    out.set("host", std::move(host));
  }
  return out;
}

Probes probesFromJson(const Json& j) {
  Probes p;
  for (const Json& g : j["gpus"].items()) {
    GpuProbe r;
    r.gpu = g["gpu"].integer(-1);
    r.h2d = g["h2d_gbps"].num();
    r.d2h = g["d2h_gbps"].num();
    r.bidir = g["bidir_gbps"].num();
    r.h2dCurve = numbersFrom(g["h2d_gbps_by_size"]);
    r.d2hCurve = numbersFrom(g["d2h_gbps_by_size"]);
    r.d2dCurve = numbersFrom(g["d2d_gbps_by_size"]);
    r.flagUs = g["flag_us"].num();
    r.launchUs = g["launch_us"].num();
    p.gpus.push_back(std::move(r));
  }
  for (const Json& q : j["pairs"].items()) {
    PairProbe r;
    r.a = q["a"].integer(-1);
    r.b = q["b"].integer(-1);
    r.advertised = q["advertised"].boolean();
    r.tested = q["tested"].boolean();
    r.correct = q["correct"].boolean();
    r.gbps = q["gbps"].num();
    r.error = q["error"].str();
    p.pairs.push_back(r);
  }
  p.allH2d = j["all_h2d_gbps"].num();
  p.allD2h = j["all_d2h_gbps"].num();
  if (!j["measured_by"].str().empty()) p.measuredBy = j["measured_by"].str();
  p.copyBytes = static_cast<size_t>(j["copy_bytes"].num());
  const Json& host = j["host"];
  p.host.hopLatencyUs = host["hop_latency_us"].num();
  p.host.callUs = host["call_us"].num();
  p.host.stepUs = host["step_us"].num();
  p.host.rootedUs = host["rooted_us"].num();
  p.host.sumUs = host["sum_us"].num();
  p.host.exchangeGBs = host["exchange_gbps"].num();
  p.host.hopGBs = numbersFrom(host["hop_gbps_by_size"]);
  p.host.reduceGBs = numbersFrom(host["reduce_gbps_by_size"]);
  p.host.memGBs = host["mem_gbps"].num();
  p.host.tcpLatencyUs = host["tcp_latency_us"].num();
  p.host.tcpGBs = host["tcp_gbps"].num();
  p.host.crossPackageLatencyUs = host["cross_package_latency_us"].num();
  p.host.crossPackageGBs = host["cross_package_gbps"].num();
  const Json& wire = host["wire_ns_per_value"];
  p.host.wireEncodeNs[0] = wire["bf16_encode"].num();
  p.host.wireDecodeNs[0] = wire["bf16_decode_add"].num();
  p.host.wireEncodeNs[1] = wire["fp8_encode"].num();
  p.host.wireDecodeNs[1] = wire["fp8_decode_add"].num();
  return p;
}

Json toJson(const Topology& t) {
  Json out = Json::object();
  out.set("format", "lanes-topology-1").set("hostname", t.hostname);
  out.set("cores", t.cores).set("pus", t.pus).set("driver_version", t.driverVersion);
  out.set("iommu", iommuName(t.iommu));
  Json nodes = Json::array();
  for (const Node& n : t.nodes) {
    Json j = Json::object();
    j.set("kind", kindName(n.kind)).set("parent", n.parent);
    if (n.osIndex >= 0) j.set("os_index", n.osIndex);
    if (!n.busId.empty()) j.set("bus_id", n.busId);
    if (!n.name.empty()) j.set("name", n.name);
    if (n.vendor || n.device) j.set("vendor", n.vendor).set("device", n.device);
    if (n.link.gbps > 0 || n.link.curWidth > 0) j.set("link", linkJson(n.link));
    if (n.acsRedirect) j.set("acs_redirect", true);
    if (n.chipset) j.set("chipset", true);
    nodes.push(std::move(j));
  }
  out.set("nodes", std::move(nodes));
  Json gpus = Json::array();
  for (const Gpu& g : t.gpus) {
    Json j = Json::object();
    j.set("node", g.node).set("cuda_index", g.cudaIndex).set("bus_id", g.busId);
    j.set("name", g.name).set("numa", g.numa).set("cpus", g.cpus);
    j.set("bar1_bytes", static_cast<double>(g.bar1Bytes));
    j.set("mem_bytes", static_cast<double>(g.memBytes));
    gpus.push(std::move(j));
  }
  out.set("gpus", std::move(gpus));
  Json nics = Json::array();
  for (const Nic& n : t.nics) {
    Json j = Json::object();
    j.set("node", n.node).set("name", n.name).set("netdev", n.netdev).set("rdma", n.rdma);
    j.set("bus_id", n.busId).set("numa", n.numa).set("gbps", n.gbps);
    nics.push(std::move(j));
  }
  out.set("nics", std::move(nics));
  out.set("p2p", matrixJson(t.p2p)).set("nvlinks", matrixJson(t.nvlinks));
  if (anyNonZero(t.nvlinkGbps)) out.set("nvlink_gbps", gbpsJson(t.nvlinkGbps));
  out.set("sources", strings(t.sources)).set("missing", strings(t.missing));
  if (!t.probes.empty()) out.set("probes", probesToJson(t.probes));
  return out;
}

Status fromJson(const Json& j, Topology* out) {
  Topology t;
  if (j["format"].str() != "lanes-topology-1")
    return invalidArgument("not a Lanes topology file (\"format\" is not \"lanes-topology-1\")");
  t.hostname = j["hostname"].str();
  t.cores = j["cores"].integer();
  t.pus = j["pus"].integer();
  t.driverVersion = j["driver_version"].str();
  for (IommuMode m : {IommuMode::Off, IommuMode::Translating, IommuMode::Passthrough})
    if (j["iommu"].str() == iommuName(m)) t.iommu = m;
  const auto& nodes = j["nodes"].items();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Json& n = nodes[i];
    Node node;
    if (!parseKind(n["kind"].str(), &node.kind))
      return invalidArgument("node " + std::to_string(i) + " has unknown kind \"" +
                             n["kind"].str() + "\"");
    node.parent = n["parent"].integer(-1);
    if (node.parent >= static_cast<int>(i) || (node.parent < 0 && i != 0))
      return invalidArgument("node " + std::to_string(i) +
                             " must name an earlier node as parent (only node 0 is the root)");
    node.osIndex = n["os_index"].integer(-1);
    node.busId = n.has("bus_id") ? normalizeBusId(n["bus_id"].str()) : "";
    node.name = n["name"].str();
    node.vendor = static_cast<uint16_t>(n["vendor"].integer());
    node.device = static_cast<uint16_t>(n["device"].integer());
    if (n.has("link")) node.link = linkFrom(n["link"]);
    node.acsRedirect = n["acs_redirect"].boolean();
    node.chipset = n["chipset"].boolean();
    t.nodes.push_back(node);
  }
  auto nodeOk = [&](int n) { return n >= 0 && n < static_cast<int>(t.nodes.size()); };
  for (const Json& g : j["gpus"].items()) {
    Gpu gpu;
    gpu.node = g["node"].integer(-1);
    if (!nodeOk(gpu.node))
      return invalidArgument("a GPU names node " + std::to_string(gpu.node) +
                             ", which does not exist");
    gpu.cudaIndex = g["cuda_index"].integer(-1);
    gpu.busId = normalizeBusId(g["bus_id"].str());
    gpu.name = g["name"].str();
    gpu.numa = g["numa"].integer(-1);
    gpu.cpus = g["cpus"].str();
    gpu.bar1Bytes = g["bar1_bytes"].bytes();
    gpu.memBytes = g["mem_bytes"].bytes();
    t.gpus.push_back(gpu);
  }
  for (const Json& n : j["nics"].items()) {
    Nic nic;
    nic.node = n["node"].integer(-1);
    if (!nodeOk(nic.node))
      return invalidArgument("a NIC names node " + std::to_string(nic.node) +
                             ", which does not exist");
    nic.name = n["name"].str();
    nic.netdev = n["netdev"].str();
    nic.rdma = n["rdma"].str();
    nic.busId = normalizeBusId(n["bus_id"].str());
    nic.numa = n["numa"].integer(-1);
    nic.gbps = n["gbps"].num();
    t.nics.push_back(nic);
  }
  t.resizeMatrices();
  matrixFrom(j["p2p"], &t.p2p, -1);
  matrixFrom(j["nvlinks"], &t.nvlinks, 0);
  gbpsFrom(j["nvlink_gbps"], &t.nvlinkGbps);
  for (const Json& s : j["sources"].items()) t.sources.push_back(s.str());
  for (const Json& s : j["missing"].items()) t.missing.push_back(s.str());
  if (j.has("probes")) t.probes = probesFromJson(j["probes"]);
  finishTopology(&t);  // derived fields (NUMA of devices, chipset bridges) follow the tree
  *out = std::move(t);
  return Status::ok();
}

Status readTextFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return systemError("cannot open " + path + ": " + errnoText(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return Status::ok();
}

Status writeTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return systemError("cannot write " + path + ": " + errnoText(errno));
  f << text;
  f.close();
  if (!f) return systemError("writing " + path + " failed: " + errnoText(errno));
  return Status::ok();
}

Status saveJsonFile(const std::string& path, const Topology& topo) {
  return writeTextFile(path, toJson(topo).dump() + "\n");
}

Status loadJsonFile(const std::string& path, Topology* out) {
  std::string text, error;
  LANES_RETURN_IF_ERROR(readTextFile(path, &text));
  Json j;
  if (!Json::parse(text, &j, &error)) return invalidArgument(path + " is not valid JSON: " + error);
  Status s = fromJson(j, out);
  if (!s) return Status(s.code(), path + ": " + s.message());
  return Status::ok();
}

}  // namespace lanes::topo
