// Fuzzes the incremental frame reader the root and the monitor run on every
// connection: the input is the byte stream a peer (or a stranger) sends. It
// crosses a real socket pair, so partial reads and EOF take the real paths.
#include <sys/socket.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "base/socket.h"
#include "bootstrap/wire.h"

using namespace lanes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  Socket reader(fds[0]), writer(fds[1]);
  // Inputs are small (libFuzzer's -max_len): they fit the socket buffer.
  size_t sent = 0;
  while (sent < size) {
    size_t n = 0;
    if (!writer.trySend(data + sent, size - sent, &n).isOk() || n == 0) break;
    sent += n;
  }
  ::shutdown(writer.fd(), SHUT_WR);

  FrameReader frames;
  for (int i = 0; i < 1024; ++i) {
    bool complete = false;
    if (!frames.readSome(reader, wire::kMaxHelloBytes, &complete).isOk() || !complete) break;
    if (frames.header().length != frames.payload().size()) std::abort();
    wire::Hello h;
    std::vector<RankInfo> ranks;
    std::vector<SocketAddress> listens;
    int32_t dead;
    std::string why;
    switch (frames.header().type) {
      case wire::kHello:
        (void)wire::decodeHello(frames.payload(), frames.header().tag & 1, &h);
        break;
      case wire::kTable:
        (void)wire::decodeTable(frames.payload(), 2, &ranks, &listens);
        break;
      case wire::kError:
        (void)wire::decodeError(frames.payload());
        break;
      case wire::kFailure:
        (void)wire::decodeFailureNotice(frames.payload(), 4, &dead, &why);
        break;
      default:
        break;
    }
    frames.reset();
  }
  return 0;
}
