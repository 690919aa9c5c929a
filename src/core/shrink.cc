// lanesCommShrink: the ranks of a communicator not in an exclude list form a
// new one, in their old order. Made for recovery: the parent may have failed
// because an excluded rank died, so nothing but the control mesh between the
// survivors is used, and a dead survivor is reported at once.
#include <algorithm>
#include <string>
#include <vector>

#include "core/comm_registry.h"
#include "core/errors.h"
#include "core/init.h"
#include "core/split.h"

using namespace lanes;

namespace {
// One tag for every shrink of a communicator: only the survivors of each call
// it, so a count per rank would drift between them; the mailbox keeps each
// peer's messages of a tag in order, and the fingerprint catches a mismatch.
constexpr uint32_t kShrinkTag = 0x53484b00u;  // "SHK" + sequence

Status checkExcludeList(const lanesComm* comm, const int* list, int count) {
  // As NCCL: a shrink that excludes nobody is refused (lanesCommSplit copies).
  if (count < 1)
    return invalidArgument("lanesCommShrink: excludeRanksCount is " + std::to_string(count) +
                           "; name at least one rank to exclude");
  if (list == nullptr)
    return invalidArgument("lanesCommShrink: excludeRanksList is NULL but excludeRanksCount is " +
                           std::to_string(count));
  std::vector<bool> seen(comm->nranks, false);
  for (int i = 0; i < count; ++i) {
    const int r = list[i];
    if (r < 0 || r >= comm->nranks)
      return invalidArgument("lanesCommShrink: excludeRanksList[" + std::to_string(i) + "] is " +
                             std::to_string(r) + ", outside 0.." +
                             std::to_string(comm->nranks - 1) + " of communicator " +
                             comm->describe());
    if (seen[r])
      return invalidArgument("lanesCommShrink: rank " + std::to_string(r) +
                             " appears more than once in excludeRanksList");
    seen[r] = true;
  }
  // Before the caller's own membership: excluding everyone also excludes the caller.
  if (count == comm->nranks)
    return invalidArgument("lanesCommShrink: excludeRanksList names all " +
                           std::to_string(comm->nranks) + " ranks of communicator " +
                           comm->describe() + "; at least one must remain");
  if (seen[comm->rank])
    return invalidArgument("lanesCommShrink: rank " + std::to_string(comm->rank) +
                           " is in excludeRanksList; excluded ranks must not call lanesCommShrink");
  return Status::ok();
}

// Every survivor must compute the same value from the same list.
uint64_t fingerprint(const std::vector<int>& survivors) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (int r : survivors) h = (h ^ static_cast<uint64_t>(r)) * 1099511628211ull;
  return h;
}

Status shrink(lanesComm* comm, const int* list, int count, lanesComm_t* newcomm,
              lanesConfig_t* config, int flags) {
  if (newcomm == nullptr) return invalidArgument("lanesCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  if (flags != LANES_SHRINK_DEFAULT && flags != LANES_SHRINK_ABORT)
    return invalidArgument("lanesCommShrink: shrinkFlags is " + std::to_string(flags) +
                           "; use LANES_SHRINK_DEFAULT (0) or LANES_SHRINK_ABORT (1)");
  LANES_RETURN_IF_ERROR(checkExcludeList(comm, list, count));
  CommOptions options = comm->options;
  if (config != nullptr) LANES_RETURN_IF_ERROR(parseConfig(config, &options));
  LANES_RETURN_IF_ERROR(awaitInit(comm));  // a non-blocking parent may still be joining its mesh
  // No checkAbort(): a parent failed by an excluded rank's death is the case this is for.

  if (flags == LANES_SHRINK_ABORT) {
    // Releases this rank's operations still waiting in the parent. fail()
    // tells no peer (a survivor's death notice would break their shrink),
    // and keeps the first failure when the parent already had one.
    comm->fail(lanesInvalidUsage, "communicator " + comm->describe() +
                                      " was aborted by lanesCommShrink(LANES_SHRINK_ABORT); "
                                      "only destroy and abort remain");
  }

  std::vector<bool> excluded(comm->nranks, false);
  for (int i = 0; i < count; ++i) excluded[list[i]] = true;
  std::vector<int> survivors;
  for (int r = 0; r < comm->nranks; ++r)
    if (!excluded[r]) survivors.push_back(r);
  const int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), comm->rank) -
                                       survivors.begin());

  // Numbered, so a late handout of an earlier shrink of this communicator
  // (one this rank gave up waiting for) is never taken for this one's.
  const uint32_t tag = kShrinkTag | static_cast<uint32_t>(comm->shrinkSeq++ & 0xff);
  Deadline deadline = Deadline::after(comm->options.timeoutSeconds);
  uint32_t channel = 0;
  LANES_RETURN_IF_ERROR(handOutChannel(comm, survivors, newRank, tag, fingerprint(survivors),
                                       deadline, "lanesCommShrink", &channel));
  return initChildComm(comm, survivors, newRank, channel, options, newcomm);
}

}  // namespace

extern "C" lanesResult_t lanesCommShrink(lanesComm_t comm, int* excludeRanksList,
                                         int excludeRanksCount, lanesComm_t* newcomm,
                                         lanesConfig_t* config, int shrinkFlags) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommShrink"));
  return report(comm,
                shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags));
}
