// Fuzzes the topology JSON import (LANES_TOPO_FILE, `lanes-topo --load`): the
// JSON parser, then the model built from whatever parsed. A loaded model must
// survive a save/load round trip.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "topology/json.h"
#include "topology/json_io.h"

using namespace lanes::topo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Json json;
  std::string error;
  if (!Json::parse(text, &json, &error)) return 0;
  Topology topo;
  if (!fromJson(json, &topo).isOk()) return 0;
  Topology again;
  if (!fromJson(toJson(topo), &again).isOk()) std::abort();
  return 0;
}
