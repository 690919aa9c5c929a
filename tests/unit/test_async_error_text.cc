// lanesGetLastError(comm) after an asynchronous failure (a watchdog's
// timeout, a dead peer seen by a progress thread): the communicator's failure
// sentence, until a call of this thread fails with a sentence of its own.
#include <gtest/gtest.h>

#include <string>

#include "core/comm.h"
#include "lanes/lanes.h"

namespace lanes {
namespace {

TEST(AsyncErrorText, LastErrorNamesTheAsynchronousFailure) {
  lanesComm_t comm = nullptr;
  ASSERT_EQ(lanesCommInitAll(&comm, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
  const std::string why = "device send/recv with rank 1 made no progress: rank 1 has taken 0 of 4";
  comm->fail(lanesTimeout, why);
  lanesResult_t async = lanesSuccess;
  ASSERT_EQ(lanesCommGetAsyncError(comm, &async), lanesSuccess);
  EXPECT_EQ(async, lanesTimeout);
  EXPECT_EQ(std::string(lanesGetLastError(comm)), why);
  // A call that fails later reports its own sentence.
  float buf[4] = {};
  EXPECT_NE(lanesAllReduce(nullptr, buf, 4, lanesFloat32, lanesSum, comm, nullptr), lanesSuccess);
  EXPECT_NE(std::string(lanesGetLastError(comm)), why);
  EXPECT_EQ(lanesCommAbort(comm), lanesSuccess);
}

}  // namespace
}  // namespace lanes
