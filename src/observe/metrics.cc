#include "observe/metrics.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "base/datatype.h"

namespace lanes {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

// A label value as the exposition format wants it: \, " and newline escaped.
std::string escapeLabel(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void appendName(std::string* out, const char* family, const std::string& labels) {
  *out += family;
  if (!labels.empty()) {
    *out += '{';
    *out += labels;
    *out += '}';
  }
  *out += ' ';
}

void appendLine(std::string* out, const char* family, const std::string& labels, uint64_t value) {
  appendName(out, family, labels);
  *out += std::to_string(value);
  *out += '\n';
}

void appendLine(std::string* out, const char* family, const std::string& labels, double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  appendName(out, family, labels);
  *out += text;
  *out += '\n';
}

void appendFamily(std::string* out, const char* name, const char* type, const char* help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

std::string bucketBound(double le) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", le);
  return text;
}

}  // namespace

const char* metricCallName(size_t kind) {
  if (kind == kMetricSend) return "send";
  if (kind == kMetricRecv) return "recv";
  return collTypeName(static_cast<CollType>(kind));
}

size_t metricSizeClass(uint64_t bytes) {
  size_t c = 0;
  for (uint64_t limit = 4096; c + 1 < kMetricSizeClasses && bytes > limit; limit *= 16) ++c;
  return c;
}

const char* metricSizeClassName(size_t sizeClass) {
  static constexpr const char* kNames[kMetricSizeClasses] = {"0-4K", "4K-64K", "64K-1M", "1M-16M",
                                                             "16M+"};
  return kNames[sizeClass];
}

const char* metricErrorKind(lanesResult_t code) {
  switch (code) {
    case lanesSuccess:
      return "none";
    case lanesUnhandledCudaError:
      return "cuda_error";
    case lanesSystemError:
      return "system_error";
    case lanesInternalError:
      return "internal_error";
    case lanesInvalidArgument:
      return "invalid_argument";
    case lanesInvalidUsage:
      return "invalid_usage";
    case lanesRemoteError:
      return "remote_error";
    case lanesInProgress:
      return "in_progress";
    case lanesTimeout:
      return "timeout";
    default:
      return "other";
  }
}

void LatencyHistogram::observe(uint64_t ns) {
  const double seconds = static_cast<double>(ns) * 1e-9;
  size_t b = 0;
  while (b < kLatencyBuckets.size() && seconds > kLatencyBuckets[b]) ++b;
  buckets[b].fetch_add(1, kRelaxed);
  count.fetch_add(1, kRelaxed);
  sumNs.fetch_add(ns, kRelaxed);
}

CommMetrics::CommMetrics(const std::string& comm, const std::string& commId, int rank)
    : labels_("comm=\"" + escapeLabel(comm) + "\",comm_id=\"" + escapeLabel(commId) + "\",rank=\"" +
              std::to_string(rank) + "\"") {}

void CommMetrics::countCall(size_t kind, lanesDataType_t type, bool onDevice, uint64_t bytes,
                            uint64_t ns, bool timed) {
  if (kind >= kMetricCallKinds || static_cast<size_t>(type) >= kTypes) return;
  PerType& t = perType_[(kind * kTypes + static_cast<size_t>(type)) * 2 + (onDevice ? 1 : 0)];
  t.calls.fetch_add(1, kRelaxed);
  t.bytes.fetch_add(bytes, kRelaxed);
  if (!timed) return;
  auto& hist = onDevice ? enqueueLatency_ : hostLatency_;
  hist[kind * kMetricSizeClasses + metricSizeClass(bytes)].observe(ns);
}

void CommMetrics::countPlan(std::string_view call, std::string_view plan, uint64_t bytes) {
  for (int pass = 0; pass < 2; ++pass) {
    for (PlanCount& p : plans_) {
      if (!p.ready.load(std::memory_order_acquire)) break;
      if (p.call == call && p.plan == plan) {
        p.calls.fetch_add(1, kRelaxed);
        p.bytes.fetch_add(bytes, kRelaxed);
        return;
      }
    }
    if (pass == 1) return;  // every slot taken: more plans than a communicator has
    std::lock_guard<std::mutex> lock(planMutex_);
    for (PlanCount& p : plans_) {
      if (p.ready.load(std::memory_order_acquire)) {
        if (p.call == call && p.plan == plan) break;  // another thread claimed it
        continue;
      }
      p.call = call;
      p.plan = plan;
      p.ready.store(true, std::memory_order_release);
      break;
    }
  }
}

void CommMetrics::countTransport(const char* transport, uint64_t sent, uint64_t received) {
  for (int pass = 0; pass < 2; ++pass) {
    for (TransportCount& t : transports_) {
      const char* name = t.name.load(std::memory_order_acquire);
      if (name == nullptr) break;
      if (name == transport || std::string_view(name) == transport) {
        t.sent.fetch_add(sent, kRelaxed);
        t.received.fetch_add(received, kRelaxed);
        return;
      }
    }
    if (pass == 1) return;  // every slot taken: more transports than any communicator has
    std::lock_guard<std::mutex> lock(transportMutex_);
    for (TransportCount& t : transports_) {
      const char* name = t.name.load(std::memory_order_acquire);
      if (name != nullptr && std::string_view(name) == transport) break;
      if (name == nullptr) {
        t.name.store(transport, std::memory_order_release);
        break;
      }
    }
  }
}

void CommMetrics::countPeerWait(uint64_t ns) { peerWaitNs_.fetch_add(ns, kRelaxed); }

void CommMetrics::countError(lanesResult_t code) {
  if (code > lanesSuccess && code < lanesNumResults) errors_[code].fetch_add(1, kRelaxed);
}

void CommMetrics::appendCalls(std::string* out) const {
  for (size_t i = 0; i < perType_.size(); ++i) {
    const uint64_t calls = perType_[i].calls.load(kRelaxed);
    if (calls == 0) continue;
    const size_t kind = i / 2 / kTypes;
    const auto type = static_cast<lanesDataType_t>(i / 2 % kTypes);
    appendLine(out, "lanes_calls_total",
               labels_ + ",collective=\"" + metricCallName(kind) + "\",datatype=\"" +
                   datatypeName(type) + "\",memory=\"" + (i % 2 ? "device" : "host") + "\"",
               calls);
  }
}

void CommMetrics::appendBytes(std::string* out) const {
  for (size_t i = 0; i < perType_.size(); ++i) {
    if (perType_[i].calls.load(kRelaxed) == 0) continue;
    const size_t kind = i / 2 / kTypes;
    const auto type = static_cast<lanesDataType_t>(i / 2 % kTypes);
    appendLine(out, "lanes_bytes_total",
               labels_ + ",collective=\"" + metricCallName(kind) + "\",datatype=\"" +
                   datatypeName(type) + "\",memory=\"" + (i % 2 ? "device" : "host") + "\"",
               perType_[i].bytes.load(kRelaxed));
  }
}

void CommMetrics::appendHistograms(
    const std::array<LatencyHistogram, kMetricCallKinds * kMetricSizeClasses>& hists,
    const char* family, std::string* out) const {
  const std::string bucket = std::string(family) + "_bucket";
  const std::string sum = std::string(family) + "_sum";
  const std::string count = std::string(family) + "_count";
  for (size_t i = 0; i < hists.size(); ++i) {
    const LatencyHistogram& h = hists[i];
    const uint64_t n = h.count.load(kRelaxed);
    if (n == 0) continue;
    const std::string labels = labels_ + ",collective=\"" + metricCallName(i / kMetricSizeClasses) +
                               "\",size_class=\"" + metricSizeClassName(i % kMetricSizeClasses) +
                               "\"";
    // Read once, summed in order, so the buckets are cumulative and the
    // +Inf bucket equals the count this sample shows.
    uint64_t cumulative = 0;
    for (size_t b = 0; b < h.buckets.size(); ++b) {
      cumulative += h.buckets[b].load(kRelaxed);
      const std::string le = b < kLatencyBuckets.size() ? bucketBound(kLatencyBuckets[b]) : "+Inf";
      appendLine(out, bucket.c_str(), labels + ",le=\"" + le + "\"", cumulative);
    }
    appendLine(out, sum.c_str(), labels, static_cast<double>(h.sumNs.load(kRelaxed)) * 1e-9);
    appendLine(out, count.c_str(), labels, cumulative);
  }
}

void CommMetrics::appendHostLatency(std::string* out) const {
  appendHistograms(hostLatency_, "lanes_host_call_seconds", out);
}

void CommMetrics::appendEnqueueLatency(std::string* out) const {
  appendHistograms(enqueueLatency_, "lanes_device_enqueue_seconds", out);
}

void CommMetrics::appendPlanCounts(std::string* out, bool bytes) const {
  for (const PlanCount& p : plans_) {
    if (!p.ready.load(std::memory_order_acquire)) break;
    appendLine(out, bytes ? "lanes_plan_bytes_total" : "lanes_plan_calls_total",
               labels_ + ",collective=\"" + p.call + "\",plan=\"" + escapeLabel(p.plan) + "\"",
               (bytes ? p.bytes : p.calls).load(kRelaxed));
  }
}

void CommMetrics::appendPlanCalls(std::string* out) const { appendPlanCounts(out, false); }
void CommMetrics::appendPlanBytes(std::string* out) const { appendPlanCounts(out, true); }

void CommMetrics::appendTransports(std::string* out) const {
  for (const TransportCount& t : transports_) {
    const char* name = t.name.load(std::memory_order_acquire);
    if (name == nullptr) break;
    const std::string labels = labels_ + ",transport=\"" + name + "\"";
    appendLine(out, "lanes_transport_bytes_total", labels + ",direction=\"sent\"",
               t.sent.load(kRelaxed));
    appendLine(out, "lanes_transport_bytes_total", labels + ",direction=\"received\"",
               t.received.load(kRelaxed));
  }
}

void CommMetrics::appendPeerWait(std::string* out) const {
  appendLine(out, "lanes_peer_wait_seconds_total", labels_,
             static_cast<double>(peerWaitNs_.load(kRelaxed)) * 1e-9);
}

void CommMetrics::appendErrors(std::string* out) const {
  for (int code = lanesSuccess + 1; code < lanesNumResults; ++code) {
    const uint64_t n = errors_[code].load(kRelaxed);
    if (n > 0)
      appendLine(out, "lanes_errors_total",
                 labels_ + ",kind=\"" + metricErrorKind(static_cast<lanesResult_t>(code)) + "\"",
                 n);
  }
}

MetricsRegistry& MetricsRegistry::process() {
  static MetricsRegistry registry;
  return registry;
}

void MetricsRegistry::add(std::shared_ptr<CommMetrics> m) {
  std::lock_guard<std::mutex> lock(mutex_);
  comms_.push_back(std::move(m));
}

void MetricsRegistry::retire(const CommMetrics* m) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(comms_.begin(), comms_.end(),
                         [m](const std::shared_ptr<CommMetrics>& c) { return c.get() == m; });
  if (it == comms_.end()) return;
  retired_.push_back(std::move(*it));
  comms_.erase(it);
  if (retired_.size() > kRetiredKept) retired_.erase(retired_.begin());
}

