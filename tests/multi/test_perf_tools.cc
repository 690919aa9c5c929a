// The perf tools end to end (bench/tools, bench/perf): every tool runs under
// lanes-run with zero wrong values, the table and footer keep nccl-tests'
// layout, the corruption hook is counted and fails the run, the JSON
// validates against bench/schema/perf_result.schema.json, and the NCCL side
// fails clearly where it cannot run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

#if LANES_HAVE_PERF_COMMON
#include "perf/backend_nccl.h"
#include "perf/coll.h"
#endif

namespace lanes::test {
namespace {

const std::vector<std::string> kTools = {"lanes_all_reduce_perf",     "lanes_all_gather_perf",
                                         "lanes_reduce_scatter_perf", "lanes_broadcast_perf",
                                         "lanes_reduce_perf",         "lanes_alltoall_perf",
                                         "lanes_gather_perf",         "lanes_scatter_perf",
                                         "lanes_sendrecv_perf",       "lanes_hypercube_perf"};

std::string toolPath(const std::string& tool) { return std::string(LANES_PERF_DIR) + "/" + tool; }

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// Small and quick: 5 sizes, 2 timed iterations; a 2-core CI box runs each
// tool on 4 ranks in seconds.
std::vector<std::string> smallSweep() {
  return {"--memory", "host", "-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"};
}

CommandResult runTool(const std::string& tool, std::vector<std::string> extra, int ranks,
                      std::vector<std::pair<std::string, std::string>> env = {}) {
  std::vector<std::string> argv = {LANES_RUN_PATH, "-n", std::to_string(ranks), toolPath(tool)};
  for (auto& a : smallSweep()) argv.push_back(a);
  for (auto& a : extra) argv.push_back(a);
  env.emplace_back("LANES_TIMEOUT", "60");
  return runCommand(argv, env, 240);
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  // lanes-run prefixes other ranks' lines and stderr with the rank ("[1] ");
  // rank 0's table has none (TableFromRankZeroReadsLikeNcclTests).
  if (!w.empty() && w[0].size() > 2 && w[0].front() == '[' && w[0].back() == ']')
    w.erase(w.begin());
  return w;
}

bool isNumber(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && end != s.c_str() && *end == '\0';
}

// What the table says, read the way nccl-tests output is read.
struct Table {
  std::vector<std::string> columns;            // the "# size count ..." header
  std::vector<std::vector<std::string>> rows;  // data rows, split
  std::string outOfBounds;                     // footer values
  std::string avgBusBw;
};

Table parseTable(const std::string& output) {
  Table t;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> w = words(line);
    if (w.empty()) continue;
    if (w[0] == "#" && w.size() > 2 && w[1] == "size") {
      t.columns.assign(w.begin() + 1, w.end());
    } else if (line.find("# Out of bounds values :") != std::string::npos) {
      t.outOfBounds = line.substr(line.find(':') + 1);
    } else if (line.find("# Avg bus bandwidth    :") != std::string::npos) {
      t.avgBusBw = line.substr(line.find(':') + 1);
    } else if (w[0][0] != '#' && !t.columns.empty() && isNumber(w[0])) {
      t.rows.push_back(w);
    }
  }
  return t;
}

const std::vector<std::string> kColumns = {"size",  "count", "type",  "redop",  "root",
                                           "time",  "algbw", "busbw", "#wrong", "time",
                                           "algbw", "busbw", "#wrong"};

class EveryTool : public ::testing::TestWithParam<std::string> {};

// The issue's done-when: every tool on 4 ranks of host memory, no wrong
// value, nccl-tests' columns and footer.
TEST_P(EveryTool, RunsUnderLanesRunWithNoWrongValues) {
  const std::string tool = GetParam();
  ASSERT_TRUE(executable(LANES_RUN_PATH)) << LANES_RUN_PATH << " is not built";
  ASSERT_TRUE(executable(toolPath(tool))) << toolPath(tool) << " is not built";
  std::vector<std::string> before = listLanesShm();
  CommandResult r = runTool(tool, {}, 4);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  Table t = parseTable(r.output);
  EXPECT_EQ(t.columns, kColumns) << r.output;
  // 8, 64, 512, 4K, 32K.
  ASSERT_EQ(t.rows.size(), 5u) << r.output;
  for (const auto& row : t.rows) {
    ASSERT_EQ(row.size(), kColumns.size()) << r.output;
    EXPECT_EQ(row[8], "0") << "out-of-place #wrong in " << r.output;
    EXPECT_EQ(row[12], "0") << "in-place #wrong in " << r.output;
    for (int c : {5, 6, 7, 9, 10, 11}) EXPECT_TRUE(isNumber(row[c])) << row[c];
  }
  EXPECT_NE(t.outOfBounds.find(" 0 OK"), std::string::npos) << t.outOfBounds;
  EXPECT_TRUE(isNumber(words(t.avgBusBw).empty() ? "" : words(t.avgBusBw)[0])) << t.avgBusBw;
  expectNoShmLeaks(before, tool.c_str());
}

INSTANTIATE_TEST_SUITE_P(PerfTools, EveryTool, ::testing::ValuesIn(kTools),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param.substr(6, i.param.size() - 11);  // "all_reduce"
                         });

