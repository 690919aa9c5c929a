#include "exec/host_reducer.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/cpu/reduce.h"

namespace lanes {
namespace {

// Sums go block by block, so the partial sum stays in cache while each
// further input streams past it: memory sees every input once and the result once.
constexpr size_t kBlockBytes = size_t{32} << 10;
// Slices start at multiples of a cache line, so no two threads write one line.
constexpr size_t kLineBytes = 64;

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

HostReducer::HostReducer(int threads, std::optional<cpu_set_t> cpus)
    : parts_(std::max(1, threads)) {
  threads_.reserve(static_cast<size_t>(parts_));
  for (int i = 0; i < parts_; ++i)
    threads_.emplace_back([this, i, cpus] {
      if (cpus) pthread_setaffinity_np(pthread_self(), sizeof(*cpus), &*cpus);
      run(i);
    });
}

HostReducer::~HostReducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void HostReducer::push(Job job) {
  auto pending = std::make_unique<Pending>();
  pending->job = std::move(job);
  pending->left.store(parts_, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(pending));
    ++pushed_;
  }
  wake_.notify_all();
}

void HostReducer::run(int index) {
  const auto parts = static_cast<size_t>(parts_);
  for (uint64_t seq = 0;; ++seq) {
    Pending* p = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_.load(std::memory_order_acquire) || pushed_ > seq; });
      if (stop_.load(std::memory_order_acquire)) return;
      p = jobs_[static_cast<size_t>(seq - base_)].get();
    }
    const Job& job = p->job;
    if (!awaitInputs(job)) return;
    const bool framed = job.wire != WireFormat::Native;
    // Slices start at a cache line, or a frame (a frame's bytes are whole lines).
    const size_t unit = framed ? WireCodec(job.wire).frameElems()
                               : std::max<size_t>(1, kLineBytes / datatypeSize(job.type));
    const size_t per = (job.count + parts * unit - 1) / (parts * unit) * unit;
    const size_t begin = std::min(job.count, static_cast<size_t>(index) * per);
    const size_t end = std::min(job.count, begin + per);
    if (framed)
      sumFrames(job, begin, end);
    else
      sumSlice(job, begin, end);
    if (p->left.fetch_sub(1, std::memory_order_acq_rel) == 1) retire(seq);
  }
}

bool HostReducer::awaitInputs(const Job& job) const {
  // Spin briefly (a chunk's inputs usually land within microseconds of each
  // other), then yield, then sleep in short steps so an idle wait costs no core.
  int spins = 0;
  for (const volatile uint32_t* counter : job.ready) {
    while (!reached(__atomic_load_n(counter, __ATOMIC_ACQUIRE), job.g)) {
      if (stop_.load(std::memory_order_acquire)) return false;
      if (spins < 4096) {
        cpuRelax();
      } else if (spins < 4096 + 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      ++spins;
    }
  }
  return true;
}

void HostReducer::sumSlice(const Job& job, size_t begin, size_t end) const {
  const size_t elem = datatypeSize(job.type);
  const size_t block = kBlockBytes / elem;
  const size_t n = job.srcs.size();
  const bool scaled = job.op == RedOpKind::PreMulSum;
  thread_local std::vector<std::byte> scratch;
  if (scaled && scratch.size() < kBlockBytes) scratch.resize(kBlockBytes);
  for (size_t at = begin; at < end; at += block) {
    const size_t len = std::min(block, end - at);
    const size_t off = at * elem;
    std::byte* dst = job.dst + off;
    if (scaled) {
      cpu::premultiply(dst, job.srcs[0] + off, len, job.type, job.scalar);
      for (size_t k = 1; k < n; ++k) {
        cpu::premultiply(scratch.data(), job.srcs[k] + off, len, job.type, job.scalar);
        cpu::reduce(dst, dst, scratch.data(), len, job.type, job.op);
      }
    } else if (n == 1) {
      std::memcpy(dst, job.srcs[0] + off, len * elem);
    } else {
      cpu::reduce(dst, job.srcs[0] + off, job.srcs[1] + off, len, job.type, job.op);
      for (size_t k = 2; k < n; ++k)
        cpu::reduce(dst, dst, job.srcs[k] + off, len, job.type, job.op);
    }
    if (job.avgRanks > 0) cpu::finishAvg(dst, len, job.type, job.avgRanks);
  }
}

void HostReducer::sumFrames(const Job& job, size_t begin, size_t end) const {
  const WireCodec codec(job.wire);
  const size_t frame = codec.frameElems();
  // Whole frames per block, the partial sum in cache in float32.
  const size_t block = std::max<size_t>(1, kBlockBytes / sizeof(float) / frame) * frame;
  thread_local std::vector<float> sum;
  if (sum.size() < block) sum.resize(block);
  for (size_t at = begin; at < end; at += block) {
    const size_t len = std::min(block, end - at);
    const size_t wireAt = at / frame * WireCodec::kMaxFrameBytes;
    // Every input's frames in rank order, each decoded and added in float32.
    for (size_t k = 0; k < job.srcs.size(); ++k)
      for (size_t i = 0; i < len; i += frame)
        codec.decode(job.srcs[k] + wireAt + i / frame * WireCodec::kMaxFrameBytes,
                     std::min(frame, len - i), k == 0 ? nullptr : sum.data() + i, sum.data() + i);
    // sum(s * x) as s * sum(x): one more float rounding, far below the wire's.
    if (job.op == RedOpKind::PreMulSum)
      cpu::premultiply(sum.data(), sum.data(), len, lanesFloat32, job.scalar);
    if (job.avgRanks > 0) cpu::finishAvg(sum.data(), len, lanesFloat32, job.avgRanks);
    for (size_t i = 0; i < len; i += frame)
      codec.encode(sum.data() + i, std::min(frame, len - i),
                   job.dst + wireAt + i / frame * WireCodec::kMaxFrameBytes);
  }
}

void HostReducer::retire(uint64_t seq) {
  std::unique_ptr<Pending> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Jobs finish in order (every thread walks them in order), so this is the front.
    done = std::move(jobs_.front());
    jobs_.pop_front();
    base_ = seq + 1;
  }
  if (done->job.done != nullptr) __atomic_store_n(done->job.done, done->job.g, __ATOMIC_RELEASE);
  finished_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace lanes
