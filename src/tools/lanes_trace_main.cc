// lanes-trace: merges the per-rank trace files LANES_TRACE_FILE wrote into
// one Chrome/Perfetto trace, a process per rank (docs/observability.md).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/dump_files.h"

namespace {

constexpr const char* kUsage =
    "usage: lanes-trace [-o OUT.json] PATH...\n"
    "\n"
    "Merges Lanes trace files (LANES_TRACE_FILE=PREFIX writes PREFIX.<comm>.rank<R>.json on\n"
    "every rank, on rank 0's clock) into one trace in Chrome's JSON format: open it in\n"
    "ui.perfetto.dev or chrome://tracing. A PATH is a file, a folder, or the PREFIX.\n"
    "A file cut short (its process died) is read up to its last whole event.\n"
    "\n"
    "Exit status: 0 merged, 1 a file unreadable or not a trace (the others are merged), 2 none.\n";

using json = nlohmann::json;

// A rank's array; one whose process died lacks its closing bracket.
bool parseEvents(std::string text, json* out, std::string* why) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      *out = json::parse(text);
      if (!out->is_array()) {
        *why = "not a JSON array of trace events";
        return false;
      }
      return true;
    } catch (const std::exception& e) {
      *why = e.what();
      // Every event ends its arguments and itself: "}}".
      const size_t last = text.rfind("}}");
      if (attempt > 0 || last == std::string::npos) return false;
      text = text.substr(0, last + 2) + "\n]";
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string outPath;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (std::strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      outPath = argv[++i];
      continue;
    }
    paths.push_back(argv[i]);
  }
  if (paths.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  json events = json::array();
  int status = 0;
  size_t files = 0;
  for (const std::string& arg : paths) {
    const auto found = lanes::dumpFilesAt(arg);
    if (found.empty()) std::fprintf(stderr, "lanes-trace: no trace at %s\n", arg.c_str());
    for (const auto& file : found) {
      std::string text, why;
      json part;
      if (!lanes::readWholeFile(file, &text) || !parseEvents(text, &part, &why)) {
        std::fprintf(stderr, "lanes-trace: %s: %s\n", file.c_str(),
                     why.empty() ? "cannot be read" : why.c_str());
        status = 1;
        continue;
      }
      for (auto& e : part) events.push_back(std::move(e));
      ++files;
    }
  }
  if (files == 0) {
    std::fputs("lanes-trace: no trace file read\n", stderr);
    return status != 0 ? status : 2;
  }
  const std::string text =
      json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}}.dump() + "\n";
  if (outPath.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    std::ofstream out(outPath, std::ios::binary);
    out << text;
    if (!out) {
      std::fprintf(stderr, "lanes-trace: cannot write %s\n", outPath.c_str());
      return 1;
    }
    std::fprintf(stderr, "lanes-trace: %zu files into %s\n", files, outPath.c_str());
  }
  return status;
}