// LANES_PERF_CORRUPT=1 makes one result wrong: it must show in #wrong and
// the footer, and the run must fail.
TEST(PerfTools, CorruptedResultIsCountedAndFailsTheRun) {
  ASSERT_TRUE(executable(toolPath("lanes_all_reduce_perf")));
  CommandResult r = runTool("lanes_all_reduce_perf", {}, 2, {{"LANES_PERF_CORRUPT", "1"}});
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_NE(r.exitCode, 0) << r.output;
  Table t = parseTable(r.output);
  ASSERT_FALSE(t.rows.empty()) << r.output;
  EXPECT_EQ(t.rows[0][8], "1") << r.output;  // the first out-of-place result
  int wrongRows = 0;
  for (const auto& row : t.rows) wrongRows += (row[8] != "0") + (row[12] != "0");
  EXPECT_EQ(wrongRows, 1) << r.output;
  EXPECT_NE(t.outOfBounds.find(" 1 FAILED"), std::string::npos) << t.outOfBounds;
}

// The same hook with -c 0 (no check): nothing to count, the run passes and
// #wrong says N/A, so the hook cannot fake a failure of its own.
TEST(PerfTools, WithoutTheCheckNothingIsCounted) {
  CommandResult r = runTool("lanes_all_reduce_perf", {"-c", "0"}, 2, {{"LANES_PERF_CORRUPT", "1"}});
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  Table t = parseTable(r.output);
  ASSERT_FALSE(t.rows.empty()) << r.output;
  EXPECT_EQ(t.rows[0][8], "N/A");
}

