#include "base/datatype.h"

namespace lanes {

size_t datatypeSize(lanesDataType_t t) {
  switch (t) {
    case lanesInt8:
    case lanesUint8:
    case lanesFloat8e4m3:
    case lanesFloat8e5m2:
      return 1;
    case lanesFloat16:
    case lanesBfloat16:
      return 2;
    case lanesInt32:
    case lanesUint32:
    case lanesFloat32:
      return 4;
    case lanesInt64:
    case lanesUint64:
    case lanesFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* datatypeName(lanesDataType_t t) {
  switch (t) {
    case lanesInt8:
      return "int8";
    case lanesUint8:
      return "uint8";
    case lanesInt32:
      return "int32";
    case lanesUint32:
      return "uint32";
    case lanesInt64:
      return "int64";
    case lanesUint64:
      return "uint64";
    case lanesFloat16:
      return "float16";
    case lanesFloat32:
      return "float32";
    case lanesFloat64:
      return "float64";
    case lanesBfloat16:
      return "bfloat16";
    case lanesFloat8e4m3:
      return "float8e4m3";
    case lanesFloat8e5m2:
      return "float8e5m2";
    default:
      return "unknown";
  }
}

bool isFloatingType(lanesDataType_t t) {
  switch (t) {
    case lanesFloat16:
    case lanesFloat32:
    case lanesFloat64:
    case lanesBfloat16:
    case lanesFloat8e4m3:
    case lanesFloat8e5m2:
      return true;
    default:
      return false;
  }
}

const char* redOpName(RedOpKind k) {
  switch (k) {
    case RedOpKind::Sum:
      return "sum";
    case RedOpKind::Prod:
      return "prod";
    case RedOpKind::Max:
      return "max";
    case RedOpKind::Min:
      return "min";
    case RedOpKind::Avg:
      return "avg";
    case RedOpKind::PreMulSum:
      return "premulsum";
  }
  return "unknown";
}

}  // namespace lanes
