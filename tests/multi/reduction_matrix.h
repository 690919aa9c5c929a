// A multi-rank check of the reductions and the all-gather on host buffers:
// every datatype x reduction x count, in place and not, the all-reduce (its
// values checked on one rank per call, in turn; every rank's output
// bit-identical, compared by hash), then the reduce-scatter and
// the all-gather, each rank checked against the test's own arithmetic and
// patterns (tests/multi/data.h). After each non-empty call `checkPlan` sees
// what the call ran on (core/plan_record.h). Under a sanitizer, counts above
// 4096 run for one type of each element size (reduction_matrix.cc says why).
// For the tests of one algorithm forced with LANES_ALGO (test_hierarchical.cc,
// test_shared_sum.cc).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "lanes/lanes.h"

namespace lanes::test {

// `what`: "all-reduce", "reduce-scatter" or "all-gather".
using PlanCheck = std::function<void(lanesComm_t comm, const char* what)>;

// On one rank of an initialised communicator of `n` ranks.
void runReductionMatrix(lanesComm_t comm, int rank, int n, const std::vector<size_t>& counts,
                        const PlanCheck& checkPlan);

}  // namespace lanes::test
