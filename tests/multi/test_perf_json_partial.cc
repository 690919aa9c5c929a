// -J FILE survives a run that is killed part-way: the perf tools rewrite the
// file after every size (FILE.tmp renamed over FILE), so a run stopped by
// `timeout` (SIGTERM to lanes-run, forwarded to every rank) leaves a whole,
// schema-valid document with the sizes it finished and "complete": false; a
// run that ends normally says "complete": true and holds every size.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

extern char** environ;

namespace lanes::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kTool = std::string(LANES_PERF_DIR) + "/lanes_all_reduce_perf";

// 8 B .. 512 KiB by 4: 9 sizes, a second or two on 2 ranks of host memory.
std::vector<std::string> sweepArgs(const std::string& json, const std::string& cycles) {
  return {LANES_RUN_PATH, "-n", "2",  kTool, "--memory", "host", "-b", "8",    "-e", "1M",
          "-f",           "4",  "-n", "2",   "-w",       "1",    "-N", cycles, "-J", json};
}
constexpr size_t kSizes = 9;

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A scratch folder, removed with everything in it.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/lanes-perf-partial-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

// A command started in its own process group, output to a log file; the
// destructor SIGKILLs the group and reaps it if the test did not.
class Spawned {
 public:
  Spawned(const std::vector<std::string>& argv, const std::string& log) {
    std::vector<std::string> env = {"LANES_TIMEOUT=60"};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string(*e).rfind("LANES_TIMEOUT=", 0) != 0) env.emplace_back(*e);
    }
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    if (posix_spawn(&pid_, args[0], &fa, &attr, args.data(), envp.data()) != 0) pid_ = -1;
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Spawned() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
  }
  Spawned(const Spawned&) = delete;
  Spawned& operator=(const Spawned&) = delete;

  pid_t pid() const { return pid_; }
  // Waits up to `seconds` for the exit; false (still running) after that.
  bool wait(double seconds, int* status) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      const pid_t r = waitpid(pid_, status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
};

bool haveJsonschema() { return std::system("python3 -c 'import jsonschema' 2>/dev/null") == 0; }

// Validates `json` against the schema and runs `checks` (Python, `d` is the
// document); the output ends with "valid" when all passed.
CommandResult validate(const std::string& json, const std::string& checks) {
  const std::string script =
      "import json,sys,jsonschema\n"
      "s=json.load(open(sys.argv[1]))\n"
      "d=json.load(open(sys.argv[2]))\n"
      "jsonschema.Draft202012Validator(s).validate(d)\n" +
      checks + "print('valid')\n";
  return runCommand({"python3", "-c", script, LANES_PERF_SCHEMA, json}, {}, 60);
}

// -N 0 repeats the sweep until killed, so the kill lands part-way whatever
// the machine's speed: no timing in the test beyond generous deadlines.
TEST(PerfJsonPartial, KilledRunLeavesTheFinishedSizesMarkedIncomplete) {
  ASSERT_EQ(::access(LANES_RUN_PATH, X_OK), 0) << LANES_RUN_PATH << " is not built";
  ASSERT_EQ(::access(kTool.c_str(), X_OK), 0) << kTool << " is not built";
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string json = dir.path + "/run.json", log = dir.path + "/run.log";
  // A previous run's file: it must not survive as this run's result.
  std::ofstream(json) << "{\"stale\": true}\n";
  std::vector<std::string> before = listLanesShm();
  Spawned run(sweepArgs(json, "0"), log);
  ASSERT_GT(run.pid(), 0) << "could not start " << LANES_RUN_PATH;

  // Every read sees one whole document (rename is atomic), never a half-written one.
  std::string text;
  int reads = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    text = readFile(json);
    if (text.find("\"stale\"") == std::string::npos) {
      ++reads;
      ASSERT_NE(text.find("\"complete\": false}\n"), std::string::npos)
          << "read " << reads << " is not a whole, incomplete document:\n"
          << text;
      if (countOf(text, "\"backend\":") >= 2) break;
    }
    int st = 0;
    ASSERT_FALSE(run.wait(0.05, &st)) << "the -N 0 run ended by itself:\n" << readFile(log);
  }
  ASSERT_GE(countOf(text, "\"backend\":"), 2u) << "no rows within 60 s:\n" << readFile(log);

  // What `timeout` does: SIGTERM to lanes-run, which forwards it to the ranks.
  ASSERT_EQ(::kill(run.pid(), SIGTERM), 0);
  int status = 0;
  ASSERT_TRUE(run.wait(30, &status)) << "lanes-run still runs 30 s after SIGTERM";
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << readFile(log);
  expectNoShmLeaks(before, "the killed perf run");

  text = readFile(json);
  ASSERT_NE(text.find("\"complete\": false}\n"), std::string::npos) << text;
  const size_t rows = countOf(text, "\"backend\":");
  EXPECT_GE(rows, 2u) << text;
  if (!haveJsonschema()) {
    GTEST_SKIP() << "python3 jsonschema is missing (Debian: python3-jsonschema); the text checks "
                    "above ran, the schema validation did not";
  }
  CommandResult v = validate(json,
                             "assert d['complete'] is False, d['complete']\n"
                             "r=d['results']\n"
                             "assert len(r)>=2, len(r)\n"
                             "assert all(x['out_of_place']['nwrong']==0 for x in r)\n"
                             "assert r[0]['size']==8 and r[1]['size']==32, r[:2]\n"
                             "assert d['out_of_bounds']==0\n");
  EXPECT_TRUE(v.exited && v.exitCode == 0) << v.describe();
  EXPECT_NE(v.output.find("valid"), std::string::npos) << v.output;
}

TEST(PerfJsonPartial, FinishedRunIsCompleteWithEverySize) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string json = dir.path + "/run.json";
  CommandResult r = runCommand(sweepArgs(json, "1"), {{"LANES_TIMEOUT", "60"}}, 120);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  const std::string text = readFile(json);
  EXPECT_NE(text.find("\"complete\": true}\n"), std::string::npos) << text;
  EXPECT_EQ(countOf(text, "\"backend\":"), kSizes) << text;
  EXPECT_FALSE(fs::exists(json + ".tmp")) << "the temporary file was left behind";
  if (!haveJsonschema()) GTEST_SKIP() << "python3 jsonschema is missing; text checks ran";
  CommandResult v = validate(json,
                             "assert d['complete'] is True\n"
                             "assert [x['size'] for x in d['results']]==[8*4**i for i in "
                             "range(9)]\n");
  EXPECT_TRUE(v.exited && v.exitCode == 0) << v.describe();
  EXPECT_NE(v.output.find("valid"), std::string::npos) << v.output;
}

// -J through a symlink (or to a FIFO, /dev/stdout): rename would replace the
// link, so such a path gets the one document at the end, written through it.
TEST(PerfJsonPartial, SymlinkTargetIsWrittenThroughOnceAtTheEnd) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string target = dir.path + "/target.json", link = dir.path + "/link.json";
  std::ofstream(target) << "old\n";
  fs::create_symlink(target, link);
  CommandResult r = runCommand(sweepArgs(link, "1"), {{"LANES_TIMEOUT", "60"}}, 120);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  EXPECT_TRUE(fs::is_symlink(link)) << link << " was replaced by a plain file";
  const std::string text = readFile(target);
  EXPECT_NE(text.find("\"complete\": true}\n"), std::string::npos) << text;
  EXPECT_EQ(countOf(text, "\"backend\":"), kSizes) << text;
}

}  // namespace
}  // namespace lanes::test
