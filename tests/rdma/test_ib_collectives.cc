// Collectives through the public API with every pair of ranks on verbs:
// forked processes, each its own "host" (LANES_HOSTID), in the soft-RoCE
// guest (tests/rdma/guest.sh). Every datatype and reduction on odd counts
// and zero, in place and not (tests/multi/reduction_matrix.h), then a
// broadcast from a non-zero root and a ring of sends and receives; each
// rank first checks that its peers are reached over "ib". A rank killed in
// the middle fails the others' next call, naming it. Skips where no RDMA
// port is there.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/ib_port_choice.h"
#include "tests/multi/harness.h"
#include "tests/multi/reduction_matrix.h"
#include "topology/rdma_ports.h"

namespace lanes::test {
namespace {

bool haveRdmaPort(std::string* why) {
  IbConfig ib;
  chooseIbPort(topo::readRdmaPorts(), topo::Topology{}, -1, &ib);
  *why = ib.unavailable;
  return !ib.device.empty();
}

#define SKIP_WITHOUT_RDMA()                       \
  do {                                            \
    std::string why;                              \
    if (!haveRdmaPort(&why)) GTEST_SKIP() << why; \
  } while (0)

void expectVerbsPeers(lanesComm_t comm, int rank, int nranks) {
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    const Connection* c = comm->links.connections[static_cast<size_t>(p)].get();
    RANK_CHECK(c != nullptr && std::strcmp(c->transportName(), "ib") == 0,
               "peer %d is reached over %s, not ib", p, c ? c->transportName() : "nothing");
  }
}

void broadcastAndSendRecv(lanesComm_t comm, int rank, int nranks) {
  const size_t count = 300007;
  const int root = nranks - 1;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = rank == root ? static_cast<float>(i % 1000) : -1.f;
  RANK_CHECK_LANES(
      lanesBroadcast(data.data(), data.data(), count, lanesFloat32, root, comm, nullptr), comm);
  for (size_t i = 0; i < count; ++i)
    RANK_CHECK(data[i] == static_cast<float>(i % 1000), "broadcast element %zu is %f", i,
               static_cast<double>(data[i]));
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  std::vector<int32_t> send(count + 3), recv(count + 3, -1);
  for (size_t i = 0; i < send.size(); ++i) send[i] = rank * 1000003 + static_cast<int32_t>(i);
  RANK_CHECK_LANES(lanesGroupStart(), comm);
  RANK_CHECK_LANES(lanesSend(send.data(), send.size(), lanesInt32, next, comm, nullptr), comm);
  RANK_CHECK_LANES(lanesRecv(recv.data(), recv.size(), lanesInt32, prev, comm, nullptr), comm);
  RANK_CHECK_LANES(lanesGroupEnd(), comm);
  for (size_t i = 0; i < recv.size(); ++i)
    RANK_CHECK(recv[i] == prev * 1000003 + static_cast<int32_t>(i), "recv element %zu is %d", i,
               recv[i]);
}

void runOnVerbs(int n, const std::vector<size_t>& counts) {
  // The guest is emulated and may share its host's cores with other tests:
  // hundreds of calls take minutes there.
  RunOptions options;
  options.watchdogSeconds = 400;
  runForked(
      n,
      [&](int rank, int nranks, const lanesUniqueId& id) {
        ::setenv("LANES_HOSTID", ("lanes-ib-host-" + std::to_string(rank)).c_str(), 1);
        CommGuard comm(initComm(rank, nranks, id));
        expectVerbsPeers(comm.get(), rank, nranks);
        runReductionMatrix(comm.get(), rank, nranks, counts, [](lanesComm_t, const char*) {});
        broadcastAndSendRecv(comm.get(), rank, nranks);
      },
      options);
}

TEST(IbCollectives, TwoHosts) {
  SKIP_WITHOUT_RDMA();
  runOnVerbs(2, {0, 1, 7, 1025, 100003});
}

TEST(IbCollectives, ThreeHosts) {
  SKIP_WITHOUT_RDMA();
  runOnVerbs(3, {7, 100003});
}

// Rank 2 dies a second after the first all-reduce; the others' second one fails
// with an error that names it, long before the library's deadline.
TEST(IbCollectives, AKilledRankFailsTheOthersNamingIt) {
  SKIP_WITHOUT_RDMA();
  RunOptions options;
  options.env.push_back({"LANES_TIMEOUT", "60"});
  ForkedRanks ranks;
  ranks.start(
      3,
      [](int rank, int nranks, const lanesUniqueId& id) {
        ::setenv("LANES_HOSTID", ("lanes-ib-host-" + std::to_string(rank)).c_str(), 1);
        lanesComm_t comm = initComm(rank, nranks, id);
        std::vector<float> buf(1 << 20, 1.f);
        RANK_CHECK_LANES(lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32, lanesSum,
                                        comm, nullptr),
                         comm);
        // Its last writes are then delivered: a killed process's unsent ones are lost.
        if (rank == 2) {
          ::sleep(1);
          ::kill(::getpid(), SIGKILL);
        }
        const int64_t start = monotonicNs();
        lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32,
                                           lanesSum, comm, nullptr);
        const double seconds = static_cast<double>(monotonicNs() - start) / 1e9;
        RANK_CHECK(res != lanesSuccess, "the all-reduce with a dead rank succeeded");
        const std::string error = lanesGetLastError(comm);
        RANK_CHECK(error.find("rank 2") != std::string::npos, "the error does not name rank 2: %s",
                   error.c_str());
        RANK_CHECK(seconds < 30, "the failure took %.1f s", seconds);
        lanesCommAbort(comm);
      },
      options);
  for (const RankOutcome& o : ranks.wait()) {
    if (o.rank == 2)
      EXPECT_TRUE(o.finished && !o.exited && o.signal == SIGKILL) << o.describe();
    else
      EXPECT_TRUE(o.finished && o.exited && o.exitCode == 0) << o.describe();
  }
}

}  // namespace
}  // namespace lanes::test
