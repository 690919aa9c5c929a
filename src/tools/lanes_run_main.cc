// lanes-run: starts N local ranks of a Lanes program (see lanes_run_options.cc
// for the command line and lanes_run_supervisor.h for the job's lifecycle).
#include <cstdio>
#include <string>
#include <vector>

#include "tools/lanes_run_options.h"
#include "tools/lanes_run_supervisor.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  lanes::run::RunOptions options;
  lanes::Status st = lanes::run::parseRunOptions(args, &options);
  if (!st.isOk()) {
    std::fprintf(stderr, "lanes-run: %s\n\n%s", st.message().c_str(), lanes::run::runUsage());
    return 2;
  }
  if (options.help) {
    std::fputs(lanes::run::runUsage(), stdout);
    return 0;
  }
  lanes::run::Supervisor supervisor(std::move(options));
  return supervisor.run();
}
