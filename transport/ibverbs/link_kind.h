// Which pairs of ranks talk verbs: a queue pair joins two ports of one link
// layer (InfiniBand addresses its peer by LID, RoCE by GID), so a rank whose
// port is InfiniBand and one whose port is Ethernet (RoCE) cannot reach each
// other over verbs, however both are set up; that pair, and any pair where a
// rank has no usable port, is left to TCP. Each rank's kind crosses the
// bootstrap as one byte.
#pragma once

#include <cstdint>
#include <string>

namespace lanes::ib {

enum class LinkKind : uint8_t { None = 0, InfiniBand = 1, Ethernet = 2 };

inline const char* linkKindName(LinkKind k) {
  switch (k) {
    case LinkKind::InfiniBand:
      return "InfiniBand";
    case LinkKind::Ethernet:
      return "RoCE (Ethernet)";
    case LinkKind::None:
      break;
  }
  return "none";
}

inline bool joinsOverVerbs(LinkKind mine, LinkKind theirs) {
  return mine != LinkKind::None && mine == theirs;
}

// Why this rank (with a port of kind `mine`) and `peer` (kind `theirs`) do
// not talk verbs, for an INFO line; empty where they do, or where this rank
// has no port (the transport said so once already).
inline std::string whyNotOverVerbs(LinkKind mine, LinkKind theirs, int peer) {
  if (mine == LinkKind::None || joinsOverVerbs(mine, theirs)) return {};
  const std::string who = "rank " + std::to_string(peer);
  if (theirs == LinkKind::None) return who + " has no usable RDMA port: the pair uses TCP";
  if (theirs != LinkKind::InfiniBand && theirs != LinkKind::Ethernet)
    return who +
           " sent a port kind this build does not know (another Lanes build?): the pair "
           "uses TCP";
  return who + "'s port is " + linkKindName(theirs) + " and this rank's " + linkKindName(mine) +
         ", which verbs cannot join: the pair uses TCP (choose ports of one link layer with "
         "LANES_IB_HCA for RDMA between them)";
}

}  // namespace lanes::ib
