// Device buffers on ranks that count as different hosts of one machine: 4
// processes on GPU 0 whose LANES_HOSTID puts ranks 0-1 and 2-3 on two
// "hosts" (docs/env.md), so their calls take the proxy and its host
// algorithm talks TCP over loopback between the hosts and shared memory
// within each. With LANES_ALGO=hierarchical the proxy runs the hierarchical
// all-reduce, reduce-scatter and all-gather (docs/planner.md): every result
// checked against the test's own arithmetic (tests/multi/data.h), in place
// and not, and the plan each call ran read back. Skipped when no GPU is visible.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/plan_record.h"
#include "tests/common/scoped_env.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/multi/data.h"
#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

constexpr lanesRedOp_t kOps[] = {lanesSum, lanesProd, lanesMax, lanesMin, lanesAvg};

void checkPlan(lanesComm_t comm, const char* what) {
  const std::string ran = lastPlanOf(comm);
  GPU_CHECK(ran == "proxy/hierarchical", "%s ran on \"%s\", expected \"proxy/hierarchical\"", what,
            ran.c_str());
}

// One all-reduce and one reduce-scatter of `count` elements (per rank), and
// one all-gather, on device buffers, each checked.
void runCalls(lanesComm_t comm, cudaStream_t stream, int rank, int n, lanesDataType_t t,
              Reduction r, size_t count, bool inPlace, uint32_t salt) {
  const size_t esz = typeSize(t);
  const lanesRedOp_t op = kOps[static_cast<int>(r)];
  {  // all-reduce
    std::vector<std::byte> host(count * esz);
    fillReductionInput(t, r, rank, n, host.data(), count, 0, salt);
    DeviceBuffer send(host.size(), stream), recv(host.size(), stream);
    (inPlace ? recv : send).upload(host.data(), host.size());
    GPU_CHECK_LANES(lanesAllReduce(inPlace ? recv.data() : send.data(), recv.data(), count, t, op,
                                   comm, stream),
                    comm);
    const std::vector<std::byte> got = recv.download();
    const std::string problem = checkReductionOutput(t, r, n, got.data(), count, 0, salt);
    GPU_CHECK(problem.empty(), "all-reduce %s %s count %zu %s: %s", typeName(t), reductionName(r),
              count, inPlace ? "in place" : "out of place", problem.c_str());
    if (count > 0) checkPlan(comm, "all-reduce");
  }
  {  // reduce-scatter
    std::vector<std::byte> host(count * esz * n);
    fillReductionInput(t, r, rank, n, host.data(), count * n, 0, salt + 1);
    DeviceBuffer send(host.size(), stream), recv(host.size(), stream);
    (inPlace ? recv : send).upload(host.data(), host.size());
    std::byte* out = recv.data() + (inPlace ? static_cast<size_t>(rank) * count * esz : 0);
    GPU_CHECK_LANES(
        lanesReduceScatter(inPlace ? recv.data() : send.data(), out, count, t, op, comm, stream),
        comm);
    const std::vector<std::byte> got = recv.download();
    const std::string problem =
        checkReductionOutput(t, r, n, got.data() + (out - recv.data()), count,
                             static_cast<size_t>(rank) * count, salt + 1);
    GPU_CHECK(problem.empty(), "reduce-scatter %s %s count %zu %s: %s", typeName(t),
              reductionName(r), count, inPlace ? "in place" : "out of place", problem.c_str());
    if (count > 0) checkPlan(comm, "reduce-scatter");
  }
  if (r != Reduction::Sum) return;
  {  // all-gather
    const size_t bytes = count * esz;
    std::vector<std::byte> host(bytes);
    fillPattern(host.data(), bytes, rank, 0, salt + 2);
    DeviceBuffer send(bytes, stream), recv(bytes * n, stream);
    std::byte* in = inPlace ? recv.data() + static_cast<size_t>(rank) * bytes : send.data();
    if (inPlace)
      recv.upload(host.data(), bytes, static_cast<size_t>(rank) * bytes);
    else
      send.upload(host.data(), bytes);
    GPU_CHECK_LANES(lanesAllGather(in, recv.data(), count, t, comm, stream), comm);
    const std::vector<std::byte> got = recv.download();
    for (int p = 0; p < n; ++p) {
      const std::string problem =
          checkPattern(got.data() + static_cast<size_t>(p) * bytes, bytes, p, 0, salt + 2);
      GPU_CHECK(problem.empty(), "all-gather %s count %zu %s, block of rank %d: %s", typeName(t),
                count, inPlace ? "in place" : "out of place", p, problem.c_str());
    }
    if (count > 0) checkPlan(comm, "all-gather");
  }
}

TEST(HierarchicalDevice, TwoHostsOfTwoProcessesOnOneGpu) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  ScopedEnv algo("LANES_ALGO", "hierarchical");
  runForked(4, [](int rank, int nranks, const lanesUniqueId& id) {
    ::setenv("LANES_HOSTID", rank < 2 ? "lanes-gpu-host-a" : "lanes-gpu-host-b", 1);
    GPU_CHECK_CUDA(cudaSetDevice(0));
    cudaStream_t stream = nullptr;
    GPU_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CommGuard comm(initComm(rank, nranks, id));
    uint32_t salt = 0;
    for (lanesDataType_t t : {lanesFloat32, lanesBfloat16, lanesInt32, lanesFloat64}) {
      for (Reduction r : kAllReductions) {
        if (r == Reduction::PreMulSum || (t != lanesFloat32 && r != Reduction::Sum)) continue;
        for (size_t count : {size_t{0}, size_t{1}, size_t{1025}, size_t{100003}})
          for (bool inPlace : {false, true})
            runCalls(comm.get(), stream, rank, nranks, t, r, count, inPlace, salt += 3);
      }
    }
    cudaStreamDestroy(stream);
  });
}

}  // namespace
}  // namespace lanes::test
