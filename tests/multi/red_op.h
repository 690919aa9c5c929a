// A reduction op handle for one call of the multi-rank tests: the built-in
// op of a Reduction, or a pre-multiplied sum by kPreMulScalar created on the
// communicator and destroyed with the handle.
#pragma once

#include <vector>

#include "lanes/lanes.h"
#include "tests/multi/data.h"
#include "tests/multi/harness.h"

namespace lanes::test {

class RedOp {
 public:
  RedOp(Reduction r, lanesDataType_t t, lanesComm_t comm) : comm_(comm) {
    constexpr lanesRedOp_t kBuiltIn[] = {lanesSum, lanesProd, lanesMax, lanesMin, lanesAvg};
    if (r != Reduction::PreMulSum) {
      op_ = kBuiltIn[static_cast<int>(r)];
      return;
    }
    std::vector<std::byte> scalar = scalarBytes(t, kPreMulScalar);
    RANK_CHECK_LANES(
        lanesRedOpCreatePreMulSum(&op_, scalar.data(), t, lanesScalarHostImmediate, comm), comm);
    created_ = true;
  }
  ~RedOp() {
    if (created_) lanesRedOpDestroy(op_, comm_);
  }
  RedOp(const RedOp&) = delete;
  RedOp& operator=(const RedOp&) = delete;
  lanesRedOp_t get() const { return op_; }

 private:
  lanesRedOp_t op_ = lanesSum;
  lanesComm_t comm_;
  bool created_ = false;
};

}  // namespace lanes::test
