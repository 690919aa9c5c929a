#include "core/flight_dump.h"

#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/env.h"
#include "base/host_id.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/comm_registry.h"
#include "exec/device_path.h"
#include "observe/flight_dump_format.h"

namespace lanes {
namespace {

// The handler posts (sem_post is async-signal-safe; a semaphore holds no
// descriptor); the dumping thread waits. The pid that armed it: a child
// forked after arming has the handler but not the thread, and arms anew.
sem_t signalPosted;
std::atomic<pid_t> armedPid{0};

void onSignal(int sig) {
  // A child forked after arming, that made no communicator: the default
  // action, as if Lanes had never been there.
  if (getpid() != armedPid.load(std::memory_order_relaxed)) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  const int saved = errno;
  sem_post(&signalPosted);
  errno = saved;
}

void dumpEveryLiveComm() {
  for (lanesComm_t handle : liveComms()) {
    CommRef ref(handle);
    if (ref) (void)dumpFlightRecord(handle, "signal");
  }
}

void settleDeviceWork(lanesComm* comm) {
  comm->flight->settleMarkers([comm](int32_t marker) { return deviceWorkPassed(comm, marker); });
}

}  // namespace

std::string flightDumpPath(const lanesComm* comm) {
  const std::string prefix = envString("LANES_FLIGHT_RECORDER_FILE").value_or("/tmp/lanes-flight");
  return prefix + "." + comm->idText() + ".rank" + std::to_string(comm->rank) + ".json";
}

bool flightHasUnfinished(lanesComm* comm) {
  if (!comm->flight->on() || !comm->observed.load(std::memory_order_acquire)) return false;
  settleDeviceWork(comm);
  const std::vector<FlightEntry> entries = comm->flight->snapshot();
  for (const FlightEntry& e : entries)
    if (e.state == FlightState::Running || e.state == FlightState::Enqueued) return true;
  // A failure the communicator lived through (a refused call) is old news
  // once a later call completed.
  return !entries.empty() && entries.back().state == FlightState::Failed;
}

std::string dumpFlightRecord(lanesComm* comm, const char* reason) {
  FlightRecorder& flight = *comm->flight;
  if (!flight.on() || !comm->observed.load(std::memory_order_acquire)) return "";
  std::lock_guard<std::mutex> dumping(comm->flightDumpMutex);
  settleDeviceWork(comm);
  FlightDumpHeader h;
  h.commId = comm->idText();
  h.commName = comm->options.name;
  h.rank = comm->rank;
  h.nranks = comm->nranks;
  h.cudaDev = comm->cudaDev;
  h.host = hostName();
  h.pid = getpid();
  h.reason = reason;
  if (comm->failure.asyncError.load() != lanesSuccess) {
    std::lock_guard<std::mutex> lock(comm->failure.mutex);
    h.error = comm->failure.message;
  }
  h.dumpedUs = flightNowUs();
  h.capacity = flight.capacity();
  h.issued = flight.issued();
  const std::string text = flightDumpJson(h, flight.snapshot());
  const std::string path = flightDumpPath(comm);
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f != nullptr;
  if (ok) ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f != nullptr && std::fclose(f) != 0) ok = false;
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    const int err = errno;
    std::remove(tmp.c_str());
    LANES_WARN(Coll, comm->rank,
               "flight recorder: could not write %s (%s); set LANES_FLIGHT_RECORDER_FILE to a "
               "writable path prefix",
               path.c_str(), std::strerror(err));
    return "";
  }
  LANES_WARN(Coll, comm->rank,
             "flight recorder (%s): the last %zu operations of %s are in %s; lanes-flight "
             "merges every rank's file",
             reason, std::min<size_t>(h.capacity, h.issued), comm->describe().c_str(),
             path.c_str());
  return path;
}

void armFlightSignal() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (armedPid.load() == getpid()) return;
  struct sigaction old {};
  if (sigaction(SIGUSR1, nullptr, &old) != 0) return;
  // Ours from before a fork is ours to re-arm; anyone else's stays.
  if (old.sa_handler != SIG_DFL && old.sa_handler != onSignal) return;
  if (sem_init(&signalPosted, 0, 0) != 0) return;
  try {
    std::thread([] {
      for (;;) {
        if (sem_wait(&signalPosted) == 0) dumpEveryLiveComm();
      }
    }).detach();  // the process's lifetime: a signal may come at any time
  } catch (const std::system_error&) {
    return;
  }
  struct sigaction action {};
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
  armedPid.store(getpid());
}

}  // namespace lanes
