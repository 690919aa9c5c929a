// Pairwise exchange for all-to-all: in step k (1 <= k < n) rank r sends its
// block for (r+k) mod n and receives the block from (r-k) mod n. Each step
// holds exactly one Send and one Recv, so no rank waits on a peer that waits
// on someone else, whatever the transport's buffering.
#include "algorithms/schedule_builder.h"

namespace lanes::algo {
namespace {

// sendbuff holds n blocks of `count` (block j goes to rank j); recvbuff's block
// j comes from rank j.
Status pairwiseAlltoAll(const CollArgs& a, Schedule* out) {
  const size_t blk = a.count * datatypeSize(a.type);
  const int n = a.nranks, r = a.rank;
  if (blk == 0) return Status::ok();
  const size_t total = size_t(n) * blk;
  const void* in = a.send;
  if (n > 1 && a.send == a.recv) {
    // In place, step k would overwrite block r-k before it is sent in step n-k:
    // send from a snapshot instead.
    std::byte* snapshot = out->allocScratch(total);
    addCopy(out->addStep(), snapshot, a.send, total);
    in = snapshot;
  }
  const size_t own = size_t(r) * blk;
  if (n == 1) {
    localCopySchedule(at(a.send, own), at(a.recv, own), blk, out);
    return Status::ok();
  }
  for (int k = 1; k < n; ++k) {
    Step& st = out->addStep();
    if (k == 1) addCopy(st, at(a.recv, own), at(a.send, own), blk);  // nothing in place
    const int to = mod(r + k, n), from = mod(r - k, n);
    addSend(st, to, at(in, size_t(to) * blk), blk);
    addRecv(st, from, at(a.recv, size_t(from) * blk), blk);
  }
  return Status::ok();
}

}  // namespace

Status buildPairwise(const CollArgs& args, Schedule* out) {
  beginSchedule(args, "pairwise", out);
  if (args.coll == CollType::AlltoAll) return pairwiseAlltoAll(args, out);
  return invalidUsage(std::string("the pairwise algorithm does not implement ") +
                      collTypeName(args.coll) + "; choose another algorithm.");
}

}  // namespace lanes::algo
