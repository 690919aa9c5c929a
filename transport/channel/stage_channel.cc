#include "transport/channel/stage_channel.h"

#include <utility>

#include "base/log.h"

namespace lanes {

StageChannel::StageChannel(StageArena* arena, StageChannelContext context)
    : arena_(arena), context_(std::move(context)) {}

StageCounter StageChannel::counter(StageFlag f, int rank) const {
  return {arena_->flag(f, rank), layout().flagOffset(f, rank) / StageArenaLayout::kFlagLine, rank};
}

StageCounter StageChannel::pairCounter(PairFlag f, int sender, int receiver) const {
  return {arena_->pairFlag(f, sender, receiver),
          layout().pairFlagOffset(f, sender, receiver) / StageArenaLayout::kFlagLine,
          f == PairFlag::Sent ? sender : receiver};
}

Status StageChannel::post(cudaStream_t stream, const StageCounter& c, uint32_t value) const {
  LANES_RETURN_IF_ERROR(context_.counters->write(stream, c.flag, value));
  if (context_.ledger) context_.ledger->post(c.line, value);
  return Status::ok();
}

Status StageChannel::await(cudaStream_t stream, const StageCounter& c, uint32_t value) const {
  LANES_RETURN_IF_ERROR(awaitIssued(c, value));
  return context_.counters->waitGeq(stream, c.flag, value);
}

Status StageChannel::awaitIssued(const StageCounter& c, uint32_t value) const {
  const int writer = c.writer;
  // This rank's own writes went on its streams earlier, from this thread.
  if (context_.ledger && writer != context_.rank &&
      context_.inProcess[static_cast<size_t>(writer)]) {
    SubmitLedger& ledger = *context_.ledger;
    switch (
        ledger.await(c.line, value, Deadline::after(context_.timeoutSeconds), context_.aborted)) {
      case SubmitLedger::Wait::Posted:
        break;
      case SubmitLedger::Wait::Aborted:
        return context_.checkAbort();
      case SubmitLedger::Wait::Poisoned: {
        Status failed = context_.checkAbort();
        if (!failed) return failed;
        return remoteError("device collectives on " + context_.who +
                           ": a rank of this process failed while this rank waited for rank " +
                           std::to_string(writer) + "'s part: " + ledger.why());
      }
      case SubmitLedger::Wait::TimedOut:
        return timeoutError(
            "device collectives on " + context_.who + ": rank " + std::to_string(writer) +
            ", a thread of this process, has not issued its part of this call for " +
            std::to_string(static_cast<int>(context_.timeoutSeconds)) +
            " s (LANES_TIMEOUT; counter " + std::to_string(c.line) + " issued up to " +
            std::to_string(ledger.posted(c.line)) + ", this rank needs " + std::to_string(value) +
            "). Every rank must issue the same collectives and send/recv in the same order; "
            "ranks that are threads of one process must each be driven by their own thread, or "
            "all by one thread inside one group (lanesGroupStart/lanesGroupEnd).");
    }
  }
  return Status::ok();
}

void StageChannel::poisonAll(uint32_t value) const {
  const StageArenaLayout& l = layout();
  for (int r = 0; r < l.nranks; ++r) {
    for (StageFlag f : {StageFlag::Ready, StageFlag::Reduced, StageFlag::Consumed})
      __atomic_store_n(arena_->flag(f, r), value, __ATOMIC_RELEASE);
    for (int d = 0; l.pairs() > 0 && d < l.nranks; ++d) {
      if (d == r) continue;
      for (PairFlag f : {PairFlag::Sent, PairFlag::Acked})
        __atomic_store_n(arena_->pairFlag(f, r, d), value, __ATOMIC_RELEASE);
    }
  }
}

bool StageChannel::peersConsumed(uint32_t lastChunk, Deadline deadline) const {
  Backoff backoff;
  for (int p = 0; p < layout().nranks; ++p) {
    const StageCounter consumed = counter(StageFlag::Consumed, p);
    while (static_cast<int32_t>(read(consumed) - lastChunk) < 0) {
      if (deadline.expired() || !context_.checkAbort()) return false;
      backoff.pause();
    }
  }
  return true;
}

bool StageChannel::sendersFinished(const std::vector<uint64_t>& received) const {
  for (int s = 0; s < layout().nranks; ++s) {
    if (s == context_.rank) continue;
    const uint32_t sent = read(pairCounter(PairFlag::Sent, s, context_.rank));
    if (sent != static_cast<uint32_t>(received[static_cast<size_t>(s)])) return false;
  }
  return true;
}

void StageChannel::leakArena() {
  LANES_WARN(Init, context_.rank,
             "a stream still uses the host-staging arena; leaking it rather than freeing "
             "memory the GPU may touch");
  arena_->leak();
}

}  // namespace lanes
