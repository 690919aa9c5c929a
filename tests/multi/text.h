// printf-style formatting into a std::string, for test messages. Its own
// file so programs that use tests/multi/data.cc without the gtest-bound
// harness (lanes_soak) link it too.
#pragma once

#include <string>

namespace lanes::test {

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace lanes::test
