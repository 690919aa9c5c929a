#include "observe/trace_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <system_error>

namespace lanes {
namespace {

constexpr size_t kWakeEntries = 4096;  // a queue this long wakes the writer at once
constexpr auto kWriteEvery = std::chrono::milliseconds(100);

// A JSON string's body: quotes, backslashes and control bytes escaped.
std::string jsonText(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

int64_t clockOffsetUs(const int64_t* sent, const int64_t* peer, const int64_t* received,
                      int samples) {
  int best = -1;
  for (int i = 0; i < samples; ++i)
    if (received[i] >= sent[i] && (best < 0 || received[i] - sent[i] < received[best] - sent[best]))
      best = i;
  if (best < 0) return 0;
  return peer[best] - (sent[best] + received[best]) / 2;
}

Status TraceWriter::open(const std::string& path, int rank, const std::string& label,
                         int64_t offsetUs, std::unique_ptr<TraceWriter>* out) {
  auto w = std::make_unique<TraceWriter>();
  w->file_ = std::fopen(path.c_str(), "w");
  if (w->file_ == nullptr)
    return systemError("LANES_TRACE_FILE: cannot write " + path + " (" + std::strerror(errno) +
                       ")");
  w->rank_ = rank;
  w->offsetUs_ = offsetUs;
  // The array's first element opens it; every later one starts ",\n".
  w->buffer_ = "[\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(rank) +
               ",\"tid\":0,\"args\":{\"sort_index\":" + std::to_string(rank) + "}}";
  auto meta = [&](const char* name, int tid, const std::string& value) {
    w->buffer_ += ",\n{\"ph\":\"M\",\"name\":\"" + std::string(name) +
                  "\",\"pid\":" + std::to_string(rank) + ",\"tid\":" + std::to_string(tid) +
                  ",\"args\":{\"name\":\"" + jsonText(value) + "\"}}";
  };
  meta("process_name", 0, "rank " + std::to_string(rank) + " · " + label);
  meta("thread_name", Calls, "calls");
  meta("thread_name", Plan, "plan");
  meta("thread_name", Engine, "host engine");
  meta("thread_name", Enqueue, "device enqueue");
  w->owner_ = getpid();
  try {
    TraceWriter* raw = w.get();
    w->writer_ = std::jthread([raw](std::stop_token stop) { raw->run(stop); });
  } catch (const std::system_error& e) {
    return systemError(std::string("LANES_TRACE_FILE: cannot start its writer thread: ") +
                       e.what());
  }
  *out = std::move(w);
  return Status::ok();
}

TraceWriter::~TraceWriter() {
  // In a child forked after open() the thread does not exist: leave the file
  // to the parent.
  if (owner_ != 0 && owner_ != getpid()) {
    if (writer_.joinable()) writer_.detach();
    return;
  }
  if (writer_.joinable()) {
    writer_.request_stop();
    writer_.join();
  }
  if (file_ == nullptr) return;
  drain();
  buffer_ += "\n]\n";
  (void)std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
  std::fclose(file_);
}

void TraceWriter::run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, stop, kWriteEvery, [&] { return queued_.size() >= kWakeEntries; });
    }
    drain();
  }
}

void TraceWriter::drain() {
  std::vector<FlightEntry> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(queued_);
  }
  for (const FlightEntry& e : batch) format(e);
  if (!buffer_.empty()) {
    (void)std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
    buffer_.clear();
  }
}

void TraceWriter::event(const char* name, Track track, int64_t beginUs, int64_t endUs,
                        const std::string& args) {
  if (beginUs == 0 || endUs < beginUs) return;
  // One formatted write per event: the names are the recorder's (a call's,
  // a plan's), which need no escaping but a plan's, done in `args` already.
  char head[160];
  const int n = std::snprintf(head, sizeof head,
                              ",\n{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%lld,"
                              "\"dur\":%lld,\"args\":{",
                              name, rank_, static_cast<int>(track),
                              static_cast<long long>(beginUs + offsetUs_),
                              static_cast<long long>(endUs - beginUs));
  buffer_.append(head, static_cast<size_t>(std::min<int>(n, sizeof head - 1)));
  buffer_ += args;
  buffer_ += "}}";
}

void TraceWriter::add(const FlightEntry& e) {
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(e);
    full = queued_.size() == kWakeEntries;
  }
  if (full) wake_.notify_one();
}

void TraceWriter::format(const FlightEntry& e) {
  const std::string plan = jsonText(e.plan.data());
  char text[256];
  const int n = std::snprintf(
      text, sizeof text,
      "\"id\":%llu,\"seq\":%lld,\"count\":%llu,\"datatype\":\"%s\",\"bytes\":%llu,\"calls\":%u,"
      "\"plan\":\"%s\",\"state\":\"%s\"",
      static_cast<unsigned long long>(e.id), static_cast<long long>(e.seq),
      static_cast<unsigned long long>(e.call.count), e.call.datatype,
      static_cast<unsigned long long>(e.bytes), e.calls, plan.c_str(), flightStateName(e.state));
  const std::string args(text, static_cast<size_t>(std::min<int>(n, sizeof text - 1)));
  if (e.onDevice) {
    event(e.call.name, Calls, e.issuedUs, e.startedUs, args);
    event(("enqueue " + plan).c_str(), Enqueue, e.issuedUs, e.startedUs, args);
  } else {
    event(e.call.name, Calls, e.issuedUs, e.endedUs, args);
    event("plan", Plan, e.issuedUs, e.startedUs, args);
    event(e.plan[0] ? plan.c_str() : "run", Engine, e.startedUs, e.endedUs, args);
  }
}

}  // namespace lanes
