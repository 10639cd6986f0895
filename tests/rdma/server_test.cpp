// SPDX-License-Identifier: Apache-2.0
// Side channel and server behaviour that needs no RDMA device: real TCP
// sockets on loopback. The verbs path is exercised in the lab.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "probes/rdma/channel.hpp"
#include "probes/rdma/probe.hpp"

using namespace fa::rdma;

namespace {

// A loopback listener the test drives by hand.
struct Peer {
  fa::Fd listen;
  uint16_t port = 0;
  Peer() {
    auto fd = listen_tcp("127.0.0.1", 0, &port);
    REQUIRE(fd.ok());
    listen = std::move(*fd);
  }
  fa::Fd accept_one() { return fa::Fd(::accept(listen.get(), nullptr, nullptr)); }
};

void write_all(int fd, const std::string& s) { REQUIRE(::write(fd, s.data(), s.size()) == (ssize_t)s.size()); }

}  // namespace

TEST_CASE("no listener: peer_refused", "[rdma][channel]") {
  uint16_t port = 0;
  {
    auto fd = listen_tcp("127.0.0.1", 0, &port);  // reserve a port, then free it
    REQUIRE(fd.ok());
  }
  auto ch = Channel::connect("127.0.0.1", port, after(2));
  REQUIRE_FALSE(ch.ok());
  auto f = ch.fault();
  CHECK(f.reason == Reason::kPeerRefused);
  CHECK_THAT(f.message, Catch::Contains("127.0.0.1:" + std::to_string(port)));
}

TEST_CASE("unresolvable peer: no_route", "[rdma][channel]") {
  auto ch = Channel::connect("no-such-host.invalid", 1, after(2));
  REQUIRE_FALSE(ch.ok());
  CHECK(ch.fault().reason == Reason::kNoRoute);
}

TEST_CASE("records over a real socket: silence is a timeout, garbage a protocol error, EOF peer_closed",
          "[rdma][channel]") {
  Peer p;
  auto ch = Channel::connect("127.0.0.1", p.port, after(2));
  REQUIRE(ch.ok());
  fa::Fd srv = p.accept_one();
  REQUIRE(srv.valid());

  // Two records in one segment, the second split across two writes.
  write_all(srv.get(), "fa-rdma/2 done\nfa-rdma/2 lat it");
  auto r1 = ch->recv(after(2));
  REQUIRE(r1.ok());
  CHECK(std::holds_alternative<Done>(*r1));
  // The write's result is checked once the thread is joined: Catch2's
  // assertions are not thread-safe.
  ssize_t wrote = 0;
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    wrote = ::write(srv.get(), "ers=9\n", 6);
  });
  auto r2 = ch->recv(after(2));
  later.join();
  REQUIRE(wrote == 6);
  REQUIRE(r2.ok());
  CHECK(std::get<LatencyStart>(*r2).iters == 9);

  auto silent = ch->recv(after(0.1));
  REQUIRE_FALSE(silent.ok());
  CHECK(silent.fault().reason == Reason::kTimeout);

  write_all(srv.get(), "GET / HTTP/1.1\r\n");
  auto junk = ch->recv(after(2));
  REQUIRE_FALSE(junk.ok());
  CHECK(junk.fault().reason == Reason::kProtocolError);

  // A peer that streams without newlines is cut off at the line bound.
  write_all(srv.get(), std::string(kMaxLineBytes + 10, 'a'));
  auto endless = ch->recv(after(2));
  REQUIRE_FALSE(endless.ok());
  CHECK(endless.fault().reason == Reason::kProtocolError);
}

TEST_CASE("a peer that hangs up: peer_closed", "[rdma][channel]") {
  Peer p;
  auto ch = Channel::connect("127.0.0.1", p.port, after(2));
  REQUIRE(ch.ok());
  fa::Fd srv = p.accept_one();
  write_all(srv.get(), "fa-rdma/2 do");  // half a record, then gone
  srv.reset();
  auto gone = ch->recv(after(2));
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.fault().reason == Reason::kPeerClosed);
}

TEST_CASE("send reaches the peer as one line", "[rdma][channel]") {
  Peer p;
  auto ch = Channel::connect("127.0.0.1", p.port, after(2));
  REQUIRE(ch.ok());
  fa::Fd srv = p.accept_one();
  REQUIRE_FALSE(ch->send(Failure{Reason::kQpRtrFailed, "bad gid"}, after(2)).has_value());
  char buf[256] = {};
  ssize_t n = ::read(srv.get(), buf, sizeof buf - 1);
  REQUIRE(n > 0);
  CHECK(std::string(buf, n) == "fa-rdma/2 err reason=qp_rtr_failed msg=bad gid\n");
}

TEST_CASE("server start refuses a missing device and missing options", "[rdma][server]") {
  ServeOptions o;
  o.port = 0;
  o.gid_index = 0;
  auto s = Server::start(o);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains("--hca"));
  o.hca = {"fa_no_such_dev", 1};
  s = Server::start(o);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains("probe key is required"));
  o.key = *Key::parse(std::string(64, 'a'));
  s = Server::start(o);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains("fa_no_such_dev"));
  CHECK_THAT(s.error().message, Catch::Contains("device_error"));
}

TEST_CASE("run_probe refuses to run without a key", "[rdma][server]") {
  ProbeOptions o;
  o.peer = {"127.0.0.1", 1};
  o.hca = {"fa_no_such_dev", 1};
  o.gid_index = 0;
  auto r = run_probe(o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("probe key is required"));
}

TEST_CASE("default bind address: the fabric address of the probed port", "[rdma][server]") {
  Gid v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 20, 0, 11};
  CHECK(*fabric_bind_address(v4, true, "mlx5_0", 1, "/nonexistent") == "10.20.0.11");
  Gid v6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  CHECK(*fabric_bind_address(v6, true, "mlx5_0", 1, "/nonexistent") == "fd00::2");
  Gid ll = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  auto bad = fabric_bind_address(ll, true, "mlx5_0", 1, "/nonexistent");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("mlx5_0:1"));
  CHECK_THAT(bad.error().message, Catch::Contains("pass bind"));

  // InfiniBand: the IPoIB netdev under the HCA's device whose dev_port is
  // the port's (counted from 0). Loopback stands in for ib0 here.
  char tmpl[] = "/tmp/fa-rdma-bind-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string root = tmpl;
  const std::string net = root + "/class/infiniband/mlx5_0/device/net";
  for (auto [name, dev_port] : {std::pair{"ib1", "1"}, std::pair{"lo", "0"}}) {
    std::filesystem::create_directories(net + "/" + name);
    std::ofstream(net + "/" + name + "/dev_port") << dev_port << "\n";
  }
  CHECK(*fabric_bind_address(ll, false, "mlx5_0", 1, root) == "127.0.0.1");
  auto port2 = fabric_bind_address(ll, false, "mlx5_0", 2, root);  // ib1 has no address
  REQUIRE_FALSE(port2.ok());
  CHECK_THAT(port2.error().message, Catch::Contains("no IPoIB netdev with an address for mlx5_0:2"));
  std::filesystem::remove_all(root);
}
