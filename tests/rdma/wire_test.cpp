// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <random>

#include "probes/rdma/wire.hpp"

using namespace fa::rdma;

namespace {

Endpoint sample_ep() {
  Endpoint e;
  e.lid = 0x1a;
  e.qpn = 0x000123;
  e.psn = 0xabcdef;
  e.mtu = 1024;
  e.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  e.rkey = 0xdeadbeef;
  e.addr = 0x00007f1234560000;
  e.len = 65600;
  return e;
}

const char kEp[] =
    "fa-rdma/2 ep lid=001a qpn=000123 psn=abcdef mtu=1024 gid=00000000000000000000ffff0a000001 rkey=deadbeef "
    "addr=00007f1234560000 len=0000000000010040";

}  // namespace

TEST_CASE("endpoint record has one exact spelling and round-trips", "[rdma][wire]") {
  CHECK(encode(sample_ep()) == kEp);
  auto r = decode(kEp);
  REQUIRE(r.ok());
  REQUIRE(std::holds_alternative<Endpoint>(*r));
  CHECK(std::get<Endpoint>(*r) == sample_ep());
}

TEST_CASE("control records round-trip", "[rdma][wire]") {
  Nonce n;
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(i * 7);
  for (const Record& rec : {Record{LatencyStart{1}}, Record{LatencyStart{kMaxLatencyIters}}, Record{Done{}},
                            Record{Hello{n}}, Record{Challenge{n}}, Record{Proof{n}},
                            Record{Plan{kMinDurationMs, 1}}, Record{Plan{kMaxDurationMs, kMaxLatencyIters}},
                            Record{Failure{Reason::kQpRtrFailed, "ibv_modify_qp INIT->RTR: Invalid argument"}},
                            Record{Failure{Reason::kTimeout, ""}}}) {
    std::string line = encode(rec);
    auto back = decode(line);
    INFO(line);
    REQUIRE(back.ok());
    CHECK(*back == rec);
  }
  CHECK(encode(LatencyStart{1000}) == "fa-rdma/2 lat iters=1000");
  CHECK(encode(Done{}) == "fa-rdma/2 done");
  CHECK(encode(Plan{5000, 1000}) == "fa-rdma/2 plan ms=5000 iters=1000");
  CHECK(encode(Hello{}) == "fa-rdma/2 hello nonce=" + std::string(64, '0'));
  CHECK(encode(Failure{Reason::kPeerRefused, "x y"}) == "fa-rdma/2 err reason=peer_refused msg=x y");
}

TEST_CASE("failure messages are sanitised so every encoded record decodes", "[rdma][wire]") {
  std::string nasty = "line\nbreak\x01\x7f" + std::string(1000, 'z');
  std::string line = encode(Failure{Reason::kRemoteError, nasty});
  auto back = decode(line);
  REQUIRE(back.ok());
  const auto& f = std::get<Failure>(*back);
  CHECK(f.message.size() == kMaxFailureMessage);
  CHECK(f.message.substr(0, 12) == "line?break??");
}

