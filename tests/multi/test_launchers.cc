// Launchers as users run them: the docs' mpirun command (docs/benchmarks.md)
// with no root address, their srun example under a one-node Slurm, and
// lanes-run finding its program and reporting one that cannot start once. Every command runs under
// runCommand's deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

namespace lanes::test {
namespace {

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

// The first line of docs/benchmarks.md that starts with `prefix`, split into
// words; empty when the docs no longer have it (the test then fails).
std::vector<std::string> docsCommand(const std::string& prefix, std::string* lineBefore) {
  std::ifstream docs(std::string(LANES_DOCS_DIR) + "/benchmarks.md");
  std::string previous;
  for (std::string line; std::getline(docs, line); previous = line) {
    if (line.rfind(prefix, 0) != 0) continue;
    if (lineBefore != nullptr) *lineBefore = previous;
    return split(line);
  }
  return {};
}

// The docs' tool arguments with the built tool, host memory and small sizes:
// "build/release/bin/X" becomes this build's X, -e 1G becomes -e 64K.
std::vector<std::string> toolArgs(const std::vector<std::string>& words, size_t toolAt) {
  std::vector<std::string> out;
  const std::string bin = "build/release/bin/";
  for (size_t i = toolAt; i < words.size(); ++i) {
    std::string w = words[i];
    if (w.rfind(bin, 0) == 0) w = std::string(LANES_PERF_DIR) + "/" + w.substr(bin.size());
    if (i > toolAt && words[i - 1] == "-e") w = "64K";
    out.push_back(w);
  }
  for (const char* a : {"--memory", "host", "-n", "2", "-w", "1"}) out.emplace_back(a);
  return out;
}

size_t toolIndex(const std::vector<std::string>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].find("lanes_all_reduce_perf") != std::string::npos) return i;
  }
  return words.size();
}

// Data rows of the table and their #wrong columns (out-of-place, in-place).
struct Rows {
  int count = 0;
  int wrong = 0;
};
Rows tableRows(const std::string& output) {
  Rows r;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> w = split(line);
    if (w.size() != 13 || w[0].find_first_not_of("0123456789") != std::string::npos) continue;
    ++r.count;
    r.wrong += (w[8] != "0") + (w[12] != "0");
  }
  return r;
}

int countOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// `env -u ... [NAME=VALUE...] argv`: launch variables this test process may
// have must not reach the job, only those the test sets (`assign`).
std::vector<std::string> withoutLaunchVars(const std::vector<std::string>& argv,
                                           const std::vector<std::string>& assign = {}) {
  std::vector<std::string> out = {"env"};
  for (const char* v : {"LANES_ROOT_ADDR", "MASTER_ADDR", "MASTER_PORT", "LANES_RANK",
                        "LANES_WORLD_SIZE", "RANK", "WORLD_SIZE", "LANES_BOOTSTRAP_SECRET"}) {
    out.emplace_back("-u");
    out.emplace_back(v);
  }
  out.insert(out.end(), assign.begin(), assign.end());
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// "#  Rank  3 " for the last of `n` ranks, as the header's device list has it.
std::string lastRankLine(const std::string& n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "#  Rank %2d ", std::atoi(n.c_str()) - 1);
  return buf;
}

