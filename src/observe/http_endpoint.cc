#include "observe/http_endpoint.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

namespace lanes {

struct HttpEndpoint::Library {
  decltype(&MHD_start_daemon) startDaemon = nullptr;
  decltype(&MHD_stop_daemon) stopDaemon = nullptr;
  decltype(&MHD_get_daemon_info) daemonInfo = nullptr;
  decltype(&MHD_create_response_from_buffer) createResponse = nullptr;
  decltype(&MHD_add_response_header) addHeader = nullptr;
  decltype(&MHD_queue_response) queueResponse = nullptr;
  decltype(&MHD_destroy_response) destroyResponse = nullptr;
  std::string why;  // empty when every function was found

  static const Library& get() {
    static const Library library;
    return library;
  }

 private:
  Library() {
    constexpr const char* kName = "libmicrohttpd.so.12";
    // Kept open for the process: the daemon's thread runs its code.
    void* handle = dlopen(kName, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      why = std::string(kName) + " could not be loaded (" + (err ? err : "?") +
            "): install GNU libmicrohttpd (Debian: apt install libmicrohttpd12)";
      return;
    }
    auto bind = [&](auto* fn, const char* name) {
      void* sym = dlsym(handle, name);
      if (sym == nullptr && why.empty()) why = std::string(kName) + " lacks " + name;
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(sym);
    };
    bind(&startDaemon, "MHD_start_daemon");
    bind(&stopDaemon, "MHD_stop_daemon");
    bind(&daemonInfo, "MHD_get_daemon_info");
    bind(&createResponse, "MHD_create_response_from_buffer");
    bind(&addHeader, "MHD_add_response_header");
    bind(&queueResponse, "MHD_queue_response");
    bind(&destroyResponse, "MHD_destroy_response");
  }
};

struct HttpEndpoint::Serving {
  const Library* library = nullptr;
  Render render;
};

namespace {

MHD_Result reply(const HttpEndpoint::Library& lib, MHD_Connection* connection, unsigned status,
                 const std::string& body, const char* contentType, const char* allow = nullptr) {
  MHD_Response* response =
      lib.createResponse(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  lib.addHeader(response, MHD_HTTP_HEADER_CONTENT_TYPE, contentType);
  if (allow != nullptr) lib.addHeader(response, MHD_HTTP_HEADER_ALLOW, allow);
  const MHD_Result queued = lib.queueResponse(connection, status, response);
  lib.destroyResponse(response);
  return queued;
}

MHD_Result handle(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload*/, size_t* uploadSize,
                  void** /*state*/) {
  const auto* serving = static_cast<const HttpEndpoint::Serving*>(cls);
  const HttpEndpoint::Library& lib = *serving->library;
  constexpr const char* kText = "text/plain; charset=utf-8";
  const std::string_view m(method);
  if (m != MHD_HTTP_METHOD_GET && m != MHD_HTTP_METHOD_HEAD) {
    if (uploadSize != nullptr) *uploadSize = 0;  // a body is not read, just refused
    return reply(lib, connection, MHD_HTTP_METHOD_NOT_ALLOWED,
                 "Lanes metrics: only GET and HEAD are served\n", kText, "GET, HEAD");
  }
  const std::string_view path(url);
  if (path != "/" && path != "/metrics")
    return reply(lib, connection, MHD_HTTP_NOT_FOUND,
                 "Lanes metrics are at /metrics (Prometheus text format)\n", kText);
  return reply(lib, connection, MHD_HTTP_OK, serving->render(),
               "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

Status HttpEndpoint::start(const std::string& address, int port, Render render,
                           std::unique_ptr<HttpEndpoint>* out) {
  const Library& lib = Library::get();
  if (!lib.why.empty()) return systemError("metrics endpoint: " + lib.why);
  sockaddr_in bind{};
  bind.sin_family = AF_INET;
  bind.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &bind.sin_addr) != 1)
    return invalidArgument("metrics endpoint: \"" + address + "\" is not an IPv4 address");
  auto endpoint = std::make_unique<HttpEndpoint>();
  endpoint->serving_ = std::make_unique<Serving>(Serving{&lib, std::move(render)});
  endpoint->daemon_ = lib.startDaemon(MHD_USE_AUTO_INTERNAL_THREAD, static_cast<uint16_t>(port),
                                      nullptr, nullptr, &handle, endpoint->serving_.get(),
                                      MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&bind),
                                      MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
  if (endpoint->daemon_ == nullptr) {
    return systemError("metrics endpoint: could not serve HTTP on " + address + ":" +
                       std::to_string(port) +
                       " (in use, or not an address of this host); pick another port in "
                       "LANES_METRICS");
  }
  endpoint->owner_ = getpid();
  const MHD_DaemonInfo* info = lib.daemonInfo(endpoint->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  endpoint->port_ = info != nullptr ? info->port : port;
  *out = std::move(endpoint);
  return Status::ok();
}

HttpEndpoint::HttpEndpoint() = default;

HttpEndpoint::~HttpEndpoint() {
  if (daemon_ != nullptr && owner_ == getpid()) serving_->library->stopDaemon(daemon_);
}

}  // namespace lanes
