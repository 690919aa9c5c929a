// Socket, address, interface-selection and frame tests (loopback only).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "base/socket.h"

namespace lanes {
namespace {

SocketAddress loopback() {
  SocketAddress a;
  EXPECT_TRUE(SocketAddress::parse("127.0.0.1:0", &a).isOk());
  return a;
}

// A connected pair over loopback.
void makePair(Socket* client, Socket* server) {
  SocketAddress addr = loopback();
  Socket listener;
  ASSERT_TRUE(Socket::listen(&addr, 4, &listener).isOk());
  ASSERT_NE(addr.port(), 0);
  ASSERT_TRUE(Socket::connect(addr, Deadline::after(10), client).isOk());
  ASSERT_TRUE(listener.accept(Deadline::after(10), server).isOk());
}

TEST(SocketAddress, ParsesAndPrints) {
  SocketAddress a;
  ASSERT_TRUE(SocketAddress::parse("127.0.0.1:8080", &a).isOk());
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 8080);
  EXPECT_EQ(a.toString(), "127.0.0.1:8080");
  ASSERT_TRUE(SocketAddress::parse("[::1]:90", &a).isOk());
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.toString(), "[::1]:90");
  ASSERT_TRUE(SocketAddress::parse("::1", &a).isOk());
  EXPECT_EQ(a.port(), 0);
  ASSERT_TRUE(SocketAddress::parse("127.0.0.1", &a).isOk());
  EXPECT_EQ(a.port(), 0);
  a.setPort(5);
  EXPECT_EQ(a.port(), 5);
}

TEST(SocketAddress, RejectsMalformed) {
  SocketAddress a;
  EXPECT_EQ(SocketAddress::parse("127.0.0.1:99999", &a).code(), lanesInvalidArgument);
  EXPECT_EQ(SocketAddress::parse("127.0.0.1:http", &a).code(), lanesInvalidArgument);
  EXPECT_EQ(SocketAddress::parse("[::1:80", &a).code(), lanesInvalidArgument);
  EXPECT_EQ(SocketAddress::parse(":80", &a).code(), lanesInvalidArgument);
}

TEST(Interfaces, MatchSyntax) {
  EXPECT_TRUE(interfaceMatches("", "eth0"));
  EXPECT_TRUE(interfaceMatches("eth", "eth0"));
  EXPECT_TRUE(interfaceMatches("ib,eth", "eth1"));
  EXPECT_FALSE(interfaceMatches("ib,eth", "lo"));
  EXPECT_FALSE(interfaceMatches("^docker,lo", "lo"));
  EXPECT_FALSE(interfaceMatches("^docker,lo", "docker0"));
  EXPECT_TRUE(interfaceMatches("^docker,lo", "eth0"));
  EXPECT_TRUE(interfaceMatches("=eth0", "eth0"));
  EXPECT_FALSE(interfaceMatches("=eth0", "eth01"));
  EXPECT_FALSE(interfaceMatches("=eth0,ib0", "eth"));
  EXPECT_TRUE(interfaceMatches("=eth0,ib0", "ib0"));
  EXPECT_FALSE(interfaceMatches("^=eth0", "eth0"));
  EXPECT_TRUE(interfaceMatches("^=eth0", "eth01"));
}

TEST(Interfaces, FindsLoopbackLastAndHonoursSpec) {
  std::vector<InterfaceAddress> ifs;
  ASSERT_TRUE(findInterfaces("", &ifs).isOk());
  ASSERT_FALSE(ifs.empty());
  bool seenLoopback = false;
  for (const auto& ia : ifs) {
    bool lo = ia.name == "lo";
    EXPECT_FALSE(seenLoopback && !lo) << ia.name << " listed after loopback";
    seenLoopback = seenLoopback || lo;
    EXPECT_EQ(ia.address.port(), 0);
  }
  ASSERT_TRUE(findInterfaces("=lo", &ifs).isOk());
  for (const auto& ia : ifs) EXPECT_EQ(ia.name, "lo");
  Status st = findInterfaces("=no_such_interface", &ifs);
  EXPECT_EQ(st.code(), lanesInvalidArgument);
  EXPECT_NE(st.message().find("no_such_interface"), std::string::npos);
}

TEST(Socket, SendAllRecvAllMovesEveryByte) {
  Socket a, b;
  makePair(&a, &b);
  std::vector<uint8_t> out(3 << 20), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + 3);
  // Bigger than the socket buffers: needs the receiver running meanwhile.
  std::thread sender(
      [&] { EXPECT_TRUE(a.sendAll(out.data(), out.size(), Deadline::after(30)).isOk()); });
  EXPECT_TRUE(b.recvAll(in.data(), in.size(), Deadline::after(30)).isOk());
  sender.join();
  EXPECT_EQ(in, out);
}

TEST(Socket, RecvTimesOutAtDeadline) {
  Socket a, b;
  makePair(&a, &b);
  uint8_t byte;
  Status st = b.recvAll(&byte, 1, Deadline::after(0.05));
  EXPECT_EQ(st.code(), lanesTimeout);
}

TEST(Socket, ClosedPeerIsRemoteErrorNamingIt) {
  Socket a, b;
  makePair(&a, &b);
  a.reset();
  uint8_t byte;
  Status st = b.recvAll(&byte, 1, Deadline::after(10));
  EXPECT_EQ(st.code(), lanesRemoteError);
  EXPECT_NE(st.message().find("127.0.0.1"), std::string::npos) << st.message();
  // Writing to a closed peer fails (and does not raise SIGPIPE).
  std::vector<uint8_t> big(1 << 20);
  Status ws;
  for (int i = 0; i < 64 && ws.isOk(); ++i)
    ws = b.sendAll(big.data(), big.size(), Deadline::after(10));
  EXPECT_EQ(ws.code(), lanesRemoteError);
}