std::vector<std::pair<std::string, std::string>> mpiEnv() {
  // Open MPI refuses root without these; a sanitized build's ranks must not
  // fail at exit on what Open MPI itself never frees.
  const char* asan = std::getenv("ASAN_OPTIONS");
  return {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
          {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
          {"LANES_TIMEOUT", "60"},
          {"ASAN_OPTIONS", std::string(asan ? asan : "") + (asan ? ":" : "") + "detect_leaks=0"}};
}

// The docs' `mpirun -np 4 lanes_all_reduce_perf ...`, as written there (plus
// --oversubscribe for a 2-core box, host memory and small sizes), with no
// LANES_ROOT_ADDR: the unique id goes over MPI.
TEST(Mpirun, DocsCommandRunsWithoutARootAddress) {
  std::vector<std::string> words = docsCommand("mpirun -np ", nullptr);
  ASSERT_GE(words.size(), 4u) << "docs/benchmarks.md has no `mpirun -np N ...` line";
  if (!LANES_PERF_WITH_MPI) GTEST_SKIP() << "the perf tools were built without MPI";
  ASSERT_TRUE(executable(LANES_MPIEXEC)) << "MPI was found but not its launcher: " << LANES_MPIEXEC;
  const size_t tool = toolIndex(words);
  ASSERT_LT(tool, words.size()) << "the docs' mpirun line runs no lanes_all_reduce_perf";
  const std::string np = words[2];
  std::vector<std::string> argv = {LANES_MPIEXEC, "--oversubscribe", "-np", np};
  for (auto& a : toolArgs(words, tool)) argv.push_back(a);
  CommandResult r = runCommand(withoutLaunchVars(argv), mpiEnv(), 240);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  // One table, from rank 0, over all ranks: -np ranks listed, rows checked.
  EXPECT_EQ(countOf(r.output, "# Collective test starting"), 1) << r.output;
  EXPECT_NE(r.output.find(lastRankLine(np)), std::string::npos)
      << "the last of " << np << " ranks is missing from the device list:\n"
      << r.output;
  Rows rows = tableRows(r.output);
  EXPECT_GT(rows.count, 0) << r.output;
  EXPECT_EQ(rows.wrong, 0) << r.output;
}

// The precedence (docs/benchmarks.md): a root address wins over MPI. An
// address that is not host:port makes the environment launch fail, naming
// it; over MPI the run would have passed.
TEST(Mpirun, RootAddressTakesPrecedenceOverMpi) {
  if (!LANES_PERF_WITH_MPI) GTEST_SKIP() << "the perf tools were built without MPI";
  ASSERT_TRUE(executable(LANES_MPIEXEC)) << "MPI was found but not its launcher: " << LANES_MPIEXEC;
  std::vector<std::string> argv = {LANES_MPIEXEC,
                                   "--oversubscribe",
                                   "-np",
                                   "2",
                                   "-x",
                                   "LANES_ROOT_ADDR=not-an-address",
                                   std::string(LANES_PERF_DIR) + "/lanes_all_reduce_perf"};
  for (const char* a : {"--memory", "host", "-b", "8", "-e", "8", "-n", "1", "-w", "0"})
    argv.emplace_back(a);
  CommandResult r = runCommand(withoutLaunchVars(argv), mpiEnv(), 120);
  ASSERT_TRUE(r.started && !r.timedOut) << r.describe();
  EXPECT_FALSE(r.exited && r.exitCode == 0) << r.describe();
  EXPECT_NE(r.output.find("lanesCommInitFromEnv failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("LANES_ROOT_ADDR=not-an-address"), std::string::npos) << r.output;
}

// The docs' Slurm example, run by real Slurm: tests/launch/slurm_one_node.sh
// starts a one-node cluster (munge, slurmctld, slurmd, fake GPUs for
// --gpus-per-task) and runs the docs' `export LANES_ROOT_ADDR=...` line as
// written and their `srun -n N` line (host memory, small sizes) inside salloc.
TEST(Slurm, DocsSrunCommandRunsUnderSrun) {
  std::string before;
  std::vector<std::string> words = docsCommand("srun -n ", &before);
  ASSERT_GE(words.size(), 4u) << "docs/benchmarks.md has no `srun -n N ...` line";
  ASSERT_EQ(before.rfind("export LANES_ROOT_ADDR=", 0), 0u)
      << "the docs' srun example must set the root address first; the line before it is: "
      << before;
  const size_t tool = toolIndex(words);
  ASSERT_LT(tool, words.size()) << "the docs' srun line runs no lanes_all_reduce_perf";
  std::string srun;
  for (size_t i = 0; i < tool; ++i) srun += words[i] + " ";
  for (const auto& a : toolArgs(words, tool)) srun += a + " ";
  char path[] = "/tmp/lanes-srun-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << before << "\n" << srun << "\n";
  CommandResult r = runCommand(withoutLaunchVars({LANES_SLURM_ONE_NODE, path}),
                               {{"LANES_TIMEOUT", "60"}, {"SLURM_ONE_NODE_TIMEOUT", "180"}}, 240);
  std::remove(path);
  if (r.exited && r.exitCode == 77) GTEST_SKIP() << r.output;
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  const std::string n = words[2];
  EXPECT_EQ(countOf(r.output, "# Collective test starting"), 1) << r.output;
  EXPECT_NE(r.output.find(lastRankLine(n)), std::string::npos) << r.output;
  Rows rows = tableRows(r.output);
  EXPECT_GT(rows.count, 0) << r.output;
  EXPECT_EQ(rows.wrong, 0) << r.output;
}

// A scratch directory, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/lanes-run-test-XXXXXX";
    if (::mkdtemp(dir) != nullptr) path_ = dir;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& text, mode_t mode) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }

 private:
  std::string path_;
};

