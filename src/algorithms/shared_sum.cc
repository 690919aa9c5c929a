// Host summation of host buffers (exec/arena_sum.h): every rank puts its
// input into the communicator's shared arena, sums its segment of all of them
// there and takes the result out, chunk by chunk. No transport carries it,
// so the schedule is one op that the executor drives against the arena.
#include "algorithms/schedule_builder.h"

namespace lanes::algo {

Status buildSharedSum(const CollArgs& args, Schedule* out) {
  beginSchedule(args, "shared_sum", out);
  const bool scatter = args.coll == CollType::ReduceScatter;
  const size_t bytes = args.count * datatypeSize(args.type);  // the output
  if (args.nranks == 1) {
    localCopySchedule(args.send, args.recv, bytes, out);
    return Status::ok();
  }
  if (bytes == 0) return Status::ok();
  out->addStep().ops.push_back(Op{scatter ? OpKind::ArenaReduceScatter : OpKind::ArenaAllReduce, -1,
                                  -1, args.send, args.recv, bytes});
  return Status::ok();
}

}  // namespace lanes::algo
