// What the header and the JSON say about how the run was started: the
// command line and the LANES_* / NCCL_* variables each library sees.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace lanes::perf {

// "prog -b 8 -e 1M", argv joined by spaces.
inline std::string commandLine(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

// Every variable of `env` (a NULL-terminated environ) whose name starts with
// `prefix`, sorted; secrets (names containing SECRET) show as "<redacted>".
inline std::vector<std::pair<std::string, std::string>> prefixedEnv(char** env,
                                                                    const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = env; e != nullptr && *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq == std::string::npos || kv.rfind(prefix, 0) != 0) continue;
    std::string name = kv.substr(0, eq);
    out.emplace_back(name,
                     name.find("SECRET") != std::string::npos ? "<redacted>" : kv.substr(eq + 1));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "A=1 B=2", or "(none set)".
inline std::string envLine(const std::vector<std::pair<std::string, std::string>>& vars) {
  if (vars.empty()) return "(none set)";
  std::string s;
  for (const auto& [k, v] : vars) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

}  // namespace lanes::perf