// --bounds on host memory: the measured host rate, and per size the bound
// and the fraction reached as two more columns.
TEST(PerfTools, HostBoundsAddTwoColumnsPerSize) {
  CommandResult r = runTool("lanes_all_gather_perf", {"--bounds"}, 2);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  EXPECT_NE(r.output.find("host memory copy"), std::string::npos) << r.output;
  Table t = parseTable(r.output);
  ASSERT_EQ(t.columns.size(), kColumns.size() + 2) << r.output;
  EXPECT_EQ(t.columns[13], "bound");
  EXPECT_EQ(t.columns[14], "%bound");
  for (const auto& row : t.rows) {
    ASSERT_EQ(row.size(), kColumns.size() + 2);
    if (row[0] != "0") {
      EXPECT_TRUE(isNumber(row[13])) << row[13];
    }
  }
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// -J: version 2, valid against the schema (python3-jsonschema), with the keys
// lanes-plot reads.
TEST(PerfTools, JsonValidatesAgainstTheSchema) {
  char dir[] = "/tmp/lanes-perf-json-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string json = std::string(dir) + "/out.json";
  CommandResult r = runTool("lanes_reduce_perf", {"--bounds", "-J", json, "-d", "int32"}, 4,
                            {{"LANES_NLANES", "3"}});
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  const std::string text = readFile(json);
  ASSERT_FALSE(text.empty()) << json << " was not written";
  EXPECT_NE(text.find("\"version\": 2"), std::string::npos);
  EXPECT_NE(text.find("\"tool\": \"lanes_reduce_perf\""), std::string::npos);
  EXPECT_NE(text.find("\"LANES_NLANES\": \"3\""), std::string::npos) << text;
  // The reduce's host algorithm, whichever this machine's cores make cheapest.
  EXPECT_TRUE(text.find("\"plan\": \"chain\"") != std::string::npos ||
              text.find("\"plan\": \"direct\"") != std::string::npos ||
              text.find("\"plan\": \"tree\"") != std::string::npos)
      << text;
  EXPECT_NE(text.find("\"host_copy\""), std::string::npos) << text;
  if (std::system("python3 -c 'import jsonschema' 2>/dev/null") != 0) {
    std::remove(json.c_str());
    rmdir(dir);
    GTEST_SKIP() << "python3 jsonschema is missing (Debian: python3-jsonschema); the key checks "
                    "above ran, the schema validation did not";
  }
  const std::string script =
      "import json,sys,jsonschema\n"
      "s=json.load(open(sys.argv[1]))\n"
      "jsonschema.Draft202012Validator.check_schema(s)\n"
      "d=json.load(open(sys.argv[2]))\n"
      "jsonschema.Draft202012Validator(s).validate(d)\n"
      "assert d['nranks']==4 and len(d['ranks'])==4 and d['topology']['ranks_per_host']==4\n"
      "assert len(d['results'])==5 and all(x['backend']=='lanes' for x in d['results'])\n"
      "assert all(x['out_of_place']['nwrong']==0 for x in d['results'])\n"
      "print('schema ok')\n";
  CommandResult v = runCommand({"python3", "-c", script, LANES_PERF_SCHEMA, json}, {}, 60);
  EXPECT_TRUE(v.exited && v.exitCode == 0) << v.describe();
  EXPECT_NE(v.output.find("schema ok"), std::string::npos) << v.output;
  // A file the schema must refuse: the check can fail.
  const std::string bad = std::string(dir) + "/bad.json";
  std::ofstream(bad) << "{\"version\": 1, \"results\": []}\n";
  CommandResult b = runCommand({"python3", "-c", script, LANES_PERF_SCHEMA, bad}, {}, 60);
  EXPECT_FALSE(b.exited && b.exitCode == 0) << "an invalid file passed: " << b.output;
  std::remove(json.c_str());
  std::remove(bad.c_str());
  rmdir(dir);
}

// Under lanes-run rank 0's table reads exactly as nccl-tests prints it: no
// "[0] " before the header, the rows or the footer (make bench's output).
TEST(PerfTools, TableFromRankZeroReadsLikeNcclTests) {
  CommandResult r = runTool("lanes_all_reduce_perf", {}, 2);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  ASSERT_EQ(parseTable(r.output).rows.size(), 5u) << r.output;
  int tableLines = 0;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_NE(line.rfind("[0] ", 0), 0u) << "rank 0's stdout has a prefix: " << line;
    if (line.rfind("# Collective test starting:", 0) == 0 || line.rfind("#  Rank  1 ", 0) == 0 ||
        line.rfind("# Out of bounds values : 0 OK", 0) == 0 ||
        line.rfind("# Avg bus bandwidth    :", 0) == 0)
      ++tableLines;
  }
  EXPECT_EQ(tableLines, 4) << "header, device and footer lines must start the line:\n" << r.output;
}

