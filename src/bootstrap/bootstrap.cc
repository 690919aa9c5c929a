// Bootstrap::create: the rendezvous at the root, the mesh (its connections
// open as pairs first talk), and its root channel.
#include "bootstrap/bootstrap.h"

#include <cstdio>
#include <cstring>

#include "base/env.h"
#include "base/log.h"
#include "bootstrap/control_mesh.h"
#include "bootstrap/mesh_channel.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/wire.h"

namespace lanes {
namespace {

// A bootstrap wait that expired names the variable that sets it: the result
// is lanesTimeout, whose generic text names LANES_TIMEOUT, the wrong knob
// here. (The root's own message names it already.)
Status nameBootstrapExpiry(Status st, double seconds) {
  if (st.code() != lanesTimeout ||
      st.message().find("LANES_BOOTSTRAP_TIMEOUT") != std::string::npos)
    return st;
  char waited[32];
  std::snprintf(waited, sizeof(waited), "%.0f", seconds);
  return timeoutError(st.message() + "; the bootstrap gave up after " + waited +
                      " s (LANES_BOOTSTRAP_TIMEOUT)");
}

}  // namespace

Status Bootstrap::create(const UniqueIdData& id, int nranks, const RankInfo& self,
                         Deadline deadline, std::unique_ptr<Bootstrap>* out) {
  if (nranks < 1)
    return invalidArgument("nranks is " + std::to_string(nranks) +
                           "; a communicator needs at "
                           "least one rank");
  if (self.rank < 0 || self.rank >= nranks)
    return invalidArgument("rank " + std::to_string(self.rank) + " is outside 0.." +
                           std::to_string(nranks - 1) + " for a communicator of " +
                           std::to_string(nranks) + " ranks");
  const double budget = deadline.remainingMs() / 1000.0;
  Socket listener;
  std::vector<RankInfo> ranks;
  std::vector<SocketAddress> listens;
  Status st = joinRoot(id, nranks, self, deadline, &listener, &ranks, &listens);
  if (!st.isOk()) return nameBootstrapExpiry(st, budget);
  auto mesh = std::make_shared<ControlMesh>(id, self.rank, std::move(ranks), std::move(listens),
                                            std::move(listener));
  LANES_RETURN_IF_ERROR(mesh->start());
  LANES_INFO(Bootstrap, self.rank, "control mesh of %d ranks is up", nranks);
  std::vector<int> everyone(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) everyone[static_cast<size_t>(r)] = r;
  st = MeshChannel::gatherTable(mesh, self, deadline);
  if (!st.isOk()) return nameBootstrapExpiry(st, budget);
  std::unique_ptr<Bootstrap> root;
  LANES_RETURN_IF_ERROR(
      MeshChannel::open(std::move(mesh), kRootChannel, std::move(everyone), self, deadline, &root));
  // Every rank has its whole table once this returns (each gathered it
  // before entering), so any pair may talk from here on.
  st = root->barrier(deadline);
  if (!st.isOk()) return nameBootstrapExpiry(st, budget);
  *out = std::move(root);
  return Status::ok();
}

}  // namespace lanes
