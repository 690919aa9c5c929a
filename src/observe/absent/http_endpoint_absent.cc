// Built where libmicrohttpd's header was missing at configure time.
#include "observe/http_endpoint.h"

namespace lanes {

struct HttpEndpoint::Serving {};

Status HttpEndpoint::start(const std::string&, int, Render, std::unique_ptr<HttpEndpoint>*) {
  return systemError(
      "metrics endpoint: this Lanes build has no HTTP server (libmicrohttpd-dev was missing when "
      "it was configured); use LANES_METRICS=file=PATH, or install libmicrohttpd-dev and rebuild");
}

HttpEndpoint::HttpEndpoint() = default;
HttpEndpoint::~HttpEndpoint() = default;

}  // namespace lanes
