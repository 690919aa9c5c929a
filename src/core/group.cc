#include "core/group.h"

#include <algorithm>
#include <cstring>

#include "core/errors.h"
#include "core/init.h"
#include "planner/cost_model.h"

namespace lanes {
namespace {
struct GroupState {
  int depth = 0;
  std::vector<Request> pending;
};
thread_local GroupState tlsGroup;

// The slowest hop this rank's part of `r` crosses, for the cost model.
HopClass hopOf(const Request& r) {
  if (r.onDevice) return HopClass::DeviceStaged;
  HopClass hop = HopClass::SharedMemory;
  for (const Connection* c : r.comm->links.table)
    if (c != nullptr && std::strcmp(c->transportName(), "shm") != 0) hop = HopClass::Socket;
  return hop;
}

double predictSeconds(const Request& r) {
  CostQuery q;
  q.pointToPoint = r.isP2p;
  q.coll = r.args.coll;
  q.bytes = std::max(r.sendBytes, r.recvBytes);
  q.nranks = r.comm->nranks;
  q.hop = hopOf(r);
  return lanes::predictSeconds(q);
}

std::vector<Request> takePending() {
  std::vector<Request> work = std::move(tlsGroup.pending);
  tlsGroup.pending.clear();
  return work;
}
}  // namespace

bool inGroup() { return tlsGroup.depth > 0; }

Status submit(Request request) {
  if (tlsGroup.depth > 0) {
    tlsGroup.pending.push_back(std::move(request));
    return Status::ok();
  }
  std::vector<Request> one;
  one.push_back(std::move(request));
  return executeRequests(one);
}

}  // namespace lanes

using namespace lanes;

extern "C" {

lanesResult_t lanesGroupStart(void) {
  ++tlsGroup.depth;
  return lanesSuccess;
}

lanesResult_t lanesGroupEnd(void) {
  if (tlsGroup.depth == 0)
    return report(nullptr, invalidUsage("lanesGroupEnd called without a matching lanesGroupStart"));
  if (--tlsGroup.depth > 0) return lanesSuccess;
  std::vector<Request> work = takePending();
  Status status = awaitGroupInits();
  if (status) status = executeRequests(work);
  lanesComm_t comm = work.empty() ? nullptr : work.front().comm;
  return report(comm, status);
}

lanesResult_t lanesGroupSimulateEnd(lanesSimInfo_t* simInfo) {
  if (tlsGroup.depth == 0)
    return report(nullptr,
                  invalidUsage("lanesGroupSimulateEnd called without a matching lanesGroupStart"));
  // The group ends whatever follows, as lanesGroupEnd would: a refused simInfo
  // must not leave later calls queued in a group nobody closes.
  if (simInfo == nullptr) return lanesGroupEnd();  // as NCCL: nothing to fill, so run it
  const bool outermost = --tlsGroup.depth == 0;
  std::vector<Request> work = outermost ? takePending() : std::vector<Request>{};
  Status status = outermost ? awaitGroupInits() : Status::ok();
  if (simInfo->magic != LANES_SIM_INFO_MAGIC || simInfo->size < sizeof(lanesSimInfo_t))
    return report(nullptr, invalidArgument("simInfo was not initialised with "
                                           "LANES_SIM_INFO_INITIALIZER (bad magic or size)"));
  double seconds = 0;
  for (const Request& r : work) seconds += predictSeconds(r);
  simInfo->estimatedTime = static_cast<float>(seconds * 1e6);
  return report(work.empty() ? nullptr : work.front().comm, status);
}

}  // extern "C"
