// The verbs transport on a real device: soft-RoCE in the guest of
// tests/rdma/guest.sh. Thread-ranks of this process, each its own "host",
// connect through rxe0 and stream patterned bytes on every lane at once
// (tests/unit/transport_streams.h), with rings from one slot to many and one
// to three queue pairs; the port choice; pairs without a port falling to the
// next transport; settings that disagree; a closed peer failing the other
// side. Skips where no RDMA port is there (outside the guest).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/ib_port_choice.h"
#include "tests/common/scoped_env.h"
#include "tests/unit/fake_bootstrap.h"
#include "tests/unit/transport_streams.h"
#include "topology/rdma_ports.h"
#include "transport/transport.h"

namespace lanes::testing {
namespace {

using test::ScopedEnv;

// The port a communicator would choose here; skips the test where none.
#define CHOOSE_PORT_OR_SKIP(ib)                                      \
  do {                                                               \
    chooseIbPort(topo::readRdmaPorts(), topo::Topology{}, -1, (ib)); \
    if ((ib)->device.empty()) GTEST_SKIP() << (ib)->unavailable;     \
  } while (0)

AdjustConfig onChosenPort(const IbConfig& chosen) {
  return [chosen](int, TransportConfig* c) {
    c->ib.device = chosen.device;
    c->ib.port = chosen.port;
    c->ib.gidIndex = chosen.gidIndex;
  };
}

const std::vector<size_t> kSizes = {1,        15,    16,     17,     100,    1000, 4095,
                                    4096,     65537, 131072, 131088, 300000, 24,   (1u << 20) + 3,
                                    3u << 20, 8};

void expectTransports(const std::vector<RankConnections>& conns, int lanes) {
  for (size_t r = 0; r < conns.size(); ++r) {
    ASSERT_TRUE(conns[r].status.isOk()) << "rank " << r << ": " << conns[r].status.message();
    for (auto& c : conns[r].owned) {
      ASSERT_NE(c, nullptr) << "rank " << r << " has no verbs connection to a peer";
      EXPECT_STREQ(c->transportName(), "ib");
      EXPECT_EQ(c->lanes(), lanes);
    }
  }
}

TEST(IbPortChoice, PicksTheSoftRocePortAndItsIpv4Gid) {
  IbConfig ib;
  CHOOSE_PORT_OR_SKIP(&ib);
  EXPECT_EQ(ib.device, "rxe0");
  EXPECT_EQ(ib.port, 1);
  const auto ports = topo::readRdmaPorts();
  ASSERT_FALSE(ports.empty());
  bool found = false;
  for (const auto& g : ports.front().gids)
    if (g.index == ib.gidIndex) {
      found = true;
      EXPECT_EQ(g.type, "RoCE v2");
      EXPECT_EQ(g.text(), "::ffff:10.77.0.1");
    }
  EXPECT_TRUE(found) << "GID " << ib.gidIndex << " is not in the port's table";
}

TEST(IbPortChoice, SaysWhyNoPortIsUsed) {
  IbConfig probe;
  CHOOSE_PORT_OR_SKIP(&probe);
  const auto ports = topo::readRdmaPorts();
  for (const char* spec : {"^rxe", "=rxe", "mlx5", "rxe0:2"}) {
    IbConfig ib;
    ib.hca = spec;
    chooseIbPort(ports, topo::Topology{}, -1, &ib);
    EXPECT_EQ(ib.device, "") << spec;
    EXPECT_NE(ib.unavailable.find(std::string("LANES_IB_HCA=") + spec), std::string::npos)
        << ib.unavailable;
  }
  IbConfig forced;
  forced.forcedGid = 200;
  chooseIbPort(ports, topo::Topology{}, -1, &forced);
  EXPECT_EQ(forced.device, "");
  IbConfig off;
  off.disabled = true;
  chooseIbPort(ports, topo::Topology{}, -1, &off);
  EXPECT_NE(off.unavailable.find("LANES_IB_DISABLE"), std::string::npos);
}

struct StreamCase {
  int ranks;
  const char* ringBytes;
  const char* slotBytes;
  const char* qps;
};

class IbStreams : public ::testing::TestWithParam<StreamCase> {};

TEST_P(IbStreams, AllLanesDeliverBytesInOrder) {
  const StreamCase c = GetParam();
  IbConfig chosen;
  CHOOSE_PORT_OR_SKIP(&chosen);
  ScopedEnv ring("LANES_IB_RING_BYTES", c.ringBytes);
  ScopedEnv slot("LANES_IB_SLOT_BYTES", c.slotBytes);
  ScopedEnv qps("LANES_IB_QPS_PER_CONNECTION", c.qps);
  FakeBootstrapGroup group(c.ranks, /*sameHost=*/false);
  auto conns = connectAll(group, makeIbTransport, /*lanes=*/3, 60, onChosenPort(chosen));
  expectTransports(conns, 3);
  auto errors = exchangeAll(group, conns, kSizes, 240);
  for (int r = 0; r < c.ranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// The defaults; many small slots over three queue pairs; a ring of one slot,
// where every post waits for the reader's grant.
INSTANTIATE_TEST_SUITE_P(Ranks, IbStreams,
                         ::testing::Values(StreamCase{2, "1M", "128K", "2"},
                                           StreamCase{3, "64K", "4K", "3"},
                                           StreamCase{4, "16K", "4K", "1"},
                                           StreamCase{2, "4K", "4K", "1"}),
                         [](const ::testing::TestParamInfo<StreamCase>& info) {
                           return std::to_string(info.param.ranks) + "ranks_ring" +
                                  info.param.ringBytes + "_slot" + info.param.slotBytes + "_qps" +
                                  info.param.qps;
                         });

TEST(IbTransport, PairsWithoutAPortAreLeftToTheNextTransport) {
  IbConfig chosen;
  CHOOSE_PORT_OR_SKIP(&chosen);
  FakeBootstrapGroup group(3, /*sameHost=*/false);
  auto conns = connectAll(group, makeIbTransport, 2, 60, [&](int rank, TransportConfig* c) {
    if (rank == 2) return;  // no port chosen: as on a host without a NIC
    onChosenPort(chosen)(rank, c);
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(conns[r].status.isOk()) << conns[r].status.message();
    ASSERT_EQ(conns[r].owned.size(), 2u);
  }
  // Rank r's peers are the others in order: rank 0 {1, 2}, rank 1 {0, 2}.
  ASSERT_NE(conns[0].owned[0], nullptr);
  EXPECT_STREQ(conns[0].owned[0]->transportName(), "ib");
  ASSERT_NE(conns[1].owned[0], nullptr);
  EXPECT_EQ(conns[0].owned[1], nullptr);
  EXPECT_EQ(conns[1].owned[1], nullptr);
  EXPECT_EQ(conns[2].owned[0], nullptr);
  EXPECT_EQ(conns[2].owned[1], nullptr);
}

// A rank whose queue pairs cannot be made (here: more work requests than the
// device allows, as a locked-memory limit would fail the registration)
// says so and its pairs go to the next transport; nobody fails.
TEST(IbTransport, ALocalSetupFailureLeavesThePairsToTheNextTransport) {
  IbConfig chosen;
  CHOOSE_PORT_OR_SKIP(&chosen);
  FakeBootstrapGroup group(3, /*sameHost=*/false);
  auto conns = connectAll(group, makeIbTransport, 64, 60, [&](int rank, TransportConfig* c) {
    onChosenPort(chosen)(rank, c);
    c->ib.qpsPerPeer = 1;
    c->ib.slotBytes = 4096;
    c->ib.ringBytes = rank == 2 ? 256 * 4096 : 8 * 4096;  // rank 2: 32768 sends per queue pair
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(conns[r].status.isOk()) << conns[r].status.message();
    ASSERT_EQ(conns[r].owned.size(), 2u);
  }
  ASSERT_NE(conns[0].owned[0], nullptr);  // ranks 0 and 1 still talk verbs
  EXPECT_STREQ(conns[0].owned[0]->transportName(), "ib");
  EXPECT_EQ(conns[0].owned[1], nullptr);
  EXPECT_EQ(conns[1].owned[1], nullptr);
  EXPECT_EQ(conns[2].owned[0], nullptr);
  EXPECT_EQ(conns[2].owned[1], nullptr);
}

TEST(IbTransport, RanksThatDisagreeOnTheShapeAllFail) {
  IbConfig chosen;
  CHOOSE_PORT_OR_SKIP(&chosen);
  FakeBootstrapGroup group(2, /*sameHost=*/false);
  auto conns = connectAll(group, makeIbTransport, 2, 60, [&](int rank, TransportConfig* c) {
    onChosenPort(chosen)(rank, c);
    if (rank == 1) c->ib.slotBytes = c->ib.slotBytes / 2;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(conns[r].status.isOk()) << "rank " << r;
    EXPECT_NE(conns[r].status.message().find("LANES_IB_SLOT_BYTES"), std::string::npos)
        << conns[r].status.message();
  }
}

// A peer that closes its side (abort) stops answering: the other side's
// next writes exhaust their retries and fail, naming the peer, well inside
// the deadline; the closed side's own ports fail at once.
TEST(IbTransport, AClosedPeerFailsTheOtherSide) {
  IbConfig chosen;
  CHOOSE_PORT_OR_SKIP(&chosen);
  ScopedEnv timeout("LANES_IB_TIMEOUT", "10");  // 4 ms per try
  ScopedEnv retries("LANES_IB_RETRY_CNT", "1");
  FakeBootstrapGroup group(2, /*sameHost=*/false);
  auto conns = connectAll(group, makeIbTransport, 1, 60, onChosenPort(chosen));
  expectTransports(conns, 1);
  Connection& closed = *conns[0].owned[0];
  Connection& open = *conns[1].owned[0];
  closed.close();
  std::vector<uint8_t> data(4096, 7);
  size_t taken = 0;
  Status st = closed.sendPort(0).post(data.data(), data.size(), &taken);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("closed"), std::string::npos) << st.message();

  const auto start = std::chrono::steady_clock::now();
  Status failed;
  while (failed.isOk() && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    failed = open.sendPort(0).post(data.data(), data.size(), &taken);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_FALSE(failed.isOk()) << "writes to a closed peer still succeed after 30 s";
  EXPECT_NE(failed.message().find("peer rank 0"), std::string::npos) << failed.message();
  EXPECT_NE(failed.message().find("failed"), std::string::npos) << failed.message();
  std::span<const std::byte> view;
  EXPECT_FALSE(open.recvPort(0).peek(&view).isOk());
}

// Ports that cannot reach each other (other fabrics, unrouted subnets):
// rxe0 and rxe1 sit on two veths that are not joined (tests/rdma/ib_tests.sh
// makes rxe1), and soft-RoCE delivers nothing from one to the other. The
// probes find that out at init: the pair goes to the next transport on both
// ranks, nobody fails, and the probe's deadline bounds the wait.
TEST(IbTransport, PortsThatCannotReachEachOtherLeaveThePairToTheNextTransport) {
  const auto ports = topo::readRdmaPorts();
  if (ports.empty()) GTEST_SKIP() << "no RDMA port here (this test runs in tests/rdma/guest.sh)";
  IbConfig first, second;
  first.hca = "=rxe0";
  second.hca = "=rxe1";
  chooseIbPort(ports, topo::Topology{}, -1, &first);
  chooseIbPort(ports, topo::Topology{}, -1, &second);
  ASSERT_EQ(first.device, "rxe0") << first.unavailable;
  ASSERT_EQ(second.device, "rxe1")
      << second.unavailable << " (tests/rdma/ib_tests.sh makes rxe1 on veth2)";
  ScopedEnv timeout("LANES_IB_TIMEOUT", "10");  // 4 ms per try
  ScopedEnv retries("LANES_IB_RETRY_CNT", "1");
  FakeBootstrapGroup group(2, /*sameHost=*/false);
  const auto start = std::chrono::steady_clock::now();
  auto conns = connectAll(group, makeIbTransport, 1, 60, [&](int rank, TransportConfig* c) {
    onChosenPort(rank == 0 ? first : second)(rank, c);
  });
  const auto took = std::chrono::steady_clock::now() - start;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(conns[r].status.isOk()) << "rank " << r << ": " << conns[r].status.message();
    ASSERT_EQ(conns[r].owned.size(), 1u);
    EXPECT_EQ(conns[r].owned[0], nullptr) << "rank " << r << " kept a verbs pair it cannot use";
  }
  EXPECT_LT(took, std::chrono::seconds(25)) << "the probes' deadline is 20 s";
}

}  // namespace
}  // namespace lanes::testing
