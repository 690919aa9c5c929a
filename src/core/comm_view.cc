// The core's side of exec/comm_view.h: the narrow view the device paths have
// of a communicator.
#include "exec/comm_view.h"

#include "core/comm.h"
#include "core/comm_topology.h"
#include "core/execute.h"
#include "core/plan_record.h"

namespace lanes {

DevicePaths::~DevicePaths() = default;

int CommView::rank() const { return comm_->rank; }
int CommView::nranks() const { return comm_->nranks; }
int CommView::cudaDev() const { return comm_->cudaDev; }
int CommView::processRanks() const { return comm_->processRanks; }
Bootstrap& CommView::bootstrap() const { return *comm_->bootstrap; }
bool CommView::hasBootstrap() const { return comm_->bootstrap != nullptr; }
uint64_t CommView::commId() const { return comm_->bootstrap->id().commId; }
double CommView::timeoutSeconds() const { return comm_->options.timeoutSeconds; }
std::string CommView::describe() const { return comm_->describe(); }
DevicePaths& CommView::paths() const { return comm_->devicePaths; }
const SelectionConfig& CommView::selection() const { return comm_->config.selection; }
const CommConfig& CommView::config() const { return comm_->config; }
void CommView::notePlan(const std::string& call, const std::string& plan, uint64_t bytes) const {
  notePlanOf(comm_, call, plan, bytes);
}
bool CommView::processesTimeSliceGpu() const { return lanes::processesTimeSliceGpu(comm_); }
int CommView::ranksPerGpu() const { return lanes::ranksPerGpu(comm_); }
bool CommView::allOnOneHost() const { return lanes::allOnOneHost(comm_); }
const std::string& CommView::p2pRefusal() const { return comm_->p2pRefusal; }
bool CommView::gpuLocalCpus(cpu_set_t* out) const { return lanes::gpuLocalCpus(comm_, out); }
bool CommView::someProcessHoldsSeveralRanks() const {
  return lanes::someProcessHoldsSeveralRanks(comm_);
}
bool CommView::threadsBesideProcesses() const { return lanes::threadsBesideProcesses(comm_); }
std::vector<int> CommView::ranksSharingMyContext() const {
  return lanes::ranksSharingMyContext(comm_);
}

std::vector<int> CommView::rankNumaNodes() const {
  std::vector<int> nodes;
  for (const RankPlacement& p : comm_->placement) nodes.push_back(p.numa);
  return nodes;
}

void CommView::fail(lanesResult_t code, const std::string& message) const {
  comm_->fail(code, message);
}
Status CommView::checkAbort() const { return comm_->checkAbort(); }
bool CommView::failed() const {
  return comm_->failure.aborted.load() || comm_->failure.asyncError.load() != lanesSuccess;
}
const std::atomic<bool>& CommView::abortFlag() const { return comm_->failure.aborted; }

size_t CommView::addFailureHook(FailureHook hook) const {
  std::lock_guard<std::mutex> lock(comm_->failure.mutex);
  if (comm_->failure.asyncError.load() != lanesSuccess) hook(comm_->failure.message);
  comm_->failure.hooks.push_back(std::move(hook));
  return comm_->failure.hooks.size() - 1;
}

void CommView::removeFailureHook(size_t slot) const {
  std::lock_guard<std::mutex> lock(comm_->failure.mutex);
  if (slot < comm_->failure.hooks.size()) comm_->failure.hooks[slot] = nullptr;
}

Status CommView::runOnHost(std::vector<Request>& requests) const {
  std::lock_guard<std::mutex> engine(comm_->engineMutex);
  return executeHostRequests(requests);
}

}  // namespace lanes
