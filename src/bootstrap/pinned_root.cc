// An id every process derives alike from a fixed root address (NCCL_COMM_ID):
// the secret and commId come from the address and the job, as for launchers,
// and only the rank that serves the rendezvous starts the root.
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"

namespace lanes {

Status pinnedUniqueId(const std::string& rootAddr, bool startRoot, lanesUniqueId* out) {
  LaunchEnv env;
  env.rootAddr = rootAddr;
  UniqueIdData id;
  LANES_RETURN_IF_ERROR(launchSecretAndCommId(env, id.secret, &id.commId));
  if (startRoot) return createUniqueIdAndRoot(rootAddr, id.secret, &id.commId, out);
  SocketAddress root;
  LANES_RETURN_IF_ERROR(SocketAddress::parse(rootAddr, &root));
  LANES_RETURN_IF_ERROR(wire::setRootAddress(root, &id));
  return encodeUniqueId(id, out);
}

}  // namespace lanes
