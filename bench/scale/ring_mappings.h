// Bytes of the shared-memory ring segments this process made as rank `rank`,
// read from its own mappings of /dev/shm/lanes-<id>-<rank>-<peer> (named or
// already unlinked). For bench/scale/scale_probe.cc and tests/multi/test_scale.cc.
#pragma once

#include <cstdint>
#include <fstream>
#include <regex>
#include <string>

namespace lanes::bench {

inline uint64_t ringBytesMadeBy(int rank) {
  std::ifstream maps("/proc/self/maps");
  const std::regex segment("^([0-9a-f]+)-([0-9a-f]+) .*/dev/shm/lanes-[0-9a-f]+-([0-9]+)-[0-9]+");
  uint64_t total = 0;
  std::smatch m;
  for (std::string line; std::getline(maps, line);)
    if (std::regex_search(line, m, segment) && std::stoi(m[3].str()) == rank)
      total += std::stoull(m[2].str(), nullptr, 16) - std::stoull(m[1].str(), nullptr, 16);
  return total;
}

}  // namespace lanes::bench
