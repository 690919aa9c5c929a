// gloo_perf: Gloo's all-reduce (ring, float sum) or all-gather over its TCP
// transport, timed the way lanes_all_reduce_perf / lanes_all_gather_perf time
// Lanes and printing the same columns, for side-by-side runs
// (netns_tcp_compare.sh). Ranks come from a launcher's LANES_RANK /
// LANES_WORLD_SIZE (lanes-run); they meet through a FileStore in
// GLOO_STORE_DIR and listen on GLOO_HOSTNAME (an address of their host).
//
//   gloo_perf allreduce|allgather [-b minbytes] [-e maxbytes] [-f factor] [-n iters] [-w warmup]
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

bool parseSize(const char* s, size_t* out) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  double unit = 1;
  if (*end == 'K' || *end == 'k')
    unit = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm')
    unit = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    unit = 1024.0 * 1024 * 1024, ++end;
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v * unit);
  return true;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    std::fprintf(stderr, "gloo_perf: %s is not set (run it under lanes-run, see the header)\n",
                 name);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 ||
      (std::strcmp(argv[1], "allreduce") != 0 && std::strcmp(argv[1], "allgather") != 0)) {
    std::fprintf(stderr, "usage: gloo_perf allreduce|allgather [-b -e -f -n -w]\n");
    return 2;
  }
  const bool allreduce = std::strcmp(argv[1], "allreduce") == 0;
  size_t minBytes = 1 << 20, maxBytes = 256u << 20, factor = 4;
  int iters = 10, warmup = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const char* v = argv[i + 1];
    bool ok = true;
    if (f == "-b")
      ok = parseSize(v, &minBytes);
    else if (f == "-e")
      ok = parseSize(v, &maxBytes);
    else if (f == "-f")
      ok = (factor = std::strtoul(v, nullptr, 10)) >= 2;
    else if (f == "-n")
      ok = (iters = std::atoi(v)) > 0;
    else if (f == "-w")
      ok = (warmup = std::atoi(v)) >= 0;
    else
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "gloo_perf: bad option %s %s\n", f.c_str(), v);
      return 2;
    }
  }
  const int rank = std::atoi(env("LANES_RANK"));
  const int nranks = std::atoi(env("LANES_WORLD_SIZE"));
  gloo::transport::tcp::attr attr;
  attr.hostname = env("GLOO_HOSTNAME");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore fileStore(env("GLOO_STORE_DIR"));
  gloo::rendezvous::PrefixStore store("gloo_perf", fileStore);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
  context->setTimeout(std::chrono::seconds(600));
  context->connectFullMesh(store, device);

  const size_t maxCount = maxBytes / sizeof(float) + 1;
  std::vector<float> send(maxCount), recv(maxCount * static_cast<size_t>(nranks));
  for (size_t i = 0; i < maxCount; ++i) send[i] = static_cast<float>((rank + i) % 3);
  uint32_t tag = 0;
  // One call on `count` elements (all-gather: `count` is the whole output).
  auto run = [&](size_t count, bool inPlace) {
    if (allreduce) {
      gloo::AllreduceOptions o(context);
      if (!inPlace) o.setInput(send.data(), count);
      o.setOutput(recv.data(), count);
      o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      o.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      o.setTag(tag++);
      gloo::allreduce(o);
    } else {
      const size_t each = count / static_cast<size_t>(nranks);
      gloo::AllgatherOptions o(context);
      if (!inPlace) o.setInput(send.data(), each);
      o.setOutput(recv.data(), each * static_cast<size_t>(nranks));
      o.setTag(tag++);
      gloo::allgather(o);
    }
  };
  auto seconds = [&](size_t count, bool inPlace) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) run(count, inPlace);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  };
  if (rank == 0) {
    std::printf("# Gloo %s (%s) over TCP, %d ranks, iters %d warmup %d\n#\n",
                allreduce ? "allreduce ring, float sum" : "allgather, float",
                "gloo "
                "tcp",
                nranks, iters, warmup);
    std::printf(
        "#       size         count      type   redop    root     time   algbw   busbw "
        "#wrong     time   algbw   busbw #wrong\n");
  }
  const double busFactor =
      allreduce ? 2.0 * (nranks - 1) / nranks : static_cast<double>(nranks - 1) / nranks;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
    size_t count = bytes / sizeof(float);
    if (!allreduce) count -= count % static_cast<size_t>(nranks);
    if (count == 0) continue;
    for (int i = 0; i < warmup; ++i) run(count, false);
    double t[2] = {seconds(count, false), seconds(count, true)};
    if (rank == 0) {
      std::printf("%12zu  %12zu  %8s  %6s  %6d", count * sizeof(float), count, "float",
                  allreduce ? "sum" : "none", -1);
      for (double s : t) {
        const double alg = static_cast<double>(count * sizeof(float)) / 1e9 / s;
        std::printf("  %9.1f  %6.2f  %6.2f    N/A", s * 1e6, alg, alg * busFactor);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
