#include "core/host_probe.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/collective.h"
#include "base/env.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/init.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/wire_codec.h"
#include "lanes/lanes.h"
#include "topology/loop_figures.h"

namespace lanes {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Status lanesStatus(lanesResult_t r, lanesComm_t comm, const char* what) {
  if (r == lanesSuccess) return Status::ok();
  return Status(r, std::string("host probe: ") + what + ": " +
                       (comm != nullptr ? lanesGetLastError(comm) : lanesGetErrorString(r)));
}

// Where the two ranks' threads run: anywhere, or each on its CPU.
using Pins = std::optional<std::array<int, 2>>;

// Runs `work(rank)` on the two thread ranks at once, four times; the fastest
// of the last three (the first warms up), in seconds.
Status bestOfRounds(const std::function<Status(int)>& work, double* bestSeconds,
                    const Pins& pins = std::nullopt) {
  double best = 1e30;
  for (int round = 0; round < 4; ++round) {
    Status failed[2];
    Clock::time_point t0 = Clock::now();
    std::array<std::thread, 2> ranks;
    for (int r = 0; r < 2; ++r)
      ranks[r] = std::thread([&, r] {
        const ScopedQuietLog quiet;
        if (pins) {
          cpu_set_t one;
          CPU_ZERO(&one);
          const int cpu = (*pins)[static_cast<size_t>(r)];
          CPU_SET(cpu, &one);
          if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) {
            failed[r] = internalError("could not run on CPU " + std::to_string(cpu));
            return;
          }
        }
        failed[r] = work(r);
      });
    for (std::thread& t : ranks) t.join();
    for (const Status& s : failed) LANES_RETURN_IF_ERROR(s);
    if (round > 0) best = std::min(best, secondsSince(t0));
  }
  *bestSeconds = best;
  return Status::ok();
}

// Rank 0 sends `bytes` to rank 1, which sends them back: seconds per round trip.
Status timeRoundTrips(lanesComm_t comms[2], size_t bytes, int iterations, double* seconds,
                      const Pins& pins = std::nullopt) {
  std::vector<std::byte> buffers[2] = {std::vector<std::byte>(bytes),
                                       std::vector<std::byte>(bytes)};
  Status s = bestOfRounds(
      [&](int r) {
        std::byte* mine = buffers[r].data();
        lanesComm_t comm = comms[r];
        Status st;
        for (int i = 0; i < iterations && st; ++i)
          for (int leg = 0; leg < 2 && st; ++leg)
            st = (leg == 0) == (r == 0)
                     ? lanesStatus(lanesSend(mine, bytes, lanesUint8, 1 - r, comm, nullptr), comm,
                                   "send")
                     : lanesStatus(lanesRecv(mine, bytes, lanesUint8, 1 - r, comm, nullptr), comm,
                                   "recv");
        return st;
      },
      seconds, pins);
  *seconds /= iterations;
  return s;
}

// Both ranks send `bytes` to each other at once (a grouped send and receive):
// the per-direction rate in bytes per second.
Status exchangeRate(lanesComm_t comms[2], size_t bytes, double* rate) {
  std::vector<std::byte> send[2] = {std::vector<std::byte>(bytes), std::vector<std::byte>(bytes)};
  std::vector<std::byte> recv[2] = {std::vector<std::byte>(bytes), std::vector<std::byte>(bytes)};
  double seconds = 0;
  LANES_RETURN_IF_ERROR(bestOfRounds(
      [&](int r) {
        lanesComm_t comm = comms[r];
        Status st = lanesStatus(lanesGroupStart(), comm, "group");
        if (st)
          st = lanesStatus(lanesSend(send[r].data(), bytes, lanesUint8, 1 - r, comm, nullptr), comm,
                           "send");
        if (st)
          st = lanesStatus(lanesRecv(recv[r].data(), bytes, lanesUint8, 1 - r, comm, nullptr), comm,
                           "recv");
        Status end = lanesStatus(lanesGroupEnd(), comm, "group end");
        return st ? end : st;
      },
      &seconds));
  *rate = static_cast<double>(bytes) / seconds;
  return Status::ok();
}

// Iterations that take about `seconds` for one that takes `each`.
int iterationsFor(double each, double seconds) {
  return static_cast<int>(std::clamp(seconds / std::max(each, 1e-9), 3.0, 5000.0));
}

