// An NVTX tool for tests: loaded through NVTX_INJECTION64_PATH, it writes
// every range pushed and popped in a domain to LANES_NVTX_RECORD_FILE.<pid>
// (a file per process: ranks' buffered writes never interleave), one
// line each: "push <domain> <thread> <payload> <message>", "pop <domain> <thread>",
// written out when the process exits.
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>

namespace {

struct Domain {
  std::string name;
};

std::mutex mutex;
FILE* out = nullptr;

long threadId() { return static_cast<long>(syscall(SYS_gettid)); }

const char* nameOf(nvtxDomainHandle_t d) {
  return d != nullptr ? reinterpret_cast<Domain*>(d)->name.c_str() : "-";
}

nvtxDomainHandle_t NVTX_API domainCreate(const char* name) {
  // Lives as long as the process, as an NVTX domain does (a deque keeps
  // the addresses of its elements).
  static std::mutex domainsMutex;
  static std::deque<Domain> domains;
  std::lock_guard<std::mutex> lock(domainsMutex);
  domains.push_back(Domain{name});
  return reinterpret_cast<nvtxDomainHandle_t>(&domains.back());
}

int NVTX_API rangePush(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  std::lock_guard<std::mutex> lock(mutex);
  const char* message = a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "?";
  const unsigned long long payload =
      a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 ? a->payload.ullValue : 0;
  if (out != nullptr) {
    std::fprintf(out, "push %s %ld %llu %s\n", nameOf(domain), threadId(), payload, message);
  }
  return 0;
}

int NVTX_API rangePop(nvtxDomainHandle_t domain) {
  std::lock_guard<std::mutex> lock(mutex);
  if (out != nullptr) {
    std::fprintf(out, "pop %s %ld\n", nameOf(domain), threadId());
  }
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t getExportTable) {
  const char* path = std::getenv("LANES_NVTX_RECORD_FILE");
  if (path == nullptr) return 0;
  out = std::fopen((std::string(path) + "." + std::to_string(getpid())).c_str(), "w");
  if (out == nullptr) return 0;
  // Buffered, written out at exit: the overhead bench attaches this tool too.
  std::atexit([] {
    std::lock_guard<std::mutex> lock(mutex);
    std::fclose(out);
    out = nullptr;
  });
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(getExportTable(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks == nullptr ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
      size <= NVTX_CBID_CORE2_DomainCreateA)
    return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&domainCreate);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&rangePush);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(&rangePop);
  return 1;
}
