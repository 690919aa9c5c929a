// A small HTTP endpoint serving one text document (the metrics exposition),
// through GNU libmicrohttpd (Debian libmicrohttpd12), opened at run time so
// that Lanes, and the libnccl.so.2 drop-in, load on machines without it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"

struct MHD_Daemon;

namespace lanes {

class HttpEndpoint {
 public:
  // Renders the document for each request.
  using Render = std::function<std::string()>;
  // Serves GET and HEAD of "/" and "/metrics" on `address`:`port` (port 0:
  // one the kernel picks) from a thread of libmicrohttpd's own.
  static Status start(const std::string& address, int port, Render render,
                      std::unique_ptr<HttpEndpoint>* out);
  HttpEndpoint();   // not serving; start() makes one that serves
  ~HttpEndpoint();  // stops serving, waits for requests in flight
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;
  int port() const { return port_; }

  struct Library;  // the functions taken from libmicrohttpd
  struct Serving;  // what the request handler reads

 private:
  std::unique_ptr<Serving> serving_;
  MHD_Daemon* daemon_ = nullptr;
  int owner_ = 0;  // the pid whose daemon thread serves: a forked child stops none
  int port_ = 0;
};

}  // namespace lanes
