// The perf driver: a tool's main() is `return lanes::perf::perfMain(argc, argv, spec);`.
#pragma once

#include "perf/coll.h"

namespace lanes::perf {

// Parses nccl-tests' flags, creates the ranks (one per process under
// lanes-run, mpirun, srun or torchrun; otherwise -t x -g threads of this
// process), sweeps sizes x types x ops out-of-place and in-place, and prints
// nccl-tests' table on rank 0. Exit code 0, or 1 when any value was wrong or a
// call failed, 2 for a bad command line.
int perfMain(int argc, char** argv, const CollSpec& spec);

}  // namespace lanes::perf
