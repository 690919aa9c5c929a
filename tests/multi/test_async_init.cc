// Communicator creation in the background (config.blocking = 0, init inside a
// group), init from several ids, and the calls that end a group without running
// it (lanesGroupSimulateEnd) or only promise something about buffers
// (registration, lanesMemAlloc).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

lanesConfig_t nonBlocking() {
  lanesConfig_t config = LANES_CONFIG_INITIALIZER;
  config.timeoutSeconds = rankTimeoutSeconds();
  config.blocking = 0;
  return config;
}

// Polls lanesCommGetAsyncError until the init ends; returns what it ended with.
lanesResult_t awaitReady(lanesComm_t comm, int* polls) {
  lanesResult_t state = lanesInProgress;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(rankTimeoutSeconds());
  while (state == lanesInProgress && std::chrono::steady_clock::now() < deadline) {
    RANK_CHECK_LANES(lanesCommGetAsyncError(comm, &state), comm);
    ++*polls;
    if (state == lanesInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

void checkSum(lanesComm_t comm, int rank, int n) {
  std::vector<float> data(1001, static_cast<float>(rank + 1));
  RANK_CHECK_LANES(
      lanesAllReduce(data.data(), data.data(), data.size(), lanesFloat32, lanesSum, comm, nullptr),
      comm);
  const float expected = n * (n + 1) / 2.0f;
  for (float v : data) RANK_CHECK(v == expected, "all-reduce gave %g, expected %g", v, expected);
}

// The last rank arrives late, so the others' inits are still running when
// they return: they must say lanesInProgress, and GetAsyncError must follow.
TEST(AsyncInit, NonBlockingReturnsInProgressThenSucceeds) {
  runForked(3, [](int rank, int n, const lanesUniqueId& id) {
    if (rank == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    lanesConfig_t config = nonBlocking();
    lanesComm_t raw = nullptr;
    lanesResult_t r = lanesCommInitRankConfig(&raw, n, id, rank, &config);
    CommGuard comm(raw);
    RANK_CHECK(r == lanesInProgress, "non-blocking init returned %d, expected lanesInProgress",
               static_cast<int>(r));
    RANK_CHECK(raw != nullptr, "non-blocking init gave no handle");
    int count = -1, me = -1;
    RANK_CHECK_LANES(lanesCommCount(raw, &count), raw);  // queries work at once
    RANK_CHECK_LANES(lanesCommUserRank(raw, &me), raw);
    RANK_CHECK(count == n && me == rank, "count %d rank %d during init", count, me);
    int polls = 0;
    lanesResult_t state = awaitReady(raw, &polls);
    RANK_CHECK(state == lanesSuccess, "init ended with %d: %s", static_cast<int>(state),
               lanesGetLastError(raw));
    if (rank < n - 1) RANK_CHECK(polls > 1, "init was never seen in progress");
    checkSum(raw, rank, n);
  });
}

// A collective issued before the init ended waits for it instead of failing.
TEST(AsyncInit, CallsWaitForTheInit) {
  runForked(2, [](int rank, int n, const lanesUniqueId& id) {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    lanesConfig_t config = nonBlocking();
    lanesComm_t raw = nullptr;
    lanesResult_t r = lanesCommInitRankConfig(&raw, n, id, rank, &config);
    CommGuard comm(raw);
    RANK_CHECK(r == lanesInProgress, "init returned %d", static_cast<int>(r));
    checkSum(raw, rank, n);
  });
}

// A non-blocking init that cannot complete (the other rank never comes) ends
// with an error that GetAsyncError reports, lanesGetLastError explains, and
// later calls return.
TEST(AsyncInit, FailedInitIsReportedAsync) {
  RunOptions options;
  options.env = {{"LANES_BOOTSTRAP_TIMEOUT", "2"}};
  runForked(
      2,
      [](int rank, int n, const lanesUniqueId& id) {
        if (rank == 1) return;  // never joins
        lanesConfig_t config = nonBlocking();
        config.timeoutSeconds = 2;
        lanesComm_t raw = nullptr;
        lanesResult_t r = lanesCommInitRankConfig(&raw, n, id, rank, &config);
        RANK_CHECK(r == lanesInProgress, "init returned %d", static_cast<int>(r));
        int polls = 0;
        lanesResult_t state = awaitReady(raw, &polls);
        RANK_CHECK(state != lanesSuccess && state != lanesInProgress,
                   "an init whose peer never came ended with %d", static_cast<int>(state));
        std::vector<float> x(4, 1.0f);
        lanesResult_t call =
            lanesAllReduce(x.data(), x.data(), 4, lanesFloat32, lanesSum, raw, nullptr);
        RANK_CHECK(call == state, "a call on the failed communicator returned %d, expected %d",
                   static_cast<int>(call), static_cast<int>(state));
        RANK_CHECK(std::strstr(lanesGetLastError(raw), "could not be created") != nullptr, "%s",
                   lanesGetLastError(raw));
        RANK_CHECK_LANES(lanesCommDestroy(raw), nullptr);
      },
      options);
}

// lanesCommAbort during a non-blocking init whose peer never comes returns at
// once, and so does a call that was waiting for the init.
TEST(AsyncInit, AbortDuringInitIsPrompt) {
  runForked(2, [](int rank, int n, const lanesUniqueId& id) {
    if (rank == 1) return;  // never joins: the init would wait for the bootstrap timeout
    lanesConfig_t config = nonBlocking();
    lanesComm_t raw = nullptr;
    lanesResult_t r = lanesCommInitRankConfig(&raw, n, id, rank, &config);
    RANK_CHECK(r == lanesInProgress, "init returned %d", static_cast<int>(r));
    lanesResult_t waited = lanesSuccess;
    std::thread caller([&] {
      std::vector<float> x(4, 1.0f);
      waited = lanesAllReduce(x.data(), x.data(), 4, lanesFloat32, lanesSum, raw, nullptr);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto start = std::chrono::steady_clock::now();
    RANK_CHECK_LANES(lanesCommAbort(raw), nullptr);
    caller.join();
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RANK_CHECK(took < 3, "abort and the waiting call took %.1f s", took);
    RANK_CHECK(waited != lanesSuccess, "the call waiting for an aborted init succeeded");
    lanesResult_t state = lanesSuccess;
    RANK_CHECK(lanesCommGetAsyncError(raw, &state) == lanesInvalidArgument,
               "the aborted handle is still live");
  });
}

// One thread creates every rank of a communicator inside a group (NCCL's way of
// driving several GPUs from one thread): lanesGroupEnd returns once all are ready.
TEST(AsyncInit, InitInsideGroupFromOneThread) {
  lanesUniqueId id;
  ASSERT_EQ(lanesGetUniqueId(&id), lanesSuccess) << lanesGetLastError(nullptr);
  constexpr int n = 3;
  std::vector<lanesComm_t> comms(n, nullptr);
  Watchdog watchdog(60, "InitInsideGroupFromOneThread");
  ASSERT_EQ(lanesGroupStart(), lanesSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(lanesCommInitRank(&comms[r], n, id, r), lanesSuccess) << lanesGetLastError(nullptr);
  ASSERT_EQ(lanesGroupEnd(), lanesSuccess) << lanesGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    lanesResult_t state = lanesInProgress;
    ASSERT_EQ(lanesCommGetAsyncError(comms[r], &state), lanesSuccess);
    EXPECT_EQ(state, lanesSuccess) << "rank " << r << " not ready after lanesGroupEnd";
  }
  std::vector<std::vector<int32_t>> data(n, std::vector<int32_t>(17));
  ASSERT_EQ(lanesGroupStart(), lanesSuccess);
  for (int r = 0; r < n; ++r) {
    std::fill(data[r].begin(), data[r].end(), r + 1);
    ASSERT_EQ(
        lanesAllReduce(data[r].data(), data[r].data(), 17, lanesInt32, lanesSum, comms[r], nullptr),
        lanesSuccess);
  }
  ASSERT_EQ(lanesGroupEnd(), lanesSuccess) << lanesGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(data[r][16], 6) << "rank " << r;
    EXPECT_EQ(lanesCommDestroy(comms[r]), lanesSuccess);
  }
}

// Several ids: the first serves; every rank passes the same list. Rank 1 made
// the second id in its own process, as NCCL's scalable init spreads them.
TEST(ScalableInit, TwoIdsOneRendezvous) {
  lanesUniqueId ids[2];
  ASSERT_EQ(lanesGetUniqueId(&ids[0]), lanesSuccess);
  ASSERT_EQ(lanesGetUniqueId(&ids[1]), lanesSuccess);
  runForked(3, [&ids](int rank, int n, const lanesUniqueId&) {
    lanesConfig_t config = LANES_CONFIG_INITIALIZER;
    config.timeoutSeconds = rankTimeoutSeconds();
    lanesComm_t raw = nullptr;
    lanesUniqueId copy[2] = {ids[0], ids[1]};
    RANK_CHECK_LANES(lanesCommInitRankScalable(&raw, n, rank, 2, copy, &config), nullptr);
    CommGuard comm(raw);
    checkSum(raw, rank, n);
  });
}

// Whether something listens at the bootstrap root address inside `id`.
bool rootListens(const lanesUniqueId& id) {
  UniqueIdData data;
  if (!decodeUniqueId(id, &data)) return false;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (data.family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(data.port);
    std::memcpy(&a->sin_addr, data.addr, 4);
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(data.port);
    std::memcpy(&a->sin6_addr, data.addr, 16);
    len = sizeof(*a);
  }
  int fd = ::socket(data.family, SOCK_STREAM, 0);
  bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

// The roots of this process's ids that the rendezvous does not use stop; an
// id made here but not passed keeps its root, and a repeat of the first id is
// not taken for an unused one.
TEST(ScalableInit, UnusedRootsOfThisProcessStop) {
  lanesUniqueId ids[3];
  for (auto& id : ids) ASSERT_EQ(lanesGetUniqueId(&id), lanesSuccess);
  lanesUniqueId passed[3] = {ids[0], ids[1], ids[0]};
  runThreads(2, [&passed](int rank, int n, const lanesUniqueId&) {
    lanesComm_t raw = nullptr;
    lanesUniqueId mine[3] = {passed[0], passed[1], passed[2]};
    RANK_CHECK_LANES(lanesCommInitRankScalable(&raw, n, rank, 3, mine, nullptr), nullptr);
    CommGuard comm(raw);
    checkSum(raw, rank, n);
  });
  bool stopped = false;
  for (int i = 0; i < 50 && !stopped; ++i) {  // the root looks every 200 ms
    stopped = !rootListens(ids[1]);
    if (!stopped) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(stopped) << "the root of the unused id still listens";
  EXPECT_TRUE(rootListens(ids[2])) << "the root of an id nobody passed stopped too";
}

TEST(ScalableInit, BadArguments) {
  lanesUniqueId id;
  ASSERT_EQ(lanesGetUniqueId(&id), lanesSuccess);
  lanesComm_t comm = nullptr;
  EXPECT_EQ(lanesCommInitRankScalable(&comm, 1, 0, 0, &id, nullptr), lanesInvalidArgument);
  EXPECT_NE(std::strstr(lanesGetLastError(nullptr), "nId"), nullptr) << lanesGetLastError(nullptr);
  EXPECT_EQ(lanesCommInitRankScalable(&comm, 1, 0, 1, nullptr, nullptr), lanesInvalidArgument);
  EXPECT_EQ(lanesCommInitRankScalable(nullptr, 1, 0, 1, &id, nullptr), lanesInvalidArgument);
  lanesUniqueId garbage[2] = {id, {}};
  std::memset(garbage[1].internal, 0x5a, sizeof(garbage[1].internal));
  EXPECT_EQ(lanesCommInitRankScalable(&comm, 1, 0, 2, garbage, nullptr), lanesInvalidArgument);
  EXPECT_NE(std::strstr(lanesGetLastError(nullptr), "commIds[1]"), nullptr)
      << lanesGetLastError(nullptr);
  EXPECT_EQ(comm, nullptr);
}

// Simulation ends the group, predicts a time, and moves no data.
TEST(GroupSimulate, PredictsAndRunsNothing) {
  runForked(2, [](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    std::vector<float> in(1 << 16, 1.0f), out(1 << 16, -7.0f);
    RANK_CHECK_LANES(lanesGroupStart(), comm.get());
    RANK_CHECK_LANES(lanesAllReduce(in.data(), out.data(), in.size(), lanesFloat32, lanesSum,
                                    comm.get(), nullptr),
                     comm.get());
    lanesSimInfo_t info = LANES_SIM_INFO_INITIALIZER;
    RANK_CHECK_LANES(lanesGroupSimulateEnd(&info), comm.get());
    RANK_CHECK(info.estimatedTime > 0, "estimated time %g", info.estimatedTime);
    RANK_CHECK(out[0] == -7.0f && out.back() == -7.0f, "the simulated all-reduce ran");
    // A bigger call is predicted to take longer.
    RANK_CHECK_LANES(lanesGroupStart(), comm.get());
    RANK_CHECK_LANES(
        lanesAllReduce(in.data(), out.data(), 16, lanesFloat32, lanesSum, comm.get(), nullptr),
        comm.get());
    lanesSimInfo_t small = LANES_SIM_INFO_INITIALIZER;
    RANK_CHECK_LANES(lanesGroupSimulateEnd(&small), comm.get());
    RANK_CHECK(small.estimatedTime < info.estimatedTime, "16 floats %g us, 64K floats %g us",
               small.estimatedTime, info.estimatedTime);
    // The communicator still works, and the next group really runs.
    checkSum(comm.get(), rank, n);
    // Without a simInfo to fill, the group runs as lanesGroupEnd's would.
    RANK_CHECK_LANES(lanesGroupStart(), comm.get());
    RANK_CHECK_LANES(
        lanesAllReduce(in.data(), out.data(), 16, lanesFloat32, lanesSum, comm.get(), nullptr),
        comm.get());
    RANK_CHECK_LANES(lanesGroupSimulateEnd(nullptr), comm.get());
    RANK_CHECK(out[15] == n, "the group ended by lanesGroupSimulateEnd(NULL) gave %g", out[15]);
  });
}

TEST(GroupSimulate, Errors) {
  lanesSimInfo_t info = LANES_SIM_INFO_INITIALIZER;
  EXPECT_EQ(lanesGroupSimulateEnd(&info), lanesInvalidUsage);  // no group open
  // A refused simInfo still ends the group it was meant to end.
  // NULL: the group runs, as lanesGroupEnd would.
  ASSERT_EQ(lanesGroupStart(), lanesSuccess);
  EXPECT_EQ(lanesGroupSimulateEnd(nullptr), lanesSuccess);
  EXPECT_EQ(lanesGroupEnd(), lanesInvalidUsage) << "the group stayed open";
  lanesSimInfo_t bad = info;
  bad.magic = 0;
  ASSERT_EQ(lanesGroupStart(), lanesSuccess);
  EXPECT_EQ(lanesGroupSimulateEnd(&bad), lanesInvalidArgument);
  EXPECT_NE(std::strstr(lanesGetLastError(nullptr), "LANES_SIM_INFO_INITIALIZER"), nullptr);
  EXPECT_EQ(lanesGroupEnd(), lanesInvalidUsage) << "the group stayed open";
}

TEST(Registration, HandlesComeAndGo) {
  runForked(2, [](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    std::vector<float> buf(4096, 1.0f);
    void* handle = nullptr;
    RANK_CHECK_LANES(lanesCommRegister(comm.get(), buf.data(), buf.size() * 4, &handle),
                     comm.get());
    RANK_CHECK(handle != nullptr, "no handle");
    lanesWindow_t win = nullptr;
    RANK_CHECK_LANES(lanesCommWindowRegister(comm.get(), buf.data(), buf.size() * 4, &win, 0),
                     comm.get());
    RANK_CHECK(win != nullptr, "no window");
    RANK_CHECK_LANES(lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32, lanesSum,
                                    comm.get(), nullptr),
                     comm.get());
    RANK_CHECK(buf[4095] == n, "all-reduce on a registered buffer gave %g", buf[4095]);
    // A buffer handle is not a window, and each goes back once.
    RANK_CHECK(lanesCommWindowDeregister(comm.get(), static_cast<lanesWindow_t>(handle)) ==
                   lanesInvalidArgument,
               "a buffer handle was taken as a window");
    RANK_CHECK_LANES(lanesCommDeregister(comm.get(), handle), comm.get());
    RANK_CHECK(lanesCommDeregister(comm.get(), handle) == lanesInvalidArgument,
               "deregistered twice");
    RANK_CHECK(std::strstr(lanesGetLastError(comm.get()), "already deregistered") != nullptr, "%s",
               lanesGetLastError(comm.get()));
    RANK_CHECK_LANES(lanesCommWindowDeregister(comm.get(), win), comm.get());
    void* h2 = nullptr;
    RANK_CHECK(lanesCommRegister(comm.get(), nullptr, 8, &h2) == lanesInvalidArgument,
               "NULL buffer registered");
    RANK_CHECK(lanesCommRegister(comm.get(), buf.data(), 0, &h2) == lanesInvalidArgument,
               "size 0 registered");
    // Left registered: destroy frees it.
    RANK_CHECK_LANES(lanesCommRegister(comm.get(), buf.data(), 64, &h2), comm.get());
  });
}

TEST(MemAlloc, ArgumentsAndNoGpu) {
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(lanesMemAlloc(nullptr, 64), lanesInvalidArgument);
  EXPECT_EQ(lanesMemAlloc(&p, 0), lanesInvalidArgument);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(lanesMemFree(nullptr), lanesSuccess);
  int value = 0;
  EXPECT_EQ(lanesMemFree(&value), lanesInvalidArgument) << "host memory freed as device memory";
  lanesResult_t r = lanesMemAlloc(&p, 1 << 20);
  if (r == lanesSuccess) {  // a GPU is visible
    EXPECT_NE(p, nullptr);
    EXPECT_EQ(lanesMemFree(p), lanesSuccess);
  } else {
    EXPECT_EQ(r, lanesUnhandledCudaError);
    EXPECT_NE(std::strstr(lanesGetLastError(nullptr), "lanesMemAlloc"), nullptr)
        << lanesGetLastError(nullptr);
  }
}

}  // namespace
}  // namespace lanes::test