TEST_CASE("malformed records are rejected with the field named", "[rdma][wire]") {
  struct Case {
    std::string line;
    std::string needle;  // part of the error message
  };
  const std::string ep = kEp;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = ep;
    auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  const std::vector<Case> cases = {
      {"", "magic"},
      {"fa-rdma/1 done", "magic"},
      {"FA-RDMA/2 done", "magic"},
      {"fa-rdma/2", "no kind"},
      {"fa-rdma/2 ", "kind"},
      {"fa-rdma/2 bye", "kind"},
      {"fa-rdma/2 hello", "takes 1 field"},
      {"fa-rdma/2 hello nonce=" + std::string(63, 'a'), "nonce"},
      {"fa-rdma/2 hello nonce=" + std::string(64, 'A'), "nonce"},
      {"fa-rdma/2 hello mac=" + std::string(64, 'a'), "nonce"},
      {"fa-rdma/2 challenge nonce=" + std::string(65, 'a'), "nonce"},
      {"fa-rdma/2 auth mac=" + std::string(64, 'g'), "mac"},
      {"fa-rdma/2 auth mac=" + std::string(64, 'a') + " x", "takes 1 field"},
      {"fa-rdma/2 plan ms=5000", "takes 2 fields"},
      {"fa-rdma/2 plan ms=99 iters=1", "ms"},
      {"fa-rdma/2 plan ms=3600001 iters=1", "ms"},
      {"fa-rdma/2 plan ms=5000 iters=0", "iters"},
      {"fa-rdma/2 plan iters=1 ms=5000", "ms"},
      {"fa-rdma/2 done ", "takes no fields"},
      {"fa-rdma/2  done", "kind"},
      {"fa-rdma/2 done\r", "non-printable"},
      {"fa-rdma/2 lat", "takes 1 field"},
      {"fa-rdma/2 lat iters=0", "iters"},
      {"fa-rdma/2 lat iters=01", "iters"},
      {"fa-rdma/2 lat iters=-1", "iters"},
      {"fa-rdma/2 lat iters=+5", "iters"},
      {"fa-rdma/2 lat iters=1000001", "iters"},
      {"fa-rdma/2 lat iters=99999999999999999999999", "iters"},
      {"fa-rdma/2 lat iter=5", "iters"},
      {"fa-rdma/2 lat iters=5 iters=5", "takes 1 field"},
      {"fa-rdma/2 err reason=bogus msg=x", "reason"},
      {"fa-rdma/2 err reason=none msg=x", "reason"},
      {"fa-rdma/2 err reason=timeout", "reason= and msg="},
      {"fa-rdma/2 err reason=timeout text=x", "msg"},
      {"fa-rdma/2 err msg=x reason=timeout", "reason"},
      {"fa-rdma/2 err reason=timeout msg=" + std::string(kMaxFailureMessage + 1, 'a'), "msg"},
      {std::string("fa-rdma/2 err reason=timeout msg=a\0b", 35), "non-printable"},
      {"fa-rdma/2 ep", "takes 8 fields"},
      {ep + " extra=1", "takes 8 fields"},
      {ep + " ", "takes 8 fields"},
      {with("lid=001a", "lid=1a"), "lid"},
      {with("lid=001a", "lid=001A"), "lid"},
      {with("lid=001a", "lid=0x1a"), "lid"},
      {with("lid=001a ", ""), "takes 8 fields"},
      {with("qpn=000123", "qpn=000000"), "qpn"},
      {with("qpn=000123", "qpn=0000123"), "qpn"},
      {with("qpn=000123", "qpn=00012g"), "qpn"},
      {with("qpn=000123 psn=abcdef", "psn=abcdef qpn=000123"), "qpn"},
      {with("psn=abcdef", "psn=abcde"), "psn"},
      {with("psn=abcdef", "psn=ABCDEF"), "psn"},
      {with("mtu=1024", "mtu=1000"), "mtu"},
      {with("mtu=1024", "mtu=8192"), "mtu"},
      {with("mtu=1024", "mtu=01024"), "mtu"},
      {with("mtu=1024", "mtu="), "mtu"},
      {with("gid=00000000000000000000ffff0a000001", "gid=00000000000000000000ffff0a00001"), "gid"},
      {with("gid=00000000000000000000ffff0a000001", "gid=00000000000000000000FFFF0a000001"), "gid"},
      {with("gid=00000000000000000000ffff0a000001", "gid=::ffff:10.0.0.1"), "gid"},
      {with("rkey=deadbeef", "rkey=deadbee"), "rkey"},
      {with("rkey=deadbeef", "rkey=deadbeef0"), "rkey"},
      {with("addr=00007f1234560000", "addr=7f1234560000"), "addr"},
      {with("addr=00007f1234560000", "addr=ffffffffffffffff"), "addr"},
      {with("len=0000000000010040", "len=0000000000000000"), "len"},
      {with("len=0000000000010040", "len=0000000004001001"), "len"},
      {with("len=0000000000010040", "len=ffffffffffffffff"), "len"},
      {with("len=0000000000010040", "size=0000000000010040"), "len"},
      {with(" ep ", " EP "), "kind"},
      {std::string(kMaxRecordBytes + 1, 'a'), "longer than"},
  };
  for (const auto& c : cases) {
    INFO("record: '" << c.line << "'");
    auto r = decode(c.line);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains(c.needle));
  }
}

TEST_CASE("fuzz: mutated records either fail or decode to their canonical spelling", "[rdma][wire]") {
  // Every accepted input must be the one spelling encode() produces: a
  // decoder that accepted a variant would let two peers disagree on a value.
  Nonce n;
  n.fill(0x5a);
  const std::vector<std::string> seeds = {kEp, encode(LatencyStart{42}), encode(Done{}),
                                          encode(Failure{Reason::kRetryExceeded, "retry exceeded on wr 7"}),
                                          encode(Hello{n}), encode(Proof{n}), encode(Plan{2500, 300})};
  std::mt19937 rng(7);  // fixed seed: a failure reproduces
  const std::string alphabet = "0123456789abcdefABCDEF =:-/\n\t\x00\xff" "ghijklmnopqrstuvwxyz";
  size_t accepted = 0, total = 0;
  auto check = [&](const std::string& s) {
    ++total;
    auto r = decode(s);
    if (!r.ok()) return;
    ++accepted;
    INFO("accepted: '" << s << "'");
    CHECK(encode(*r) == s);
  };
  for (const auto& seed : seeds) {
    for (size_t i = 0; i <= seed.size(); ++i) {
      check(seed.substr(0, i));                         // every truncation
      if (i < seed.size()) check(seed.substr(0, i) + seed.substr(i + 1));  // every deletion
      for (char c : alphabet) {
        std::string m = seed;
        if (i < m.size()) {
          m[i] = c;  // every substitution
          check(m);
        }
        check(seed.substr(0, i) + c + seed.substr(i));  // every insertion
      }
    }
    for (int k = 0; k < 20000; ++k) {  // random multi-byte mutations
      std::string m = seed;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !m.empty(); ++e) m[rng() % m.size()] = static_cast<char>(rng() & 0xff);
      check(m);
    }
  }
  CHECK(total > 150000);
  CHECK(accepted > 0);  // substitutions inside hex fields stay valid
}

TEST_CASE("gid text forms", "[rdma][wire]") {
  Gid g = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  CHECK(gid_hex(g) == "fe80000000000000021122fffe334455");
  CHECK(gid_text(g) == "fe80::211:22ff:fe33:4455");
  Gid v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 2};
  CHECK(gid_text(v4) == "::ffff:192.168.1.2");
}
