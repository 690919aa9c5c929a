// lanesCommSplit: ranks with equal colour form a new communicator, ordered
// by key (then by old rank). Every rank offers a fresh channel of the
// parent's control mesh in the all-gather of colours and keys; each colour
// takes the offer of its lowest new rank, so nobody sends to its members.
#include "core/split.h"

#include <algorithm>
#include <cstring>

#include "core/comm_registry.h"
#include "core/errors.h"
#include "core/init.h"

namespace lanes {

Status handOutChannel(lanesComm* parent, const std::vector<int>& members, int me, uint32_t tag,
                      uint64_t agreement, Deadline deadline, const std::string& what,
                      uint32_t* channel) {
  struct Message {
    uint32_t channel;
    uint32_t pad;
    uint64_t agreement;
  } msg{};
  Bootstrap& bootstrap = *parent->bootstrap;
  if (me == 0) {
    Status st = bootstrap.newChannel(&msg.channel);
    if (!st) return Status(st.code(), what + ": " + st.message());
    msg.agreement = agreement;
    for (size_t i = 1; i < members.size(); ++i) {
      st = bootstrap.send(members[i], tag, &msg, sizeof(msg));
      if (!st)
        return Status(st.code(), what + ": could not tell rank " + std::to_string(members[i]) +
                                     " the new communicator's channel: " + st.message());
    }
  } else {
    const int sender = members[0];
    std::vector<uint8_t> bytes;
    Status st = bootstrap.recv(sender, tag, &bytes, deadline);
    if (!st)
      return Status(st.code(), what + ": rank " + std::to_string(sender) +
                                   ", which creates the new communicator, did not say which "
                                   "channel it uses: " +
                                   st.message());
    if (bytes.size() != sizeof(msg))
      return internalError(what + ": received a malformed channel message from rank " +
                           std::to_string(sender));
    std::memcpy(&msg, bytes.data(), sizeof(msg));
    if (msg.agreement != agreement)
      return invalidUsage(what + ": rank " + std::to_string(sender) + " and rank " +
                          std::to_string(parent->rank) +
                          " asked for different communicators (the ranks passed different "
                          "arguments)");
  }
  *channel = msg.channel;
  return Status::ok();
}

Status initChildComm(lanesComm* parent, const std::vector<int>& members, int me, uint32_t channel,
                     const CommOptions& options, lanesComm_t* out) {
  return initCommWith(parent->bootstrap->childJoin(channel, members),
                      static_cast<int>(members.size()), me, options, out);
}

}  // namespace lanes

using namespace lanes;

namespace {
struct SplitEntry {
  int32_t color;
  int32_t key;
  int32_t rank;
  uint32_t channel;  // offered; kRootChannel when this rank could not make one
};

Status split(lanesComm* comm, int color, int key, lanesComm_t* newcomm, lanesConfig_t* config) {
  if (newcomm == nullptr) return invalidArgument("lanesCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  if (color < 0 && color != LANES_SPLIT_NOCOLOR)
    return invalidArgument("lanesCommSplit: color " + std::to_string(color) +
                           " is negative; use a colour >= 0 or LANES_SPLIT_NOCOLOR");
  LANES_RETURN_IF_ERROR(awaitInit(comm));  // a non-blocking parent may still be joining its mesh
  // A revoked communicator may still split: only its bootstrap mesh is needed.
  if (!comm->failure.revoked.load()) LANES_RETURN_IF_ERROR(comm->checkAbort());
  CommOptions options = comm->options;
  if (config != nullptr) LANES_RETURN_IF_ERROR(parseConfig(config, &options));
  Deadline deadline = Deadline::after(comm->options.timeoutSeconds);
  uint32_t offer = 0;
  // A failure here matters only to the colour it would have served, after
  // the all-gather, which every rank must join.
  Status offered =
      color == LANES_SPLIT_NOCOLOR ? Status::ok() : comm->bootstrap->newChannel(&offer);
  std::vector<SplitEntry> all(comm->nranks);
  all[comm->rank] = {color, key, comm->rank, offered ? offer : 0};
  LANES_RETURN_IF_ERROR(comm->bootstrap->allGather(all.data(), sizeof(SplitEntry), deadline));
  if (color == LANES_SPLIT_NOCOLOR) return Status::ok();

  std::vector<SplitEntry> entries;
  for (const SplitEntry& e : all)
    if (e.color == color) entries.push_back(e);
  std::sort(entries.begin(), entries.end(), [](const SplitEntry& a, const SplitEntry& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  std::vector<int> members;
  for (const SplitEntry& e : entries) members.push_back(e.rank);
  const int newRank =
      static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());

  // Only rank 0's offer counts: every member fails alike when it had none.
  const SplitEntry& first = entries.front();
  if (first.channel == 0 && first.rank == comm->rank)
    return Status(offered.code(), "lanesCommSplit: " + offered.message());
  if (first.channel == 0)
    return remoteError("lanesCommSplit: rank " + std::to_string(first.rank) +
                       ", the new communicator's rank 0, could not make its control channel "
                       "(its own error says why)");
  return initChildComm(comm, members, newRank, first.channel, options, newcomm);
}

}  // namespace

extern "C" lanesResult_t lanesCommSplit(lanesComm_t comm, int color, int key, lanesComm_t* newcomm,
                                        lanesConfig_t* config) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommSplit"));
  return report(comm, split(comm, color, key, newcomm, config));
}
