// lanesCommSplit: ranks with equal colour form a new communicator, ordered
// by key (then by old rank). The lowest new rank of each colour creates a
// fresh unique id and hands it to its members over the parent's control mesh.
#include <algorithm>
#include <cstring>

#include "core/comm_registry.h"
#include "core/errors.h"
#include "core/init.h"

using namespace lanes;

namespace {
constexpr uint32_t kSplitTagBase = 0x53504c00u;  // "SPL" + sequence

struct SplitEntry {
  int32_t color;
  int32_t key;
  int32_t rank;
};

Status split(lanesComm* comm, int color, int key, lanesComm_t* newcomm, lanesConfig_t* config) {
  if (newcomm == nullptr) return invalidArgument("lanesCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  if (color < 0 && color != LANES_SPLIT_NOCOLOR)
    return invalidArgument("lanesCommSplit: color " + std::to_string(color) +
                           " is negative; use a colour >= 0 or LANES_SPLIT_NOCOLOR");
  LANES_RETURN_IF_ERROR(comm->checkAbort());
  CommOptions options = comm->options;
  if (config != nullptr) LANES_RETURN_IF_ERROR(parseConfig(config, &options));
  Deadline deadline = Deadline::after(comm->options.timeoutSeconds);
  std::vector<SplitEntry> all(comm->nranks);
  all[comm->rank] = {color, key, comm->rank};
  LANES_RETURN_IF_ERROR(comm->bootstrap->allGather(all.data(), sizeof(SplitEntry), deadline));
  uint32_t tag = kSplitTagBase + static_cast<uint32_t>(comm->splitSeq++ & 0xff);
  if (color == LANES_SPLIT_NOCOLOR) return Status::ok();

  std::vector<SplitEntry> members;
  for (const SplitEntry& e : all)
    if (e.color == color) members.push_back(e);
  std::sort(members.begin(), members.end(), [](const SplitEntry& a, const SplitEntry& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  int newRank = 0;
  while (members[newRank].rank != comm->rank) ++newRank;

  lanesUniqueId id;
  if (newRank == 0) {
    LANES_RETURN_IF_ERROR(createUniqueIdAndRoot("", nullptr, &id));
    for (size_t i = 1; i < members.size(); ++i)
      LANES_RETURN_IF_ERROR(comm->bootstrap->send(members[i].rank, tag, &id, sizeof(id)));
  } else {
    std::vector<uint8_t> bytes;
    LANES_RETURN_IF_ERROR(comm->bootstrap->recv(members[0].rank, tag, &bytes, deadline));
    if (bytes.size() != sizeof(id))
      return internalError("lanesCommSplit: received a malformed id from rank " +
                           std::to_string(members[0].rank));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  return initComm(id, static_cast<int>(members.size()), newRank, options, newcomm);
}

}  // namespace

extern "C" lanesResult_t lanesCommSplit(lanesComm_t comm, int color, int key, lanesComm_t* newcomm,
                                        lanesConfig_t* config) {
  CommRef ref(comm);
  if (!ref)
    return report(nullptr, invalidArgument("lanesCommSplit: comm is NULL, was already destroyed, "
                                           "or is not a Lanes communicator"));
  return report(comm, split(comm, color, key, newcomm, config));
}
