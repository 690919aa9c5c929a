// Recursive doubling: log2(p) rounds in which rank r exchanges everything it
// has with r ^ 2^k. Latency-bound sizes only: every round moves the whole
// message (all-reduce) or everything gathered so far (all-gather).
//
// All-reduce on n ranks that are not a power of two folds the extra ranks in:
// with p the largest power of two <= n, rank p+i first sends its input to
// rank i (which reduces it into its own) and gets the result back at the end.
//
// Bit-identical results: in round k both partners compute (a op b) from the
// same two operands, and op is bit-exactly commutative, so after round k the
// 2^(k+1) ranks of a group hold the same bits; by induction, everyone does.
#include <vector>

#include "algorithms/schedule_builder.h"

namespace lanes::algo {
namespace {

int log2Exact(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}

Status rdAllReduce(const CollArgs& a, Schedule* out) {
  const size_t bytes = a.count * datatypeSize(a.type);
  const int n = a.nranks, r = a.rank;
  if (n == 1) {
    localCopySchedule(a.send, a.recv, bytes, out);
    return Status::ok();
  }
  if (bytes == 0) return Status::ok();
  const int p = floorPow2(n), rem = n - p;

  if (r >= p) {  // extra rank: hand the input over, collect the result
    addSend(out->addStep(), r - p, a.send, bytes);
    addRecv(out->addStep(), r - p, a.recv, bytes);
    return Status::ok();
  }

  const bool folds = r < rem;
  const int rounds = log2Exact(p);
  const int writes = rounds + (folds ? 1 : 0);
  // Double buffering: a round's Send reads the previous result while its RecvReduce
  // writes the next one, so consecutive writes alternate between recvbuff and scratch,
  // the last one landing in recvbuff.
  enum Buf { kRecv, kScratch, kSpare };
  std::vector<Buf> target(writes);
  for (int i = writes - 1; i >= 0; --i) {
    target[i] = (i == writes - 1 || target[i + 1] != kRecv) ? kRecv : kScratch;
  }
  // In place, a first round writing recvbuff would overwrite the bytes its own Send
  // is still reading: give it a buffer of its own (and, if it was the only round,
  // copy the result home at the end).
  if (!folds && target[0] == kRecv && a.send == a.recv) target[0] = kSpare;
  void* buf[3] = {a.recv, nullptr, nullptr};
  for (Buf b : target) {
    if (buf[b] == nullptr) buf[b] = out->allocScratch(bytes);
  }

  const void* cur = a.send;
  int w = 0;
  if (folds) {
    addRecvReduce(out->addStep(), r + p, buf[target[w]], cur, bytes);
    cur = buf[target[w++]];
  }
  for (int k = 0; k < rounds; ++k) {
    const int partner = r ^ (1 << k);
    Step& st = out->addStep();
    addSend(st, partner, cur, bytes);
    addRecvReduce(st, partner, buf[target[w]], cur, bytes);
    cur = buf[target[w++]];
  }
  if (cur != a.recv) addCopy(out->addStep(), a.recv, cur, bytes);
  if (folds) addSend(out->addStep(), r + p, a.recv, bytes);
  return Status::ok();
}

// Power-of-two ranks only (checked by buildSchedule): in round k, rank r and its
// partner swap the 2^k contiguous blocks each has gathered so far.
Status rdAllGather(const CollArgs& a, Schedule* out) {
  const size_t blk = a.count * datatypeSize(a.type);
  const int n = a.nranks, r = a.rank;
  if (blk == 0) return Status::ok();
  Step& first = out->addStep();
  addCopy(first, at(a.recv, size_t(r) * blk), a.send, blk);
  const int rounds = log2Exact(n);
  for (int k = 0; k < rounds; ++k) {
    const int group = 1 << k;
    const int partner = r ^ group;
    const int mine = r & ~(group - 1), theirs = mine ^ group;
    // Round 0 reads the input directly so it need not wait for the local copy.
    Step& st = k == 0 ? first : out->addStep();
    const void* src = k == 0 ? a.send : at(a.recv, size_t(mine) * blk);
    addSend(st, partner, src, size_t(group) * blk);
    addRecv(st, partner, at(a.recv, size_t(theirs) * blk), size_t(group) * blk);
  }
  return Status::ok();
}

}  // namespace

Status buildRecursiveDoubling(const CollArgs& args, Schedule* out) {
  beginSchedule(args, "recursive_doubling", out);
  switch (args.coll) {
    case CollType::AllReduce:
      return rdAllReduce(args, out);
    case CollType::AllGather:
      return rdAllGather(args, out);
    default:
      break;
  }
  return invalidUsage(std::string("the recursive-doubling algorithm does not implement ") +
                      collTypeName(args.coll) + "; choose another algorithm.");
}

}  // namespace lanes::algo
