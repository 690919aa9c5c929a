// Picking local interfaces by NCCL's SOCKET_IFNAME syntax.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "base/env.h"
#include "base/socket.h"

namespace lanes {
namespace {

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool isLinkLocalV6(const sockaddr* sa) {
  if (sa->sa_family != AF_INET6) return false;
  const auto* a = reinterpret_cast<const sockaddr_in6*>(sa);
  return IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr);
}

}  // namespace

bool interfaceMatches(const std::string& spec, const std::string& name) {
  if (spec.empty()) return true;
  size_t pos = 0;
  bool exclude = spec[pos] == '^';
  if (exclude) ++pos;
  bool exact = pos < spec.size() && spec[pos] == '=';
  if (exact) ++pos;
  bool listed = false;
  for (const std::string& item : splitList(spec.substr(pos))) {
    if (exact ? name == item : name.compare(0, item.size(), item) == 0) {
      listed = true;
      break;
    }
  }
  return exclude ? !listed : listed;
}

Status findInterfaces(const std::string& ifnameSpec, std::vector<InterfaceAddress>* out) {
  out->clear();
  int wantFamily = AF_UNSPEC;
  if (auto fam = envString("LANES_SOCKET_FAMILY")) {
    if (*fam == "AF_INET" || *fam == "4")
      wantFamily = AF_INET;
    else if (*fam == "AF_INET6" || *fam == "6")
      wantFamily = AF_INET6;
    else
      return invalidArgument("LANES_SOCKET_FAMILY=" + *fam + " is not AF_INET or AF_INET6");
  }
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) return systemError("getifaddrs failed: " + errnoText(errno));
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> list(raw, &freeifaddrs);

  std::vector<InterfaceAddress> preferred, loopback;
  std::string seen;
  for (const ifaddrs* ifa = list.get(); ifa; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (wantFamily != AF_UNSPEC && family != wantFamily) continue;
    // Link-local IPv6 needs a scope id that a unique id cannot carry.
    if (isLinkLocalV6(ifa->ifa_addr)) continue;
    std::string name = ifa->ifa_name;
    if (seen.find(" " + name + " ") == std::string::npos) seen += " " + name + " ";
    bool isLoopback = ifa->ifa_flags & IFF_LOOPBACK;
    if (!ifnameSpec.empty()) {
      if (!interfaceMatches(ifnameSpec, name)) continue;
    } else if (!isLoopback && interfaceMatches("docker,virbr,veth", name)) {
      continue;  // NCCL's default skips container bridges
    }
    InterfaceAddress ia;
    ia.name = name;
    ia.address.length =
        family == AF_INET ? sizeof(sockaddr_in) : static_cast<socklen_t>(sizeof(sockaddr_in6));
    std::memcpy(&ia.address.storage, ifa->ifa_addr, ia.address.length);
    ia.address.setPort(0);
    (isLoopback ? loopback : preferred).push_back(ia);
  }
  // IPv4 before IPv6 within each group, keeping getifaddrs order otherwise.
  auto byFamily = [](const InterfaceAddress& a, const InterfaceAddress& b) {
    return a.address.family() == AF_INET && b.address.family() != AF_INET;
  };
  std::stable_sort(preferred.begin(), preferred.end(), byFamily);
  std::stable_sort(loopback.begin(), loopback.end(), byFamily);
  *out = std::move(preferred);
  out->insert(out->end(), loopback.begin(), loopback.end());
  if (out->empty())
    return invalidArgument("no network interface matches LANES_SOCKET_IFNAME='" + ifnameSpec + "'" +
                           (wantFamily != AF_UNSPEC ? " and LANES_SOCKET_FAMILY" : "") +
                           "; interfaces that are up:" + (seen.empty() ? " none" : seen));
  return Status::ok();
}

}  // namespace lanes
