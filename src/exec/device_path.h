// The device-buffer path, seen from the core. Built over CUDA when the
// toolkit is found (src/exec/cuda), as a stub otherwise (src/exec/nocuda),
// so the core never includes CUDA headers.
#pragma once

#include <functional>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "exec/call_facts.h"
#include "lanes/lanes.h"

namespace lanes {

struct Request;
}  // namespace lanes
struct lanesComm;
namespace lanes {

enum class MemSpace { Host, Device };

struct BufferInfo {
  MemSpace space = MemSpace::Host;
  int device = -1;  // CUDA device of a device buffer
};

// Whether this process can use a CUDA device at all (driver present, >= 1 GPU).
bool cudaUsable();
// The calling thread's current CUDA device, or -1 without CUDA.
int currentCudaDevice();
// Number of visible CUDA devices (0 without CUDA).
int cudaDeviceCount();
// Whether contexts on `device` run under MPS, so processes sharing it run at
// once instead of taking time slices (false without CUDA or when unknown).
bool cudaDeviceRunsMps(int device);
// Makes `device` current for the calling thread (no-op without CUDA).
Status setCudaDevice(int device);

// Synchronous copy of `bytes` from host or device memory into host memory.
Status copyToHost(void* dst, const void* src, size_t bytes);

// Device memory of the current GPU for user buffers (lanesMemAlloc): plain
// cudaMalloc memory, which every device path takes.
Status deviceAlloc(void** ptr, size_t bytes);
Status deviceFree(void* ptr);

// Host memory (pageable, pinned or unknown) or device memory of which GPU.
Status classifyBuffer(const void* ptr, BufferInfo* out);

// Enqueues requests on device buffers of ONE communicator on `stream` and
// returns without waiting: the work runs after what is already on the
// stream, and later work on the stream waits for it.
// `chooser` picks each batch's path (planner/registry.h); `planned` runs once
// every part's path is chosen and noted (notePlan), before any is enqueued.
Status enqueueDeviceRequests(std::vector<Request>& requests, cudaStream_t stream,
                             const PathChooser& chooser, const std::function<void()>& planned);
// Whether `stream` is cudaStreamPerThread, which each thread resolves to its own stream.
bool streamIsPerThread(cudaStream_t stream);

// Each device path's setup, run by the registry's entries at init
// (planner/registry.h: setUpDevicePaths) on a communicator whose ranks all
// have a GPU. Collective: every rank runs each, in the same order, before any
// work is enqueued; a path that cannot serve turns itself off alike on every
// rank. setupProxyPath also loads every kernel: loaded lazily, at a first
// launch inside a call, loading can wait for streams parked on peers.
Status setupProxyPath(lanesComm* comm);
Status setupSharedContextPath(lanesComm* comm);
Status setupLlPath(lanesComm* comm);
Status setupStagedPath(lanesComm* comm);  // the pairs' slots too
// After the setups: the facts every later choice reads (call_facts.h).
void settleDevicePaths(lanesComm* comm);

// Completion markers of device work, for the flight recorder: the device
// path records one (an event) on the batch's stream after each batch.
struct DeviceMarker {
  int32_t marker = -1;    // -1: none (no CUDA, or the stream is capturing)
  bool captured = false;  // the stream captures into a CUDA Graph
};
DeviceMarker markDeviceWork(lanesComm* comm, cudaStream_t stream);
// Whether the work before `marker` has passed (false when unknown).
bool deviceWorkPassed(lanesComm* comm, int32_t marker);

// Makes the markers' events (at init, with the proxy path; none where the
// flight recorder is off).
Status setUpWorkMarkers(lanesComm* comm);
// The markers' events (src/exec/cuda/work_markers.cc).
class WorkMarkers {
 public:
  virtual ~WorkMarkers() = default;
};

// Per-communicator device state (proxy thread, pinned staging); released at
// destroy after pending work drained or was failed.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  // Returns once all device work enqueued so far has been carried out on the
  // host side, so a host-memory call keeps the communicator's issue order.
  virtual Status drain(Deadline deadline) = 0;
};

}  // namespace lanes
