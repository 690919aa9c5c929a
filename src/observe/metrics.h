// Metrics of the communicators of this process, in the Prometheus text
// exposition format (docs/observability.md lists every family). Callers
// update them with relaxed atomic adds, no lock and no allocation on the
// hot path; the exporter (observe/metrics_exporter.h) renders them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/collective.h"
#include "lanes/lanes.h"

namespace lanes {

// What a call counted under: the collectives, then send and recv.
inline constexpr size_t kMetricCallKinds = kCollTypeCount + 2;
inline constexpr size_t kMetricSend = kCollTypeCount;
inline constexpr size_t kMetricRecv = kCollTypeCount + 1;
const char* metricCallName(size_t kind);
// Size classes of the latency histograms: up to 4 KiB, 64 KiB, 1 MiB, 16 MiB, above.
inline constexpr size_t kMetricSizeClasses = 5;
size_t metricSizeClass(uint64_t bytes);
const char* metricSizeClassName(size_t sizeClass);
// Upper bounds (seconds) of the latency buckets; +Inf follows.
inline constexpr std::array<double, 20> kLatencyBuckets = {
    5e-6, 1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
    1e-2, 2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1,    2.5,  5,      10};
// Result kinds of lanes_errors_total (lanesResult_t, "timeout", "remote_error").
const char* metricErrorKind(lanesResult_t code);

struct LatencyHistogram {
  std::array<std::atomic<uint64_t>, kLatencyBuckets.size() + 1> buckets{};  // not cumulative
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> sumNs{0};
  void observe(uint64_t ns);
};

// One communicator's rank in this process.
class CommMetrics {
 public:
  // `comm`: the communicator's name, or its id where it has none; `commId`
  // its id, which tells apart communicators of one name (a split's parts).
  CommMetrics(const std::string& comm, const std::string& commId, int rank);
  const std::string& labels() const { return labels_; }  // comm="...",comm_id="...",rank="..."

  // A call that finished on host buffers, or was enqueued on device
  // buffers; `bytes`: read from its send buffer. `timed`: its group took `ns`
  // (a group's time counts once, under its first call).
  void countCall(size_t kind, lanesDataType_t type, bool onDevice, uint64_t bytes, uint64_t ns,
                 bool timed);
  // The plan a call ran on ("ring", "staged", "proxy/ring").
  void countPlan(std::string_view call, std::string_view plan, uint64_t bytes);
  // Bytes moved to and from peers over a transport (its static name: "shm", "tcp").
  void countTransport(const char* transport, uint64_t sent, uint64_t received);
  void countPeerWait(uint64_t ns);
  void countError(lanesResult_t code);

  // Appends the samples of each family (no HELP/TYPE lines).
  void appendCalls(std::string* out) const;
  void appendBytes(std::string* out) const;
  void appendHostLatency(std::string* out) const;
  void appendEnqueueLatency(std::string* out) const;
  void appendPlanCalls(std::string* out) const;
  void appendPlanBytes(std::string* out) const;
  void appendTransports(std::string* out) const;
  void appendPeerWait(std::string* out) const;
  void appendErrors(std::string* out) const;

 private:
  static constexpr size_t kTypes = lanesNumTypes;
  static constexpr size_t kTransports = 8;
  struct PerType {
    std::atomic<uint64_t> calls{0}, bytes{0};
  };
  // A slot is claimed under planMutex_ (its names written, then `ready`
  // published); counting finds it without the lock.
  struct PlanCount {
    std::string call, plan;
    std::atomic<bool> ready{false};
    std::atomic<uint64_t> calls{0}, bytes{0};
  };
  static constexpr size_t kPlans = 32;  // paths x collectives a communicator takes
  struct TransportCount {
    std::atomic<const char*> name{nullptr};
    std::atomic<uint64_t> sent{0}, received{0};
  };
  void appendHistograms(
      const std::array<LatencyHistogram, kMetricCallKinds * kMetricSizeClasses>& h,
      const char* family, std::string* out) const;
  void appendPlanCounts(std::string* out, bool bytes) const;

  std::string labels_;
  std::array<PerType, kMetricCallKinds * kTypes * 2> perType_{};  // [kind][type][device]
  std::array<LatencyHistogram, kMetricCallKinds * kMetricSizeClasses> hostLatency_{};
  std::array<LatencyHistogram, kMetricCallKinds * kMetricSizeClasses> enqueueLatency_{};
  std::mutex planMutex_;
  std::array<PlanCount, kPlans> plans_{};
  std::array<TransportCount, kTransports> transports_{};
  std::mutex transportMutex_;  // taking a free transport slot
  std::atomic<uint64_t> peerWaitNs_{0};
  std::array<std::atomic<uint64_t>, lanesNumResults> errors_{};
};

// The live communicators' metrics, and errors that no communicator took.
class MetricsRegistry {
 public:
  static MetricsRegistry& process();  // the C API's one per process
  void add(std::shared_ptr<CommMetrics> m);
  // A destroyed communicator's counters stay in the exposition (a job's
  // last file write comes after its destroys), the newest kRetiredKept.
  void retire(const CommMetrics* m);
  void countError(lanesResult_t code);  // a failure outside any communicator (init)
  // The whole exposition, every family with its HELP and TYPE.
  std::string exposition() const;

 private:
  mutable std::mutex mutex_;
  static constexpr size_t kRetiredKept = 256;
  std::vector<std::shared_ptr<CommMetrics>> comms_;
  std::vector<std::shared_ptr<CommMetrics>> retired_;
  std::array<std::atomic<uint64_t>, lanesNumResults> errors_{};
};

}  // namespace lanes
