#include "observe/trace_writer.h"

#include <cerrno>
#include <cstring>
#include <memory>

namespace lanes {
namespace {

constexpr size_t kFlushBytes = size_t{1} << 20;

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
  *out = std::move(w);
  return Status::ok();
}

TraceWriter::~TraceWriter() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return;
  buffer_ += "\n]\n";
  flushLocked();
  std::fclose(file_);
}

void TraceWriter::event(const char* name, Track track, int64_t beginUs, int64_t endUs,
                        const std::string& args) {
  if (beginUs == 0 || endUs < beginUs) return;
  buffer_ += ",\n{\"ph\":\"X\",\"name\":\"" + jsonText(name) +
             "\",\"pid\":" + std::to_string(rank_) + ",\"tid\":" + std::to_string(track) +
             ",\"ts\":" + std::to_string(beginUs + offsetUs_) +
             ",\"dur\":" + std::to_string(endUs - beginUs) + ",\"args\":{" + args + "}}";
}

void TraceWriter::add(const FlightEntry& e) {
  std::string args = "\"id\":" + std::to_string(e.id) + ",\"seq\":" + std::to_string(e.seq) +
                     ",\"count\":" + std::to_string(e.call.count) + ",\"datatype\":\"" +
                     e.call.datatype + "\",\"bytes\":" + std::to_string(e.bytes) +
                     ",\"calls\":" + std::to_string(e.calls) + ",\"plan\":\"" +
                     jsonText(e.plan.data()) + "\",\"state\":\"" + flightStateName(e.state) + "\"";
  std::lock_guard<std::mutex> lock(mutex_);
  if (e.onDevice) {
    event(e.call.name, Calls, e.issuedUs, e.startedUs, args);
    event((std::string("enqueue ") + e.plan.data()).c_str(), Enqueue, e.issuedUs, e.startedUs,
          args);
  } else {
    event(e.call.name, Calls, e.issuedUs, e.endedUs, args);
    event("plan", Plan, e.issuedUs, e.startedUs, args);
    event(e.plan[0] ? e.plan.data() : "run", Engine, e.startedUs, e.endedUs, args);
  }
  if (buffer_.size() >= kFlushBytes) flushLocked();
}

void TraceWriter::flushLocked() {
  if (file_ == nullptr || buffer_.empty()) return;
  (void)std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
  buffer_.clear();
}

}  // namespace lanes