// The best of three timed rounds of `work` (each `iterations` calls, chosen
// so that a round takes about 20 ms), in seconds per call.
template <class Work>
double bestPerCall(Work work) {
  Clock::time_point t0 = Clock::now();
  work();
  const int iterations = iterationsFor(secondsSince(t0), 0.02);
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    t0 = Clock::now();
    for (int i = 0; i < iterations; ++i) work();
    best = std::min(best, secondsSince(t0) / iterations);
  }
  return best;
}

// Output bytes per second of a float sum of `bytes` on one core.
double reduceRate(size_t bytes) {
  const size_t count = bytes / sizeof(float);
  std::vector<float> a(count, 1.0f), b(count, 2.0f), dst(count);
  return static_cast<double>(bytes) / bestPerCall([&] {
           cpu::reduce(dst.data(), a.data(), b.data(), count, lanesFloat32, RedOpKind::Sum);
         });
}

// The wire formats' codec on one core, ns per value: frames of 1 MiB of
// float32 values (a reducer's block stays in cache the same way) over
// magnitudes of thirteen binary orders, encoded, and decoded into a sum.
void measureWireCodec(topo::HostProbe* h) {
  constexpr size_t kValues = size_t{1} << 18;
  std::vector<float> values(kValues), sum(kValues, 0.0f);
  for (size_t i = 0; i < kValues; ++i)
    values[i] =
        std::ldexp(static_cast<float>(i % 1000) / 1000.0f - 0.5f, static_cast<int>(i % 13) - 6);
  int index = 0;
  for (WireFormat format : {WireFormat::Bf16, WireFormat::Fp8}) {
    const WireCodec codec(format);
    const size_t frame = codec.frameElems();
    std::vector<std::byte> wire(codec.wireBytes(kValues));
    const double encode = bestPerCall([&] {
      for (size_t i = 0; i < kValues; i += frame)
        codec.encode(values.data() + i, std::min(frame, kValues - i),
                     wire.data() + i / frame * WireCodec::kMaxFrameBytes);
    });
    const double decode = bestPerCall([&] {
      for (size_t i = 0; i < kValues; i += frame)
        codec.decode(wire.data() + i / frame * WireCodec::kMaxFrameBytes,
                     std::min(frame, kValues - i), sum.data() + i, sum.data() + i);
    });
    h->wireEncodeNs[index] = encode / kValues * 1e9;
    h->wireDecodeNs[index] = decode / kValues * 1e9;
    ++index;
  }
}

// Two host-only thread ranks with Lanes' default settings whatever the
// LANES_* variables say (the figures describe the machine and are cached for
// it, not for one job's settings), then `adjust`ed: the probes force
// algorithms and transports without touching the environment, which the
// process's other threads may be reading.
Status initPair(const std::function<void(CommConfig&)>& adjust, const char* what,
                std::array<lanesComm_t, 2>* comms) {
  CommOptions options;
  options.timeoutSeconds = defaultTimeoutSeconds();
  options.hostOnly = true;
  options.quietLog = true;
  options.adjustConfig = [adjust](CommConfig& c) {
    c = CommConfig{};
    if (adjust) adjust(c);
  };
  Status s = initThreadRanks({-1, -1}, options, comms->data());
  if (!s) return Status(s.code(), std::string("host probe: ") + what + ": " + s.message());
  return s;
}

// Bytes copied per second by memcpy on every core at once.
double memoryRate() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  constexpr size_t kBytes = size_t{32} << 20;
  std::vector<std::vector<std::byte>> src(cores, std::vector<std::byte>(kBytes, std::byte{1}));
  std::vector<std::vector<std::byte>> dst(cores, std::vector<std::byte>(kBytes));
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {
    Clock::time_point t0 = Clock::now();
    std::vector<std::thread> threads;
    for (unsigned c = 0; c < cores; ++c)
      threads.emplace_back([&, c] { std::memcpy(dst[c].data(), src[c].data(), kBytes); });
    for (std::thread& t : threads) t.join();
    if (i > 0) best = std::min(best, secondsSince(t0));
  }
  return static_cast<double>(cores) * kBytes / best;
}

