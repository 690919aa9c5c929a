#include "observe/flight_dump_format.h"

#include <nlohmann/json.hpp>

namespace lanes {
namespace {

using json = nlohmann::ordered_json;

json entryJson(const FlightEntry& e) {
  json j = {{"id", e.id},
            {"seq", e.seq},
            {"call", e.call.name},
            {"datatype", e.call.datatype},
            {"redop", e.call.redop},
            {"root", e.call.root},
            {"count", e.call.count},
            {"calls", e.calls},
            {"bytes", e.bytes},
            {"device", e.onDevice},
            {"state", flightStateName(e.state)},
            {"plan", e.plan.data()},
            {"issued_us", e.issuedUs},
            {"started_us", e.startedUs},
            {"ended_us", e.endedUs}};
  json waiting = json::array();
  for (size_t i = 0; i < e.waitingCount; ++i) waiting.push_back(e.waitingFor[i]);
  j["waiting_for"] = std::move(waiting);
  return j;
}

FlightRecord recordOf(const json& j) {
  FlightRecord r;
  r.id = j.at("id").get<uint64_t>();
  r.seq = j.at("seq").get<int64_t>();
  r.name = j.at("call").get<std::string>();
  r.datatype = j.at("datatype").get<std::string>();
  r.redop = j.at("redop").get<std::string>();
  r.root = j.at("root").get<int32_t>();
  r.count = j.at("count").get<uint64_t>();
  r.calls = j.at("calls").get<uint32_t>();
  r.bytes = j.at("bytes").get<uint64_t>();
  r.onDevice = j.at("device").get<bool>();
  const std::string state = j.at("state").get<std::string>();
  if (!parseFlightState(state, &r.state))
    throw std::invalid_argument("unknown state \"" + state + "\"");
  r.plan = j.at("plan").get<std::string>();
  r.issuedUs = j.at("issued_us").get<int64_t>();
  r.startedUs = j.at("started_us").get<int64_t>();
  r.endedUs = j.at("ended_us").get<int64_t>();
  r.waitingFor = j.at("waiting_for").get<std::vector<int>>();
  return r;
}

}  // namespace

std::string FlightRecord::describeCall() const {
  std::string s = name + "(count " + std::to_string(count) + " " + datatype;
  if (!redop.empty()) s += " " + redop;
  if (root >= 0) {
    if (name == "send")
      s += " to rank " + std::to_string(root);
    else if (name == "recv")
      s += " from rank " + std::to_string(root);
    else
      s += " root " + std::to_string(root);
  }
  s += ")";
  if (calls > 1) s += " and " + std::to_string(calls - 1) + " more in its group";
  return s;
}

std::string flightDumpJson(const FlightDumpHeader& h, const std::vector<FlightEntry>& entries) {
  json j = {{"format", kFlightDumpFormat},
            {"version", kFlightDumpVersion},
            {"comm",
             {{"id", h.commId},
              {"name", h.commName},
              {"rank", h.rank},
              {"nranks", h.nranks},
              {"cuda_device", h.cudaDev},
              {"host", h.host},
              {"pid", h.pid}}},
            {"reason", h.reason},
            {"error", h.error},
            {"dumped_us", h.dumpedUs},
            {"capacity", h.capacity},
            {"issued", h.issued}};
  json list = json::array();
  for (const FlightEntry& e : entries) list.push_back(entryJson(e));
  j["entries"] = std::move(list);
  // Invalid UTF-8 in a user's communicator name must not stop the dump.
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

Status parseFlightDump(const std::string& text, FlightDump* out) {
  try {
    const json j = json::parse(text);
    if (!j.is_object() || j.value("format", "") != kFlightDumpFormat)
      return invalidArgument(std::string("not a Lanes flight-recorder dump (no \"format\": \"") +
                             kFlightDumpFormat + "\")");
    if (j.at("version").get<int>() != kFlightDumpVersion)
      return invalidArgument("flight-recorder dump version " +
                             std::to_string(j.at("version").get<int>()) + ", this tool reads " +
                             std::to_string(kFlightDumpVersion));
    FlightDump dump;
    const json& c = j.at("comm");
    dump.header.commId = c.at("id").get<std::string>();
    dump.header.commName = c.at("name").get<std::string>();
    dump.header.rank = c.at("rank").get<int>();
    dump.header.nranks = c.at("nranks").get<int>();
    dump.header.cudaDev = c.at("cuda_device").get<int>();
    dump.header.host = c.at("host").get<std::string>();
    dump.header.pid = c.at("pid").get<int>();
    dump.header.reason = j.at("reason").get<std::string>();
    dump.header.error = j.at("error").get<std::string>();
    dump.header.dumpedUs = j.at("dumped_us").get<int64_t>();
    dump.header.capacity = j.at("capacity").get<uint64_t>();
    dump.header.issued = j.at("issued").get<uint64_t>();
    for (const json& e : j.at("entries")) dump.records.push_back(recordOf(e));
    *out = std::move(dump);
    return Status::ok();
  } catch (const std::exception& e) {
    return invalidArgument(std::string("malformed flight-recorder dump: ") + e.what());
  }
}

}  // namespace lanes
