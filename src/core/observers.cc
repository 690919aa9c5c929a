#include "core/observers.h"

#include <unistd.h>

#include <cstring>
#include <optional>
#include <vector>

#include "base/env.h"
#include "base/host_id.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/flight_dump.h"
#include "observe/metrics_exporter.h"

namespace lanes {
namespace {

const std::optional<MetricsSpec>& processMetricsSpec() {
  static const std::optional<MetricsSpec> spec = []() -> std::optional<MetricsSpec> {
    const std::optional<std::string> text = envString("LANES_METRICS");
    if (!text) return std::nullopt;
    MetricsSpec parsed;
    if (Status s = parseMetricsSpec(*text, &parsed); !s) {
      envWarnOnce("LANES_METRICS", *text, s.message(), "no metrics");
      return std::nullopt;
    }
    return parsed;
  }();
  return spec;
}

// The process's index among the ranks of its host, from its lowest rank.
int localIndexOf(const lanesComm* comm) {
  if (comm->hostOf.empty()) return 0;
  int index = 0;
  for (int r = 0; r < comm->rank; ++r) index += comm->hostOf[r] == comm->hostOf[comm->rank];
  return index;
}

std::string metricsName(const lanesComm* comm) {
  return comm->options.name.empty() ? comm->idText() : comm->options.name;
}

// This rank's clock against rank 0's, from ping-pongs over the control
// connections (0 on rank 0, or where they fail: a warning says so).
int64_t clockOffsetToRankZero(lanesComm* comm) {
  constexpr uint32_t kTag = 0x4c540001;  // below the bootstrap's reserved tags
  constexpr int kSamples = 8;
  Bootstrap& b = *comm->bootstrap;
  const Deadline deadline = Deadline::after(5);
  Status s = Status::ok();
  std::vector<uint8_t> reply;
  if (comm->rank == 0) {
    for (int r = 1; r < comm->nranks && s; ++r)
      for (int k = 0; k < kSamples && s; ++k) {
        s = b.recv(r, kTag, &reply, deadline);
        const int64_t now = flightNowUs();
        if (s) s = b.send(r, kTag, &now, sizeof now);
      }
  } else {
    int64_t sent[kSamples], peer[kSamples], received[kSamples];
    for (int k = 0; k < kSamples && s; ++k) {
      sent[k] = flightNowUs();
      s = b.send(0, kTag, &sent[k], sizeof sent[k]);
      if (s) s = b.recv(0, kTag, &reply, deadline);
      received[k] = flightNowUs();
      if (s && reply.size() != sizeof(int64_t))
        s = internalError("a clock sample of the wrong size");
      if (s) std::memcpy(&peer[k], reply.data(), sizeof(int64_t));
    }
    if (s) return clockOffsetUs(sent, peer, received, kSamples);
  }
  if (!s)
    LANES_WARN(Init, comm->rank,
               "LANES_TRACE_FILE: the clock exchange with rank 0 failed (%s); this rank's trace "
               "keeps its own clock. Set LANES_TRACE_FILE on every rank.",
               s.message().c_str());
  return 0;
}

void attachTrace(lanesComm* comm) {
  static const std::optional<std::string> prefix = envString("LANES_TRACE_FILE");
  if (!prefix) return;
  if (!comm->flight->on()) {
    envWarnOnce("LANES_TRACE_FILE", *prefix, "needs the flight recorder (LANES_FLIGHT_RECORDER=0)",
                "no trace");
    return;
  }
  const int64_t offset = comm->nranks > 1 ? clockOffsetToRankZero(comm) : 0;
  const std::string path =
      *prefix + "." + comm->idText() + ".rank" + std::to_string(comm->rank) + ".json";
  std::string label = comm->options.name.empty() ? comm->idText() : comm->options.name;
  label += " · " + hostName() + " pid " + std::to_string(getpid());
  if (Status s = TraceWriter::open(path, comm->rank, label, offset, &comm->trace); !s) {
    envWarnOnce("LANES_TRACE_FILE", *prefix, s.message(), "no trace");
    return;
  }
  LANES_INFO(Init, comm->rank, "trace: %s (clock %+lld us from rank 0's)", path.c_str(),
             static_cast<long long>(offset));
}

// Its trace, metrics and SIGUSR1 dump.
void attachObserversOnce(lanesComm* comm) {
  if (comm->flight->on()) armFlightSignal();
  attachTrace(comm);
  const std::optional<MetricsSpec>& spec = processMetricsSpec();
  if (!spec) return;
  comm->metrics = std::make_shared<CommMetrics>(metricsName(comm), comm->idText(), comm->rank);
  MetricsRegistry::process().add(comm->metrics);
  MetricsPlace place;
  place.localIndex = localIndexOf(comm);
  place.rank = comm->rank;
  if (Status s = MetricsExporter::startOnce(*spec, place); !s)
    envWarnOnce("LANES_METRICS", *envString("LANES_METRICS"), s.message(),
                "counting, with nowhere to show it");
}

}  // namespace

bool metricsOn() { return processMetricsSpec().has_value(); }

void attachObservers(lanesComm* comm) {
  attachObserversOnce(comm);
  comm->observed.store(true, std::memory_order_release);
}

}  // namespace lanes
