// SPDX-License-Identifier: Apache-2.0
// The probe server's listener on loopback against real TCP clients: raw
// sockets that never authenticate, stall, send garbage or tamper, and the
// probe's own client code. The session handed over after authentication is
// the test's (the RDMA one registers memory and runs in the lab); that it is
// never entered for a peer without the key is what these tests check.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "probes/rdma/listener.hpp"

using namespace fa::rdma;
using namespace std::chrono_literals;

namespace {

Key key_a() { return *Key::parse(std::string(64, 'a')); }
Key key_b() { return *Key::parse(std::string(64, 'b')); }

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// What the session saw, read by the test once the listener thread is done
// with it (Catch2's assertions are not thread-safe).
struct Seen {
  std::atomic<int> calls{0};
  std::mutex mu;
  std::optional<Plan> plan;
  std::string fault;
};

// The test's session: one sealed `done` each way, unless `wait` asks it to
// sit on the channel until something ends it.
SessionFn session_of(Seen& seen, bool wait = false) {
  return [&seen, wait](Channel& ch, const Plan& plan) -> Check {
    ++seen.calls;
    {
      std::lock_guard<std::mutex> g(seen.mu);
      seen.plan = plan;
    }
    auto r = ch.recv(after(wait ? 60 : 2));
    if (!r.ok()) {
      Fault f = r.fault();
      std::lock_guard<std::mutex> g(seen.mu);
      seen.fault = std::string(reason_name(f.reason)) + ": " + f.message;
      return f;
    }
    if (!std::holds_alternative<Done>(*r)) return Fault{Reason::kProtocolError, "expected done"};
    return ch.send(Done{}, after(2));
  };
}

struct Fixture {
  Seen seen;
  std::unique_ptr<Listener> listener;
  explicit Fixture(double handshake_s = 0.5, bool wait = false, double margin_s = 30) {
    ListenOptions o;
    o.bind = "127.0.0.1";
    o.port = 0;
    o.key = key_a();
    o.handshake_timeout_s = handshake_s;
    o.io_timeout_s = 1;
    o.lifetime_margin_s = margin_s;
    auto l = Listener::start(std::move(o), session_of(seen, wait));
    REQUIRE(l.ok());
    listener = std::move(*l);
  }
  // Waits until `n` connections have ended.
  ServeStats ended(uint64_t n) {
    const auto t0 = Clock::now();
    while (listener->stats().sessions < n && since(t0) < 5) std::this_thread::sleep_for(10ms);
    return listener->stats();
  }
};

// A plain TCP client that says exactly what the test makes it say.
struct Raw {
  fa::Fd fd;
  std::string in;
  explicit Raw(uint16_t port) {
    fd = fa::Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  void send(const std::string& s) { REQUIRE(::send(fd.get(), s.data(), s.size(), MSG_NOSIGNAL) == (ssize_t)s.size()); }
  // Reads until EOF (true) or the timeout (false); what came is in `in`.
  bool eof_within(double seconds) {
    const auto t0 = Clock::now();
    while (since(t0) < seconds) {
      pollfd p{fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
      if (n <= 0) return true;
      in.append(buf, static_cast<size_t>(n));
    }
    return false;
  }
  // The next line (without '\n'), or "" after the timeout or EOF.
  std::string line(double seconds) {
    const auto t0 = Clock::now();
    while (in.find('\n') == std::string::npos && since(t0) < seconds) {
      pollfd p{fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
    auto nl = in.find('\n');
    if (nl == std::string::npos) return "";
    std::string l = in.substr(0, nl);
    in.erase(0, nl + 1);
    return l;
  }
};

Outcome<Channel> connect_to(const Fixture& f) { return Channel::connect("127.0.0.1", f.listener->port(), after(2)); }

}  // namespace

TEST_CASE("listener: a client that never authenticates reaches no session and is dropped at the handshake deadline",
          "[rdma][listener]") {
  Fixture f(0.5);
  const auto t0 = Clock::now();
  Raw raw(f.listener->port());
  std::this_thread::sleep_for(200ms);
  CHECK(f.listener->stats().authenticated == 0);
  CHECK(f.seen.calls == 0);
  REQUIRE(raw.eof_within(3));
  const double dropped = since(t0);
  CHECK(dropped >= 0.45);
  CHECK(dropped < 2.0);
  CHECK_THAT(raw.in, Catch::StartsWith("fa-rdma/2 err reason=timeout msg=handshake: "));
  ServeStats st = f.ended(1);
  CHECK(st.sessions == 1);
  CHECK(st.rejected == 1);
  CHECK(st.failed == 1);
  CHECK(st.authenticated == 0);
  CHECK(st.last_reason == "timeout");
  CHECK(f.seen.calls == 0);
}

TEST_CASE("listener: a stalled client is dropped and the next one is served", "[rdma][listener]") {
  Fixture f(0.5);
  // Timed from before the staller connects: its deadline runs from its
  // accept, which is later, however long the sleep below oversleeps.
  const auto t0 = Clock::now();
  Raw staller(f.listener->port());
  std::this_thread::sleep_for(50ms);  // the staller is the one accepted first
  auto ch = connect_to(f);
  REQUIRE(ch.ok());
  Check auth = authenticate_client(*ch, key_a(), after(5));
  const double waited = since(t0);
  REQUIRE_FALSE(auth.has_value());
  CHECK(waited >= 0.45);  // behind the staller's handshake deadline
  CHECK(waited < 4.0);
  REQUIRE_FALSE(ch->send(Plan{1500, 7}, after(2)).has_value());
  REQUIRE_FALSE(ch->send(Done{}, after(2)).has_value());
  auto bye = ch->recv(after(3));
  REQUIRE(bye.ok());
  CHECK(std::holds_alternative<Done>(*bye));
  CHECK(staller.eof_within(1));
  ServeStats st = f.ended(2);
  CHECK(st.sessions == 2);
  CHECK(st.rejected == 1);
  CHECK(st.authenticated == 1);
  CHECK(st.last_reason == "none");
  CHECK(f.seen.calls == 1);
  std::lock_guard<std::mutex> g(f.seen.mu);
  REQUIRE(f.seen.plan);
  CHECK(*f.seen.plan == Plan{1500, 7});
}

TEST_CASE("listener: a client with another key gets auth_failed, and so does the server", "[rdma][listener]") {
  Fixture f(2);
  auto ch = connect_to(f);
  REQUIRE(ch.ok());
  Check auth = authenticate_client(*ch, key_b(), after(3));
  REQUIRE(auth.has_value());
  CHECK(auth->reason == Reason::kAuthFailed);
  CHECK(auth->from_peer);
  CHECK_THAT(auth->message, Catch::Contains("reported: handshake: the client's proof does not verify"));
  ServeStats st = f.ended(1);
  CHECK(st.last_reason == "auth_failed");
  CHECK(st.rejected == 1);
  CHECK(st.authenticated == 0);
  CHECK_THAT(st.last_message, !Catch::Contains(std::string(16, 'a')));
  CHECK_THAT(st.last_message, !Catch::Contains(std::string(16, 'b')));
  CHECK(f.seen.calls == 0);
}

TEST_CASE("listener: garbage, an old client and an endless line are refused at once as auth_failed",
          "[rdma][listener]") {
  Fixture f(5);  // a deadline far away: the refusals must not wait for it
  const std::string v1_endpoint =
      "fa-rdma/1 ep lid=0000 qpn=000011 psn=a1b2c3 mtu=1024 gid=00000000000000000000ffff0a000001 rkey=00001234 "
      "addr=0000000000001000 len=0000000004001000\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {v1_endpoint, "magic"},
      {"GET / HTTP/1.1\r\n", "non-printable"},
      {encode(Plan{5000, 1000}) + "\n", "expected hello, got 'plan'"},
      // No newline, one byte past the bound: refused once it is buffered.
      {std::string(kMaxLineBytes + 1, 'a'), "longer than"},
  };
  uint64_t n = 0;
  for (const auto& [bytes, needle] : cases) {
    INFO("sent: " << bytes.substr(0, 60));
    const auto t0 = Clock::now();
    Raw raw(f.listener->port());
    raw.send(bytes);
    REQUIRE(raw.eof_within(3));
    CHECK(since(t0) < 2.0);
    CHECK_THAT(raw.in, Catch::StartsWith("fa-rdma/2 err reason=auth_failed msg=handshake: "));
    CHECK_THAT(raw.in, Catch::Contains(needle));
    ServeStats st = f.ended(++n);
    CHECK(st.last_reason == "auth_failed");
    CHECK(st.rejected == n);
  }
  CHECK(f.seen.calls == 0);
}

TEST_CASE("listener: after the handshake only sealed records count, and a tampered plan starts no session",
          "[rdma][listener]") {
  Fixture f(2);
  const Key k = key_a();
  Nonce nc;
  nc.fill(0x42);
  auto attempt = [&](const std::function<std::string(const SessionKey&)>& plan_line) {
    Raw raw(f.listener->port());
    ClientHandshake hs(k, nc);
    raw.send(hs.hello() + "\n");
    auto proof = hs.on_challenge(raw.line(2));
    REQUIRE(proof.ok());
    raw.send(*proof + "\n");
    auto session = hs.on_proof(raw.line(2));
    REQUIRE(session.ok());
    raw.send(plan_line(*session) + "\n");
    std::string reply = raw.line(3);
    auto opened = open(*session, Direction::kToClient, 0, reply);
    REQUIRE(opened.ok());  // the server's answer is sealed too
    auto rec = decode(*opened);
    REQUIRE(rec.ok());
    REQUIRE(std::holds_alternative<Failure>(*rec));
    CHECK(std::get<Failure>(*rec).reason == Reason::kAuthFailed);
    CHECK(raw.eof_within(2));
  };
  const std::string plan = encode(Plan{5000, 1000});
  SECTION("unsealed") { attempt([&](const SessionKey&) { return plan; }); }
  SECTION("altered after sealing") {
    attempt([&](const SessionKey& s) {
      std::string l = seal(s, Direction::kToServer, 0, plan);
      l.back() = '1';
      return l;
    });
  }
  SECTION("sealed for the other direction") {
    attempt([&](const SessionKey& s) { return seal(s, Direction::kToClient, 0, plan); });
  }
  SECTION("sealed out of sequence") { attempt([&](const SessionKey& s) { return seal(s, Direction::kToServer, 1, plan); }); }
  ServeStats st = f.ended(1);
  CHECK(st.authenticated == 1);
  CHECK(st.last_reason == "auth_failed");
  CHECK(f.seen.calls == 0);
}

TEST_CASE("listener: a recorded handshake replayed on a new connection is refused", "[rdma][listener]") {
  Fixture f(2);
  const Key k = key_a();
  Nonce nc;
  nc.fill(0x42);
  std::string hello, proof;
  {
    Raw first(f.listener->port());
    ClientHandshake hs(k, nc);
    hello = hs.hello();
    first.send(hello + "\n");
    auto p = hs.on_challenge(first.line(2));
    REQUIRE(p.ok());
    proof = *p;
    first.send(proof + "\n");
    REQUIRE(hs.on_proof(first.line(2)).ok());
  }
  f.ended(1);
  // Someone who saw those lines sends them again: the server's challenge
  // is fresh, so the old proof does not answer it.
  Raw replay(f.listener->port());
  replay.send(hello + "\n");
  const std::string challenge = replay.line(2);
  CHECK_THAT(challenge, Catch::StartsWith("fa-rdma/2 challenge nonce="));
  replay.send(proof + "\n");
  CHECK_THAT(replay.line(2), Catch::StartsWith("fa-rdma/2 err reason=auth_failed msg=handshake: the client's proof"));
  ServeStats st = f.ended(2);
  CHECK(st.authenticated == 1);
  CHECK(st.rejected == 1);
  CHECK(f.seen.calls == 0);
}

TEST_CASE("listener: an idle client and a session past its lifetime are dropped", "[rdma][listener]") {
  Fixture f(2, /*wait=*/true, /*margin_s=*/0.3);
  {
    // Authenticated, then silent: the plan does not come within the idle timeout (1 s).
    auto ch = connect_to(f);
    REQUIRE(ch.ok());
    REQUIRE_FALSE(authenticate_client(*ch, key_a(), after(3)).has_value());
    const auto t0 = Clock::now();
    auto r = ch->recv(after(5));
    REQUIRE(r.ok());
    REQUIRE(std::holds_alternative<Failure>(*r));
    CHECK(std::get<Failure>(*r).reason == Reason::kTimeout);
    CHECK(since(t0) >= 0.9);
    CHECK(since(t0) < 3);
  }
  f.ended(1);
  {
    // A plan of 0.1 s and 1 round trip: the session ends 0.1 + 0.001 + 0.3 s
    // after it, however long the session itself would wait.
    auto ch = connect_to(f);
    REQUIRE(ch.ok());
    REQUIRE_FALSE(authenticate_client(*ch, key_a(), after(3)).has_value());
    const auto t0 = Clock::now();
    REQUIRE_FALSE(ch->send(Plan{100, 1}, after(2)).has_value());
    auto r = ch->recv(after(10));
    const double took = since(t0);
    REQUIRE(r.ok());
    REQUIRE(std::holds_alternative<Failure>(*r));
    CHECK(std::get<Failure>(*r).reason == Reason::kTimeout);
    CHECK_THAT(std::get<Failure>(*r).message, Catch::Contains("the session's time is up"));
    CHECK(took >= 0.35);
    CHECK(took < 3);
  }
  ServeStats st = f.ended(2);
  CHECK(st.authenticated == 2);
  CHECK(st.rejected == 0);
  CHECK(f.seen.calls == 1);
  CHECK(session_lifetime_s(Plan{5000, 1000}, 30) == Approx(36.0));
}

TEST_CASE("listener: refuses to start without a key", "[rdma][listener]") {
  ListenOptions o;
  o.bind = "127.0.0.1";
  o.port = 0;
  Seen seen;
  auto l = Listener::start(o, session_of(seen));
  REQUIRE_FALSE(l.ok());
  CHECK_THAT(l.error().message, Catch::Contains("key"));
}
