// Where the process's metrics go (LANES_METRICS, docs/observability.md): an
// HTTP endpoint Prometheus scrapes, and/or a file rewritten at an interval
// (for node_exporter's textfile collector, or a job without open ports).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lanes {

struct MetricsSpec {
  bool http = false;
  std::string address = "127.0.0.1";  // loopback unless the user names an address
  int port = 0;                       // 0: one the kernel picks (logged)
  std::string file;                   // may hold %h (host), %p (pid), %r (rank)
  double intervalSeconds = 10;        // between rewrites of `file`
  bool any() const { return http || !file.empty(); }
};

// Parses LANES_METRICS: items separated by commas, each one of
//   http=PORT | http=ADDRESS:PORT | file=PATH | interval=SECONDS
// ("http=9464", "http=0.0.0.0:9464,file=/var/lib/lanes/%h-%p.prom,interval=15").
// Fails naming the item that is wrong.
Status parseMetricsSpec(std::string_view text, MetricsSpec* out);

// Where this process stands in its first communicator, which spreads the
// processes of one host over ports and files.
struct MetricsPlace {
  int localIndex = 0;  // the process's index among its host's ranks: port = PORT + localIndex
  int rank = 0;        // %r
};

// The process's one exporter: started by the first communicator that asks
// and kept until exit (a last file write then), whatever comes and goes.
class MetricsExporter {
 public:
  // Starts it once per process; later calls return the first call's result
  // and change nothing.
  static Status startOnce(const MetricsSpec& spec, const MetricsPlace& place);
  // The port served, 0 where there is no endpoint (tests, the log).
  static int servedPort();
};

}  // namespace lanes