TEST(Socket, ConnectRetriesUntilListenerAppears) {
  SocketAddress addr = loopback();
  {
    Socket probe;  // learn a free port, then free it
    ASSERT_TRUE(Socket::listen(&addr, 1, &probe).isOk());
  }
  Socket client;
  Status st;
  std::thread connector([&] { st = Socket::connect(addr, Deadline::after(30), &client); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Socket listener;
  SocketAddress same = addr;
  ASSERT_TRUE(Socket::listen(&same, 4, &listener).isOk());
  Socket server;
  EXPECT_TRUE(listener.accept(Deadline::after(30), &server).isOk());
  connector.join();
  EXPECT_TRUE(st.isOk()) << st.message();
}

TEST(Socket, ConnectToNobodyTimesOut) {
  SocketAddress addr = loopback();
  {
    Socket probe;
    ASSERT_TRUE(Socket::listen(&addr, 1, &probe).isOk());
  }
  Socket s;
  Status st = Socket::connect(addr, Deadline::after(0.2), &s);
  EXPECT_EQ(st.code(), lanesTimeout);
  EXPECT_NE(st.message().find(addr.toString()), std::string::npos) << st.message();
}

TEST(Frames, RoundTrip) {
  Socket a, b;
  makePair(&a, &b);
  const char msg[] = "hello lanes";
  ASSERT_TRUE(sendFrame(a, 9, 77, msg, sizeof(msg), Deadline::after(10)).isOk());
  std::vector<uint8_t> big(100000, 0xab);
  ASSERT_TRUE(sendFrame(a, 4, 5, big.data(), big.size(), Deadline::after(10)).isOk());
  uint16_t type = 0;
  uint32_t tag = 0;
  std::vector<uint8_t> payload;
  ASSERT_TRUE(recvFrame(b, &type, &tag, &payload, 1 << 20, Deadline::after(10)).isOk());
  EXPECT_EQ(type, 9);
  EXPECT_EQ(tag, 77u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(payload.data())), "hello lanes");
  ASSERT_TRUE(recvFrame(b, &type, &tag, &payload, 1 << 20, Deadline::after(10)).isOk());
  EXPECT_EQ(payload, big);
}

TEST(Frames, RejectsBadMagicVersionAndOversize) {
  FrameHeader good{kFrameMagic, kFrameVersion, 1, 0, 0, 10};
  EXPECT_TRUE(checkFrameHeader(good, 10).isOk());
  FrameHeader h = good;
  h.magic = 0x12345678;
  EXPECT_EQ(checkFrameHeader(h, 10).code(), lanesInvalidArgument);
  h = good;
  h.version = kFrameVersion + 1;
  Status st = checkFrameHeader(h, 10);
  EXPECT_EQ(st.code(), lanesInvalidArgument);
  EXPECT_NE(st.message().find("version"), std::string::npos);
  h = good;
  h.length = 11;
  EXPECT_EQ(checkFrameHeader(h, 10).code(), lanesInvalidArgument);

  // On the wire: garbage bytes and an oversized frame are refused by recvFrame.
  Socket a, b;
  makePair(&a, &b);
  const char garbage[32] = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(a.sendAll(garbage, sizeof(garbage), Deadline::after(10)).isOk());
  uint16_t type;
  uint32_t tag;
  std::vector<uint8_t> payload;
  EXPECT_EQ(recvFrame(b, &type, &tag, &payload, 1024, Deadline::after(10)).code(),
            lanesInvalidArgument);
  Socket c, d;
  makePair(&c, &d);
  std::vector<uint8_t> big(2000);
  ASSERT_TRUE(sendFrame(c, 1, 0, big.data(), big.size(), Deadline::after(10)).isOk());
  EXPECT_EQ(recvFrame(d, &type, &tag, &payload, 1024, Deadline::after(10)).code(),
            lanesInvalidArgument);
}

TEST(Frames, ReaderAssemblesSplitFrames) {
  Socket a, b;
  makePair(&a, &b);
  std::vector<uint8_t> payload(1000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i);
  FrameHeader h{kFrameMagic, kFrameVersion, 4, 42, 0, payload.size()};
  std::vector<uint8_t> wire(sizeof(h));
  std::memcpy(wire.data(), &h, sizeof(h));
  wire.insert(wire.end(), payload.begin(), payload.end());
  FrameReader reader;
  bool complete = false;
  // Dribble the frame in pieces that split the header and the payload.
  size_t sent = 0;
  for (size_t piece : {5, 30, 400, 10000}) {
    size_t n = std::min(piece, wire.size() - sent);
    ASSERT_TRUE(a.sendAll(wire.data() + sent, n, Deadline::after(10)).isOk());
    sent += n;
    Deadline d = Deadline::after(10);
    // Read until the bytes sent so far are consumed (or the frame completes).
    while (!complete && !d.expired()) {
      ASSERT_TRUE(reader.readSome(b, 4096, &complete).isOk());
      if (sent < wire.size()) break;
    }
  }
  Deadline d = Deadline::after(10);
  while (!complete && !d.expired()) ASSERT_TRUE(reader.readSome(b, 4096, &complete).isOk());
  ASSERT_TRUE(complete);
  EXPECT_EQ(reader.header().tag, 42u);
  EXPECT_EQ(reader.payload(), payload);
  reader.reset();
  a.reset();
  Status st;
  d = Deadline::after(10);
  while (st.isOk() && !d.expired()) st = reader.readSome(b, 4096, &complete);
  EXPECT_EQ(st.code(), lanesRemoteError);
}

}  // namespace
}  // namespace lanes
