#include "tests/soak/soak_ops.h"

#include <cstring>
#include <vector>

namespace lanes::soak {
namespace {

using test::GuardedBuffer;
using test::Reduction;

// A reduction handle for one call (PreMulSum ops are created and destroyed).
class OpHandle {
 public:
  OpHandle(Reduction r, lanesDataType_t t, lanesComm_t comm) : comm_(comm) {
    switch (r) {
      case Reduction::Sum:
        op_ = lanesSum;
        break;
      case Reduction::Prod:
        op_ = lanesProd;
        break;
      case Reduction::Max:
        op_ = lanesMax;
        break;
      case Reduction::Min:
        op_ = lanesMin;
        break;
      case Reduction::Avg:
        op_ = lanesAvg;
        break;
      case Reduction::PreMulSum: {
        std::vector<std::byte> scalar = test::scalarBytes(t, test::kPreMulScalar);
        status_ = lanesRedOpCreatePreMulSum(&op_, scalar.data(), t, lanesScalarHostImmediate, comm);
        created_ = status_ == lanesSuccess;
        break;
      }
    }
  }
  ~OpHandle() {
    if (created_) lanesRedOpDestroy(op_, comm_);
  }
  OpHandle(const OpHandle&) = delete;
  OpHandle& operator=(const OpHandle&) = delete;
  lanesRedOp_t get() const { return op_; }
  lanesResult_t status() const { return status_; }