// Under mpirun with no root address and no liblanes-mpi.so to be found (a
// copy of the tool, statically linked, in a folder of its own): every rank
// says why it cannot meet and what to set, instead of waiting.
TEST(Mpirun, WithoutTheMpiPluginSaysWhatToSet) {
  if (!executable(LANES_MPIEXEC)) GTEST_SKIP() << "no MPI launcher in this build";
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string tool = dir.path() + "/bin/lanes_all_reduce_perf";
  std::filesystem::create_directory(dir.path() + "/bin");
  std::filesystem::copy_file(std::string(LANES_PERF_DIR) + "/lanes_all_reduce_perf", tool);
  std::vector<std::string> argv = {
      "env", "-u", "LD_LIBRARY_PATH", LANES_MPIEXEC, "--oversubscribe", "-np", "2", tool};
  for (const char* a : {"--memory", "host", "-b", "8", "-e", "8", "-n", "1", "-w", "0"})
    argv.emplace_back(a);
  CommandResult r = runCommand(withoutLaunchVars(argv), mpiEnv(), 120);
  ASSERT_TRUE(r.started && !r.timedOut) << r.describe();
  EXPECT_FALSE(r.exited && r.exitCode == 0) << r.describe();
  EXPECT_EQ(countOf(r.output,
                    "lanesCommInitFromEnv failed: invalid argument: started by an MPI "
                    "launcher"),
            2)
      << r.output;
  EXPECT_NE(r.output.find("the unique id cannot go over MPI: no liblanes-mpi.so"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("OMPI_COMM_WORLD_SIZE is set"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("LANES_ROOT_ADDR=host:port"), std::string::npos) << r.output;
}

// `lanes-run ARGS...` run in `dir`, with a PATH that does not have it.
CommandResult lanesRunIn(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", dir,
                                   LANES_RUN_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, {{"PATH", "/usr/bin:/bin"}}, 60);
}

const char* kApp = "#!/bin/sh\necho \"app ran as rank $LANES_RANK\"\n";

// `lanes-run -n 2 app` with ./app here and not on PATH runs ./app.
TEST(LanesRun, FindsAProgramInTheCurrentDirectory) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  dir.write("lanes_test_app", kApp, 0755);
  CommandResult r = lanesRunIn(dir.path(), {"-n", "2", "lanes_test_app"});
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  EXPECT_NE(r.output.find("app ran as rank 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("app ran as rank 1"), std::string::npos) << r.output;
}

// A program that is nowhere: one message naming it and the fix, exit 127,
// no rank started.
TEST(LanesRun, MissingProgramIsReportedOnce) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  CommandResult r = lanesRunIn(dir.path(), {"-n", "4", "no-such-lanes-app"});
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exitCode, 127) << r.output;
  EXPECT_EQ(countOf(r.output, "no-such-lanes-app"), 2) << "once, with ./no-such-lanes-app as the "
                                                          "fix:\n"
                                                       << r.output;
  EXPECT_NE(r.output.find("./no-such-lanes-app"), std::string::npos) << r.output;
  EXPECT_EQ(countOf(r.output, "\n"), 1) << r.output;
}

// ./app without execute permission, by either name: one message, exit 126.
TEST(LanesRun, NonExecutableProgramIsReportedOnce) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  dir.write("lanes_test_app", kApp, 0644);
  for (const char* name : {"lanes_test_app", "./lanes_test_app"}) {
    CommandResult r = lanesRunIn(dir.path(), {"-n", "4", name});
    ASSERT_TRUE(r.exited) << r.describe();
    EXPECT_EQ(r.exitCode, 126) << r.output;
    EXPECT_NE(r.output.find("chmod +x ./lanes_test_app"), std::string::npos) << r.output;
    EXPECT_EQ(countOf(r.output, "\n"), 1) << r.output;
    EXPECT_EQ(r.output.find("[1]"), std::string::npos) << r.output;
  }
}

// A file that passes every check but that exec refuses (no #!, not ELF): the
// exec error comes back once, from lanes-run, not from each rank.
TEST(LanesRun, ExecFailureIsReportedOnce) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  dir.write("lanes_test_app", std::string("\x01\x02not a program\n"), 0755);
  CommandResult r = lanesRunIn(dir.path(), {"-n", "4", "./lanes_test_app"});
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exitCode, 126) << r.output;
  EXPECT_EQ(countOf(r.output, "could not start ./lanes_test_app"), 1) << r.output;
  EXPECT_EQ(r.output.find("[0]"), std::string::npos) << r.output;
}

// Rank 0's stdout is forwarded as is (the perf table reads as nccl-tests');
// other ranks' lines and every stderr line keep their "[rank] ".
TEST(LanesRun, OnlyRankZeroStdoutIsUnprefixed) {
  CommandResult r = runCommand(
      {LANES_RUN_PATH, "-n", "2", "sh", "-c", "echo out-$LANES_RANK; echo err-$LANES_RANK >&2"}, {},
      60);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  std::vector<std::string> lines;
  std::istringstream in(r.output);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  auto has = [&](const std::string& l) {
    return std::find(lines.begin(), lines.end(), l) != lines.end();
  };
  EXPECT_TRUE(has("out-0")) << r.output;
  EXPECT_TRUE(has("[1] out-1")) << r.output;
  EXPECT_TRUE(has("[0] err-0")) << r.output;
  EXPECT_TRUE(has("[1] err-1")) << r.output;
  // --no-prefix: nothing prefixed.
  r = runCommand({LANES_RUN_PATH, "-n", "2", "--no-prefix", "sh", "-c", "echo out-$LANES_RANK"}, {},
                 60);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  EXPECT_EQ(r.output.find("["), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lanes::test