// The socket transport between two thread ranks over loopback (shared memory
// turned off for them): what the TCP stack adds to a hop between hosts. The
// wire's own rate is the NIC's (the planner takes the lower).
Status measureTcp(topo::HostProbe* h) {
  std::array<lanesComm_t, 2> comms{};
  LANES_RETURN_IF_ERROR(initPair([](CommConfig& c) { c.transport.shmDisabled = true; },
                                 "two thread ranks over the socket transport", &comms));
  double roundTrip = 0, big = 0;
  constexpr size_t kBigBytes = size_t{16} << 20;
  Status s = timeRoundTrips(comms.data(), 8, 500, &roundTrip);
  if (s) s = timeRoundTrips(comms.data(), kBigBytes, 3, &big);
  for (lanesComm_t c : comms) lanesCommDestroy(c);
  LANES_RETURN_IF_ERROR(s);
  h->tcpLatencyUs = roundTrip / 2 * 1e6;
  h->tcpGBs = static_cast<double>(kBigBytes) / std::max(big / 2 - roundTrip / 2, big / 20) / 1e9;
  return Status::ok();
}

// One 8-byte call of a probe's loop on `comm`, on `value` (two floats).
using LoopCall = lanesResult_t (*)(float* value, lanesComm_t comm);

lanesResult_t allReduce8(float* value, lanesComm_t comm) {
  return lanesAllReduce(value, value, 2, lanesFloat32, lanesSum, comm, nullptr);
}
lanesResult_t broadcast8(float* value, lanesComm_t comm) {
  return lanesBroadcast(value, value, 2, lanesFloat32, 0, comm, nullptr);
}

// Seconds per call of a loop of `call`s by two thread ranks forced to `algo`
// (LANES_ALGO), calls back to back. Host summation runs only where its arena
// could be made: elsewhere `seconds` is 0 (the forced name would fall back to
// another algorithm).
Status timeLoopBy(const char* algo, LoopCall call, double* seconds) {
  std::array<lanesComm_t, 2> comms{};
  NameList forced;
  LANES_RETURN_IF_ERROR(parseAlgoList(algo, &forced));
  LANES_RETURN_IF_ERROR(initPair([&forced](CommConfig& c) { c.selection.algo = forced; },
                                 "two thread ranks", &comms));
  if (std::string_view(algo) == algoName(AlgoId::SharedSum) &&
      !comms[0]->config.selection.sharedSumUsable) {
    for (lanesComm_t c : comms) lanesCommDestroy(c);
    *seconds = 0;
    return Status::ok();
  }
  constexpr int kIterations = 2000;
  const std::string what = std::string("a loop of 8-byte calls by ") + algo;
  Status s = bestOfRounds(
      [&](int r) {
        float value[2] = {1, 2};
        Status st;
        for (int i = 0; i < kIterations && st; ++i)
          st = lanesStatus(call(value, comms[r]), comms[r], what.c_str());
        return st;
      },
      seconds);
  *seconds /= kIterations;
  for (lanesComm_t c : comms) lanesCommDestroy(c);
  return s;
}

// The call, one more step inside it, a rooted call and a host-summation call,
// as loops of calls see them (topo::setCallFigures): a two-rank all-reduce by
// recursive doubling is the call and one hop, the ring's takes one more step,
// a loop of broadcasts overlaps each call with the next, and host summation
// hands off through its arena rather than the transport. The ping-pong's hop is a whole
// call a leg; within a call the ranks are already in step. The loops are timed
// in turn five times and each keeps its fastest, so a round that lost its
// core does not decide.
Status measureCallLoops(topo::HostProbe* h) {
  topo::CallLoops best{1e30, 1e30, 1e30, 1e30};
  for (int turn = 0; turn < 5; ++turn) {
    double t = 0;
    LANES_RETURN_IF_ERROR(timeLoopBy("ring", allReduce8, &t));
    best.ring = std::min(best.ring, t);
    LANES_RETURN_IF_ERROR(timeLoopBy("recursive_doubling", allReduce8, &t));
    best.doubling = std::min(best.doubling, t);
    LANES_RETURN_IF_ERROR(timeLoopBy("direct", broadcast8, &t));
    best.broadcast = std::min(best.broadcast, t);
    if (best.sum == 0) continue;  // no arena: not tried again (each try warns)
    // Best effort: without the figure host summation keeps its assumed price.
    if (Status sum = timeLoopBy("shared_sum", allReduce8, &t); !sum) {
      LANES_WARN(Topo, -1, "host probe: host-summation loop skipped (%s)", sum.message().c_str());
      t = 0;
    }
    best.sum = std::min(best.sum, t);
  }
  topo::setCallFigures(best, h);
  return Status::ok();
}

