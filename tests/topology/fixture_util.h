// Helpers shared by the topology tests: fixture loading and the path-class
// matrix as strings.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "topology/json_io.h"
#include "topology/path_class.h"
#include "topology/warnings.h"

namespace lanes::topo::testing {

// Runs lanes-topo with `args` (and the shell assignments `env`, "VAR=value
// ..."); its stdout and stderr, and its exit code in *rc.
inline std::string run(const std::string& args, int* rc, const std::string& env = "") {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(
      popen((env + " " + LANES_TOPO_BIN + " " + args + " 2>&1").c_str(), "r"), pclose);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p.get())) > 0) out.append(buf, n);
  *rc = WEXITSTATUS(pclose(p.release()));
  return out;
}

inline std::string fixture(const std::string& name) {
  return std::string(LANES_TOPO_FIXTURES) + "/" + name;
}

inline Topology loadFixture(const std::string& name) {
  Topology t;
  Status s = loadJsonFile(fixture(name), &t);
  EXPECT_TRUE(s.isOk()) << s.message();
  return t;
}

// Rows of GPU-GPU then GPU-NIC classes, e.g. {"X PHB", "PHB X"}.
inline std::vector<std::string> matrix(const Topology& t) {
  std::vector<std::string> rows;
  for (size_t a = 0; a < t.gpus.size(); ++a) {
    std::string row;
    for (size_t b = 0; b < t.gpus.size(); ++b)
      row += (b ? " " : "") +
             pathName(gpuPath(t, int(a), int(b)), t.nvlinks.empty() ? 0 : t.nvlinks[a][b]);
    for (size_t n = 0; n < t.nics.size(); ++n) row += " " + pathName(gpuNicPath(t, int(a), int(n)));
    rows.push_back(row);
  }
  return rows;
}

inline int countWarnings(const Topology& t, WarningKind kind) {
  int n = 0;
  for (const Warning& w : findWarnings(t)) n += w.kind == kind ? 1 : 0;
  return n;
}

}  // namespace lanes::topo::testing
