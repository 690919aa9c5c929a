// GoogleTest main that tells CTest about skips: when every test it ran was
// skipped (GTEST_SKIP, e.g. no GPU visible), it exits with 77, which the test
// registrations declare as SKIP_RETURN_CODE. CTest then reports "Skipped"
// instead of "Passed" — without a regular expression on the output.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  if (result == 0 && unit.test_to_run_count() > 0 &&
      unit.skipped_test_count() == unit.test_to_run_count())
    return 77;
  return result;
}
