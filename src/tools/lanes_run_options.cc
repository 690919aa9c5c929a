#include "tools/lanes_run_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "base/env.h"

namespace lanes::run {
namespace {

bool parseSeconds(const std::string& text, double* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

}  // namespace

const char* runUsage() {
  return "usage: lanes-run -n N [--timeout SECONDS] [--no-prefix] [--] PROGRAM [ARGS...]\n"
         "\n"
         "Starts N ranks of PROGRAM on this host, each with LANES_RANK, LANES_WORLD_SIZE,\n"
         "LANES_LOCAL_RANK, LANES_LOCAL_SIZE, LANES_ROOT_ADDR and LANES_BOOTSTRAP_SECRET set,\n"
         "so lanesCommInitFromEnv() joins them into one communicator.\n"
         "\n"
         "  -n, --np N           number of ranks (required)\n"
         "  --timeout SECONDS    terminate every rank after this long (exit code 124)\n"
         "  --no-prefix          forward output as is, without \"[rank] \" before each line\n"
         "                       (rank 0's stdout never has it: a perf tool's table reads as\n"
         "                       nccl-tests'; other ranks' lines and rank 0's stderr do)\n"
         "  -h, --help           this text\n"
         "\n"
         "When a rank fails, the others get LANES_RUN_GRACE seconds (default 10) to notice\n"
         "and exit by themselves. Ranks still running then, or at --timeout, are asked for\n"
         "their flight-recorder dumps (SIGUSR1, where Lanes catches it; lanes-flight reads\n"
         "them), get SIGTERM 2 s later, then SIGKILL 5 s after that. SIGINT, SIGTERM and\n"
         "SIGHUP are forwarded to every rank. The exit code is the first failing rank's\n"
         "(128+signal when it was killed by a signal), 0 when every rank exits 0.\n"
         "LANES_ROOT_ADDR (host:port) and LANES_BOOTSTRAP_SECRET are kept when already set.\n"
         "PROGRAM is looked up on PATH, then in the current directory; one that cannot\n"
         "start is reported once and no rank starts (exit code 127, or 126 when it exists).\n";
}

Status parseRunOptions(const std::vector<std::string>& args, RunOptions* out) {
  RunOptions o;
  if (auto grace = envString("LANES_RUN_GRACE")) {
    if (!parseSeconds(*grace, &o.graceSeconds)) {
      return invalidArgument("LANES_RUN_GRACE=" + *grace +
                             " is not a number of seconds; set it to e.g. 10 or unset it.");
    }
  }
  size_t i = 0;
  auto value = [&](const std::string& flag, std::string* v) -> Status {
    if (i + 1 >= args.size())
      return invalidArgument(flag + " needs a value; see lanes-run --help.");
    *v = args[++i];
    return Status::ok();
  };
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string v;
    if (a == "--") {
      ++i;
      break;
    } else if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "-n" || a == "--np" || a == "-np") {
      LANES_RETURN_IF_ERROR(value(a, &v));
      int64_t n = 0;
      if (!parseInt64(v, &n) || n < 1 || n > 4096) {
        return invalidArgument("-n " + v + " is not a rank count between 1 and 4096.");
      }
      o.nranks = static_cast<int>(n);
    } else if (a == "--timeout") {
      LANES_RETURN_IF_ERROR(value(a, &v));
      if (!parseSeconds(v, &o.timeoutSeconds)) {
        return invalidArgument("--timeout " + v + " is not a number of seconds.");
      }
    } else if (a == "--no-prefix") {
      o.prefix = false;
    } else if (a.size() > 1 && a[0] == '-') {
      return invalidArgument("unknown option " + a + "; see lanes-run --help.");
    } else {
      break;
    }
  }
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (!o.help) {
    if (o.nranks == 0) return invalidArgument("lanes-run needs -n N (the number of ranks).");
    if (o.command.empty()) return invalidArgument("lanes-run needs a PROGRAM to start.");
  }
  *out = std::move(o);
  return Status::ok();
}

}  // namespace lanes::run