 private:
  lanesRedOp_t op_ = lanesSum;
  lanesComm_t comm_;
  lanesResult_t status_ = lanesSuccess;
  bool created_ = false;
};

std::string failed(const char* call, lanesResult_t res, lanesComm_t comm) {
  return std::string(call) + " returned " + std::to_string(res) + " (" + lanesGetErrorString(res) +
         "): " + lanesGetLastError(comm);
}

// Anything the library forgets to write shows as a mismatch.
void poison(GuardedBuffer& b) { std::memset(b.data(), 0x5b, b.bytes()); }

std::string guards(const GuardedBuffer& b, const char* which) {
  std::string g = b.checkGuards();
  return g.empty() ? "" : std::string(which) + ": " + g;
}

}  // namespace

std::string runAndCheck(const OpSpec& op, lanesComm_t comm) {
  int n = 0, r = 0;
  lanesCommCount(comm, &n);
  lanesCommUserRank(comm, &r);
  const int root = static_cast<int>(op.rootDraw % static_cast<uint32_t>(n));
  const lanesDataType_t t = op.type;
  const size_t es = test::typeSize(t);
  const size_t count = op.count;
  const size_t bytes = count * es;
  const uint32_t salt = op.salt;
  std::string problem;
  auto prefix = [&](const std::string& p) {
    return p.empty() ? p
                     : describe(op, root) + ", rank " + std::to_string(r) + " of " +
                           std::to_string(n) + ": " + p;
  };

  switch (op.kind) {
    case OpKind::AllReduce:
    case OpKind::Reduce: {
      OpHandle h(op.reduction, t, comm);
      if (h.status() != lanesSuccess)
        return prefix(failed("lanesRedOpCreatePreMulSum", h.status(), comm));
      GuardedBuffer in(bytes), out(bytes);
      test::fillReductionInput(t, op.reduction, r, n, in.data(), count, 0, salt);
      poison(out);
      std::byte* recv = op.inPlace ? in.data() : out.data();
      lanesResult_t res =
          op.kind == OpKind::AllReduce
              ? lanesAllReduce(in.data(), recv, count, t, h.get(), comm, nullptr)
              : lanesReduce(in.data(), recv, count, t, h.get(), root, comm, nullptr);
      if (res != lanesSuccess) return prefix(failed(opKindName(op.kind), res, comm));
      if (op.kind == OpKind::AllReduce || r == root)
        problem = test::checkReductionOutput(t, op.reduction, n, recv, count, 0, salt);
      if (problem.empty()) problem = guards(in, "input buffer") + guards(out, "output buffer");
      return prefix(problem);
    }
    case OpKind::ReduceScatter: {
      OpHandle h(op.reduction, t, comm);
      if (h.status() != lanesSuccess)
        return prefix(failed("lanesRedOpCreatePreMulSum", h.status(), comm));
      GuardedBuffer in(bytes * n), out(bytes);
      test::fillReductionInput(t, op.reduction, r, n, in.data(), count * n, 0, salt);
      poison(out);
      std::byte* recv = op.inPlace ? in.data() + r * bytes : out.data();
      lanesResult_t res = lanesReduceScatter(in.data(), recv, count, t, h.get(), comm, nullptr);
      if (res != lanesSuccess) return prefix(failed("reduce-scatter", res, comm));
      problem = test::checkReductionOutput(t, op.reduction, n, recv, count, r * count, salt);
      if (problem.empty()) problem = guards(in, "input buffer") + guards(out, "output buffer");
      return prefix(problem);
    }
    case OpKind::Broadcast: {
      GuardedBuffer in(bytes), out(bytes);
      if (r == root)
        test::fillPattern(in.data(), bytes, root, 0, salt);
      else
        poison(in);
      poison(out);
      std::byte* recv = op.inPlace ? in.data() : out.data();
      lanesResult_t res = lanesBroadcast(in.data(), recv, count, t, root, comm, nullptr);
      if (res != lanesSuccess) return prefix(failed("broadcast", res, comm));
      problem = test::checkPattern(recv, bytes, root, 0, salt);
      if (problem.empty()) problem = guards(in, "input buffer") + guards(out, "output buffer");
      return prefix(problem);
    }
    case OpKind::AllGather: {
      GuardedBuffer in(bytes), out(bytes * n);
      poison(out);
      std::byte* send = op.inPlace ? out.data() + r * bytes : in.data();
      test::fillPattern(send, bytes, r, 0, salt);
      lanesResult_t res = lanesAllGather(send, out.data(), count, t, comm, nullptr);
      if (res != lanesSuccess) return prefix(failed("all-gather", res, comm));
      for (int q = 0; q < n && problem.empty(); ++q) {
        problem = test::checkPattern(out.data() + q * bytes, bytes, q, 0, salt);
        if (!problem.empty()) problem = "block of rank " + std::to_string(q) + ": " + problem;
      }
      if (problem.empty()) problem = guards(in, "input buffer") + guards(out, "output buffer");
      return prefix(problem);
    }
    case OpKind::AlltoAll:
    case OpKind::Gather:
    case OpKind::Scatter: {
      // Block p of a sender holds pattern(sender, p); nothing in place.
      GuardedBuffer in(bytes * n), out(bytes * n);
      poison(in);
      poison(out);
      lanesResult_t res = lanesSuccess;
      if (op.kind == OpKind::AlltoAll) {
        for (int p = 0; p < n; ++p) test::fillPattern(in.data() + p * bytes, bytes, r, p, salt);
        res = lanesAlltoAll(in.data(), out.data(), count, t, comm, nullptr);
      } else if (op.kind == OpKind::Gather) {
        test::fillPattern(in.data(), bytes, r, root, salt);
        res = lanesGather(in.data(), out.data(), count, t, root, comm, nullptr);
      } else {
        if (r == root)
          for (int p = 0; p < n; ++p)
            test::fillPattern(in.data() + p * bytes, bytes, root, p, salt);
        res = lanesScatter(in.data(), out.data(), count, t, root, comm, nullptr);
      }
      if (res != lanesSuccess) return prefix(failed(opKindName(op.kind), res, comm));
      if (op.kind == OpKind::AlltoAll) {
        for (int q = 0; q < n && problem.empty(); ++q) {
          problem = test::checkPattern(out.data() + q * bytes, bytes, q, r, salt);
          if (!problem.empty()) problem = "block from rank " + std::to_string(q) + ": " + problem;
        }
      } else if (op.kind == OpKind::Gather && r == root) {
        for (int q = 0; q < n && problem.empty(); ++q) {
          problem = test::checkPattern(out.data() + q * bytes, bytes, q, root, salt);
          if (!problem.empty()) problem = "block of rank " + std::to_string(q) + ": " + problem;
        }
      } else if (op.kind == OpKind::Scatter) {
        problem = test::checkPattern(out.data(), bytes, root, r, salt);
      }
      if (problem.empty()) problem = guards(in, "input buffer") + guards(out, "output buffer");
      return prefix(problem);
    }
    case OpKind::SendRecv: {
      // Each rank sends to the next and receives from the previous one.
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      GuardedBuffer in(bytes), out(bytes);
      test::fillPattern(in.data(), bytes, r, next, salt);
      poison(out);
      lanesResult_t res = lanesGroupStart();
      if (res == lanesSuccess) {
        lanesResult_t s = lanesSend(in.data(), count, t, next, comm, nullptr);
        lanesResult_t v = lanesRecv(out.data(), count, t, prev, comm, nullptr);
        res = lanesGroupEnd();
        if (s != lanesSuccess) res = s;
        if (v != lanesSuccess) res = v;
      }
      if (res != lanesSuccess) return prefix(failed("send/recv", res, comm));
      problem = test::checkPattern(out.data(), bytes, prev, r, salt);
      if (problem.empty()) problem = guards(in, "input buffer") + guards(out, "output buffer");
      return prefix(problem);
    }
    case OpKind::kCount:
      break;
  }
  return prefix("unknown operation kind");
}

}  // namespace lanes::soak
