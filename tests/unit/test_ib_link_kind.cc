// Which pairs talk verbs (transport/ibverbs/link_kind.h): ports of one link
// layer only; a pair of InfiniBand and RoCE ports, or one without a port,
// is left to TCP with a line that says which and what to do.
#include <gtest/gtest.h>

#include "transport/ibverbs/link_kind.h"

namespace lanes::ib {
namespace {

TEST(IbLinkKind, OnlyPortsOfOneLinkLayerJoin) {
  EXPECT_TRUE(joinsOverVerbs(LinkKind::InfiniBand, LinkKind::InfiniBand));
  EXPECT_TRUE(joinsOverVerbs(LinkKind::Ethernet, LinkKind::Ethernet));
  EXPECT_FALSE(joinsOverVerbs(LinkKind::InfiniBand, LinkKind::Ethernet));
  EXPECT_FALSE(joinsOverVerbs(LinkKind::Ethernet, LinkKind::InfiniBand));
  EXPECT_FALSE(joinsOverVerbs(LinkKind::Ethernet, LinkKind::None));
  EXPECT_FALSE(joinsOverVerbs(LinkKind::None, LinkKind::None));
  // A byte from a peer of another build that names no kind joins nothing.
  EXPECT_FALSE(joinsOverVerbs(LinkKind::Ethernet, static_cast<LinkKind>(7)));
}

TEST(IbLinkKind, AMismatchedPairIsToldWhichPortsAndWhatToSet) {
  const std::string why = whyNotOverVerbs(LinkKind::Ethernet, LinkKind::InfiniBand, 5);
  EXPECT_NE(why.find("rank 5's port is InfiniBand"), std::string::npos) << why;
  EXPECT_NE(why.find("this rank's RoCE (Ethernet)"), std::string::npos) << why;
  EXPECT_NE(why.find("uses TCP"), std::string::npos) << why;
  EXPECT_NE(why.find("LANES_IB_HCA"), std::string::npos) << why;
  EXPECT_EQ(whyNotOverVerbs(LinkKind::InfiniBand, LinkKind::None, 2),
            "rank 2 has no usable RDMA port: the pair uses TCP");
  const std::string unknown = whyNotOverVerbs(LinkKind::Ethernet, static_cast<LinkKind>(7), 3);
  EXPECT_NE(unknown.find("another Lanes build"), std::string::npos) << unknown;
  // Nothing to say where the pair joins, or where this rank has no port
  // (the transport said that once, not per peer).
  EXPECT_EQ(whyNotOverVerbs(LinkKind::InfiniBand, LinkKind::InfiniBand, 1), "");
  EXPECT_EQ(whyNotOverVerbs(LinkKind::None, LinkKind::InfiniBand, 1), "");
}

}  // namespace
}  // namespace lanes::ib