void MetricsRegistry::countError(lanesResult_t code) {
  if (code > lanesSuccess && code < lanesNumResults) errors_[code].fetch_add(1, kRelaxed);
}

std::string MetricsRegistry::exposition() const {
  std::vector<std::shared_ptr<CommMetrics>> comms;
  size_t live = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comms = comms_;
    live = comms.size();
    comms.insert(comms.end(), retired_.begin(), retired_.end());
  }
  std::string out;
  out.reserve(4096 + comms.size() * 4096);
  appendFamily(&out, "lanes_communicators", "gauge", "Communicator ranks alive in this process.");
  appendLine(&out, "lanes_communicators", "", static_cast<uint64_t>(live));
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    void (CommMetrics::*append)(std::string*) const;
  };
  static constexpr Family kFamilies[] = {
      {"lanes_calls_total", "counter",
       "Collective and send/recv calls, by kind, datatype and buffer memory.",
       &CommMetrics::appendCalls},
      {"lanes_bytes_total", "counter", "Bytes the calls read from their send buffers.",
       &CommMetrics::appendBytes},
      {"lanes_host_call_seconds", "histogram",
       "Time from call to return of calls on host buffers (a group counts once).",
       &CommMetrics::appendHostLatency},
      {"lanes_device_enqueue_seconds", "histogram",
       "Time calls on device buffers took to enqueue their work on the stream.",
       &CommMetrics::appendEnqueueLatency},
      {"lanes_plan_calls_total", "counter", "Calls by the plan the planner chose for them.",
       &CommMetrics::appendPlanCalls},
      {"lanes_plan_bytes_total", "counter", "Bytes of the calls by the plan they ran on.",
       &CommMetrics::appendPlanBytes},
      {"lanes_transport_bytes_total", "counter",
       "Bytes the host engine moved to and from peers, by transport.",
       &CommMetrics::appendTransports},
      {"lanes_peer_wait_seconds_total", "counter",
       "Time the host engine spent waiting for peers (nothing it could move).",
       &CommMetrics::appendPeerWait},
  };
  for (const Family& f : kFamilies) {
    appendFamily(&out, f.name, f.type, f.help);
    for (const auto& c : comms) (c.get()->*f.append)(&out);
  }
  appendFamily(&out, "lanes_errors_total", "counter",
               "Calls that returned an error, by result (timeout, remote_error, ...); "
               "comm=\"\" outside any communicator.");
  for (const auto& c : comms) c->appendErrors(&out);
  for (int code = lanesSuccess + 1; code < lanesNumResults; ++code) {
    const uint64_t n = errors_[code].load(kRelaxed);
    if (n > 0)
      appendLine(&out, "lanes_errors_total",
                 std::string("comm=\"\",comm_id=\"\",rank=\"\",kind=\"") +
                     metricErrorKind(static_cast<lanesResult_t>(code)) + "\"",
                 n);
  }
  return out;
}

}  // namespace lanes
