#include "core/group.h"

#include "core/errors.h"

namespace lanes {
namespace {
struct GroupState {
  int depth = 0;
  std::vector<Request> pending;
};
thread_local GroupState tlsGroup;
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
  std::vector<Request> work = std::move(tlsGroup.pending);
  tlsGroup.pending.clear();
  Status status = executeRequests(work);
  lanesComm_t comm = work.empty() ? nullptr : work.front().comm;
  return report(comm, status);
}

}  // extern "C"