// More ranks than the CPUs they may run on: one note in the header (make
// bench runs 4 ranks on a 2-core CI box); none when each rank has a CPU.
TEST(PerfTools, NotesWhenRanksOutnumberCpus) {
  if (!executable("/usr/bin/taskset")) GTEST_SKIP() << "taskset (util-linux) is not installed";
  auto run = [](int ranks) {
    std::vector<std::string> argv = {"/usr/bin/taskset",
                                     "-c",
                                     "0",
                                     LANES_RUN_PATH,
                                     "-n",
                                     std::to_string(ranks),
                                     toolPath("lanes_all_reduce_perf")};
    for (auto& a : smallSweep()) argv.push_back(a);
    return runCommand(argv, {{"LANES_TIMEOUT", "60"}}, 240);
  };
  CommandResult two = run(2);
  ASSERT_TRUE(two.exited && two.exitCode == 0) << two.describe();
  const std::string note = "# Note: 2 ranks on 1 CPU(s) of ";
  size_t at = two.output.find(note);
  ASSERT_NE(at, std::string::npos) << two.output;
  EXPECT_EQ(two.output.find(note, at + 1), std::string::npos) << "said twice: " << two.output;
  EXPECT_TRUE(at == 0 || two.output[at - 1] == '\n') << two.output;
  CommandResult one = run(1);
  ASSERT_TRUE(one.exited && one.exitCode == 0) << one.describe();
  EXPECT_EQ(one.output.find("CPU(s) of "), std::string::npos) << one.output;
}

// Hypercube needs a power-of-two rank count, as in nccl-tests: 3 ranks print
// nccl-tests' line and no rows, and the run passes.
TEST(PerfTools, HyperCubeSkipsOtherRankCounts) {
  CommandResult r = runTool("lanes_hypercube_perf", {}, 3);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  EXPECT_NE(r.output.find("nRanks 3 is not a power of 2, skipping"), std::string::npos) << r.output;
  EXPECT_TRUE(parseTable(r.output).rows.empty());
}

// NCCL takes device buffers only: a clear error, exit 2, before any rank starts.
TEST(PerfTools, NcclWithHostMemoryIsAClearError) {
  CommandResult r = runCommand(
      {toolPath("lanes_all_reduce_perf"), "--backend", "nccl", "--memory", "host"}, {}, 30);
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.output.find("needs --memory device"), std::string::npos) << r.output;
}

#if LANES_HAVE_PERF_COMMON
// In-place send/recv (one buffer both ways) is checked for Lanes, which orders
// it, and N/A for NCCL, which leaves it undefined (as nccl-tests prints it).
TEST(PerfTools, InPlaceSendRecvIsCheckedForLanesOnly) {
  EXPECT_TRUE(lanes::perf::checksInPlace(lanes::perf::sendRecvSpec(), "lanes"));
  EXPECT_FALSE(lanes::perf::checksInPlace(lanes::perf::sendRecvSpec(), "nccl"));
  EXPECT_TRUE(lanes::perf::checksInPlace(lanes::perf::allReduceSpec(), "nccl"));
  EXPECT_TRUE(lanes::perf::checksInPlace(lanes::perf::hyperCubeSpec(), "nccl"));
}

// The loader names the library and carries dlerror() when NCCL is not there.
TEST(PerfTools, MissingNcclNamesTheLibraryAndDlerror) {
  const char* old = std::getenv("LANES_PERF_NCCL_LIB");
  std::string saved = old ? old : "";
  setenv("LANES_PERF_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
  std::shared_ptr<const lanes::perf::NcclLibrary> lib;
  Status s = lanes::perf::openNccl(&lib);
  if (old) {
    setenv("LANES_PERF_NCCL_LIB", saved.c_str(), 1);
  } else {
    unsetenv("LANES_PERF_NCCL_LIB");
  }
  ASSERT_FALSE(s) << "a missing library opened";
  EXPECT_NE(s.message().find("/nonexistent/libnccl.so.2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file"), std::string::npos) << s.message();
}

// Where libnccl.so.2 is installed (no GPU needed to load it), every entry
// point resolves and the version reads back.
TEST(PerfTools, InstalledNcclResolves) {
  std::shared_ptr<const lanes::perf::NcclLibrary> lib;
  Status s = lanes::perf::openNccl(&lib);
  if (!s) GTEST_SKIP() << "NCCL is not installed here: " << s.message();
  std::string v = lanes::perf::ncclVersionString(*lib);
  EXPECT_EQ(v.rfind("2.", 0), 0u) << v;
}
#endif

}  // namespace
}  // namespace lanes::test
