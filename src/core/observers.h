// Attaching what watches a communicator: its flight recorder's signal dump
// and its metrics (LANES_METRICS, read once per process).
#pragma once

struct lanesComm;

namespace lanes {

// Whether LANES_METRICS asks for metrics (a bad value warns once: off).
bool metricsOn();
// At the end of a communicator's set-up: its metrics join the process's
// (the exporter starts with the first), and SIGUSR1 dumps its flight
// recorder. A metrics endpoint that cannot start warns; the job goes on.
void attachObservers(lanesComm* comm);

}  // namespace lanes