// The first CPU of two NUMA nodes of different CPU packages, as the model
// lists them; none where it knows one package (or no CPU lists), or where
// this process may not run on those CPUs (a rank that cannot be pinned would
// leave its peer waiting).
Pins crossPackageCpus(const topo::Topology& t) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return std::nullopt;
  std::vector<std::pair<int, int>> firsts;  // (package, first CPU)
  for (size_t n = 0; n < t.nodes.size(); ++n) {
    if (t.nodes[n].kind != topo::NodeKind::Numa) continue;
    const int package = t.packageOf(static_cast<int>(n));
    const std::string& cpus = t.nodes[n].name;  // a NUMA node's name is its CPU list
    if (package < 0 || cpus.empty() || cpus[0] < '0' || cpus[0] > '9') continue;
    const int cpu = std::atoi(cpus.c_str());
    if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) continue;
    for (const auto& [other, otherCpu] : firsts)
      if (other != package) return std::array<int, 2>{otherCpu, cpu};
    firsts.emplace_back(package, cpu);
  }
  return std::nullopt;
}

// A hop between two thread ranks pinned to CPUs of different packages: what
// a flat ring's link across a socket costs, and the hierarchical plans' step
// across it (planner/host_costs.h).
Status measureCrossPackage(const topo::Topology& t, topo::HostProbe* h) {
  const Pins pins = crossPackageCpus(t);
  if (!pins) return Status::ok();
  std::array<lanesComm_t, 2> comms{};
  LANES_RETURN_IF_ERROR(initPair(nullptr, "two thread ranks across CPU packages", &comms));
  double roundTrip = 0, big = 0;
  constexpr size_t kBigBytes = size_t{16} << 20;
  Status s = timeRoundTrips(comms.data(), 8, 1000, &roundTrip, pins);
  if (s) s = timeRoundTrips(comms.data(), kBigBytes, 3, &big, pins);
  for (lanesComm_t c : comms) lanesCommDestroy(c);
  LANES_RETURN_IF_ERROR(s);
  h->crossPackageLatencyUs = roundTrip / 2 * 1e6;
  h->crossPackageGBs =
      static_cast<double>(kBigBytes) / std::max(big / 2 - roundTrip / 2, big / 20) / 1e9;
  return Status::ok();
}

}  // namespace

Status measureHostProbe(const topo::Topology& t, topo::HostProbe* out) {
  const ScopedQuietLog quiet;  // the probe's communicators say nothing a user asked about
  // Host-only thread ranks: the figures are the shared-memory transport's,
  // whatever GPUs the machine has.
  std::array<lanesComm_t, 2> comms{};
  LANES_RETURN_IF_ERROR(initPair(nullptr, "two thread ranks on this host", &comms));
  topo::HostProbe h;
  double roundTrip = 0;
  Status s = timeRoundTrips(comms.data(), 8, 2000, &roundTrip);
  h.hopLatencyUs = roundTrip / 2 * 1e6;
  for (int i = 0; s && i < topo::HostProbe::kCurvePoints; ++i) {
    const size_t bytes = size_t{4096} << (2 * i);
    double t = 0;
    s = timeRoundTrips(comms.data(), bytes, 1, &t);  // a first guess of the time
    if (s) s = timeRoundTrips(comms.data(), bytes, iterationsFor(t, 0.03), &t);
    // A hop's streaming time: half the round trip less the latency.
    const double hop = std::max(t / 2 - roundTrip / 2, t / 20);
    h.hopGBs.push_back(static_cast<double>(bytes) / hop / 1e9);
  }
  double exchange = 0;
  if (s) s = exchangeRate(comms.data(), size_t{64} << 20, &exchange);
  h.exchangeGBs = exchange / 1e9;
  for (lanesComm_t c : comms) lanesCommDestroy(c);
  LANES_RETURN_IF_ERROR(s);
  LANES_RETURN_IF_ERROR(measureCallLoops(&h));
  // Best effort: a sandbox without loopback sockets keeps the assumed figures.
  if (Status tcp = measureTcp(&h); !tcp)
    LANES_WARN(Topo, -1, "host probe: TCP probe skipped (%s)", tcp.message().c_str());
  for (int i = 0; i < topo::HostProbe::kCurvePoints; ++i)
    h.reduceGBs.push_back(reduceRate(size_t{4096} << (2 * i)) / 1e9);
  h.memGBs = memoryRate() / 1e9;
  measureWireCodec(&h);
  // Best effort, as the TCP figures: a machine that will not pin keeps the assumed ones.
  if (Status cross = measureCrossPackage(t, &h); !cross)
    LANES_WARN(Topo, -1, "host probe: cross-package probe skipped (%s)", cross.message().c_str());
  *out = std::move(h);
  return Status::ok();
}

}  // namespace lanes
