// SPDX-License-Identifier: Apache-2.0
// The side channel's handshake and sealing as pure functions on bytes: the
// lines two ends exchange, fed to the state machines directly.
#include <catch2/catch.hpp>

#include "probes/rdma/auth.hpp"

using namespace fa::rdma;

namespace {

const std::string kKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

Key key_a() { return *Key::parse(kKeyHex); }
Key key_b() { return *Key::parse(std::string(64, 'b')); }

Nonce nonce(uint8_t fill) {
  Nonce n;
  n.fill(fill);
  return n;
}

std::string hex(const Mac& m) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : m) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

// One full handshake; the lines as they went over the wire.
struct Transcript {
  std::string hello, challenge, client_auth, server_auth;
  SessionKey client, server;
};

Transcript handshake(const Key& ck, const Key& sk, const Nonce& nc, const Nonce& ns) {
  Transcript t;
  ClientHandshake c(ck, nc);
  ServerHandshake s(sk, ns);
  t.hello = c.hello();
  auto ch = s.on_hello(t.hello);
  REQUIRE(ch.ok());
  t.challenge = *ch;
  auto ca = c.on_challenge(t.challenge);
  REQUIRE(ca.ok());
  t.client_auth = *ca;
  auto sa = s.on_proof(t.client_auth);
  REQUIRE(sa.ok());
  t.server_auth = *sa;
  auto session = c.on_proof(t.server_auth);
  REQUIRE(session.ok());
  t.client = *session;
  t.server = s.session();
  return t;
}

}  // namespace

TEST_CASE("probe key: hex or padded base64 of 32..512 bytes, never echoed", "[rdma][auth]") {
  auto hex = Key::parse(kKeyHex);
  REQUIRE(hex.ok());
  CHECK(hex->bytes().size() == 32);
  CHECK(hex->bytes()[31] == 0x1f);
  auto b64 = Key::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
  REQUIRE(b64.ok());
  CHECK(b64->bytes() == hex->bytes());
  CHECK(Key::parse(std::string(1024, 'A')).ok());  // 512 bytes of hex
  const std::string secretish = "sup3r-s3cret-passw0rd";
  for (const std::string& bad :
       {std::string(), std::string(62, 'a'), std::string(1026, 'a'), secretish, secretish + "===",
        std::string("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").replace(10, 1, "="),
        std::string("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").replace(10, 1, " "),
        std::string("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh==")}) {
    INFO("key text: '" << bad << "'");
    auto k = Key::parse(bad);
    REQUIRE_FALSE(k.ok());
    CHECK_THAT(k.error().message, Catch::Contains("openssl rand -hex 32"));
    CHECK_THAT(k.error().message, Catch::Contains(std::to_string(bad.size()) + " characters"));
    if (bad.size() >= 8) CHECK_THAT(k.error().message, !Catch::Contains(bad.substr(0, 8)));
  }
}

TEST_CASE("handshake proofs and session key match known HMAC-SHA256 values", "[rdma][auth]") {
  // Computed with Python's hmac module: pins the labels and the order of
  // the nonces, so two versions of the agent keep agreeing.
  const Key k = key_a();
  CHECK(hex(client_proof(k, nonce(0x11), nonce(0x22))) ==
        "ce8d76d6b444dd5bc0d0be7fe2a8e00fea0d45d2baeffd0ecb01f0c73558c5ac");
  CHECK(hex(server_proof(k, nonce(0x11), nonce(0x22))) ==
        "4dbe117c249fb80d7fcc231a0a98668b2366123be30d18248b1f7843164e96df");
  const SessionKey s = session_key(k, nonce(0x11), nonce(0x22));
  CHECK(hex(s.bytes) == "57c59bd894ef432088e5af3cd2144d6adf0d5bd7d369119c06912ff33211557e");
  CHECK(seal(s, Direction::kToServer, 0, "fa-rdma/2 done") ==
        "14903333d144144750e28d9d89c717281d297cb7f3520b1880bd2dbf462ead11 fa-rdma/2 done");
}

TEST_CASE("handshake with the right key: both ends derive the same session key", "[rdma][auth]") {
  const Key k = key_a();
  Transcript t = handshake(k, k, nonce(0x11), nonce(0x22));
  CHECK(t.hello == "fa-rdma/2 hello nonce=" + std::string(64, '1'));
  CHECK(t.challenge == "fa-rdma/2 challenge nonce=" + std::string(64, '2'));
  CHECK(t.client_auth == "fa-rdma/2 auth mac=ce8d76d6b444dd5bc0d0be7fe2a8e00fea0d45d2baeffd0ecb01f0c73558c5ac");
  CHECK(t.server_auth == "fa-rdma/2 auth mac=4dbe117c249fb80d7fcc231a0a98668b2366123be30d18248b1f7843164e96df");
  CHECK(t.client.bytes == t.server.bytes);
  CHECK(t.client.bytes == session_key(k, nonce(0x11), nonce(0x22)).bytes);
  // Another pair of nonces, another session key.
  CHECK(handshake(k, k, nonce(0x33), nonce(0x22)).client.bytes != t.client.bytes);
  CHECK(handshake(k, k, nonce(0x11), nonce(0x44)).client.bytes != t.client.bytes);
}

TEST_CASE("handshake with a wrong key: the server refuses before it proves anything", "[rdma][auth]") {
  const Key ka = key_a(), kb = key_b();
  ClientHandshake c(ka, nonce(0x11));
  ServerHandshake s(kb, nonce(0x22));
  auto challenge = s.on_hello(c.hello());
  REQUIRE(challenge.ok());
  auto proof = c.on_challenge(*challenge);
  REQUIRE(proof.ok());
  auto refused = s.on_proof(*proof);
  REQUIRE_FALSE(refused.ok());
  auto f = refused.fault();
  CHECK(f.reason == Reason::kAuthFailed);
  CHECK_THAT(f.message, Catch::Contains("wrong probe key"));
  CHECK_THAT(f.message, !Catch::Contains(hex(client_proof(ka, nonce(0x11), nonce(0x22)))));

  // The client, for its part, refuses a server that proves another key,
  // and takes a server's `err` as the server's reason.
  ClientHandshake c2(ka, nonce(0x11));
  REQUIRE(c2.on_challenge(*challenge).ok());
  auto impostor = c2.on_proof(encode(Proof{server_proof(kb, nonce(0x11), nonce(0x22))}));
  REQUIRE_FALSE(impostor.ok());
  CHECK(impostor.fault().reason == Reason::kAuthFailed);
  ClientHandshake c3(ka, nonce(0x11));
  REQUIRE(c3.on_challenge(*challenge).ok());
  auto told = c3.on_proof(encode(Failure{Reason::kAuthFailed, "handshake: wrong probe key"}));
  REQUIRE_FALSE(told.ok());
  auto tf = told.fault();
  CHECK(tf.reason == Reason::kAuthFailed);
  CHECK(tf.from_peer);
}

TEST_CASE("handshake: a recorded proof does not verify with fresh nonces", "[rdma][auth]") {
  const Key k = key_a();
  Transcript old = handshake(k, k, nonce(0x11), nonce(0x22));

  // Replaying the client's lines to a server that picked another nonce.
  ServerHandshake s(k, nonce(0x55));
  REQUIRE(s.on_hello(old.hello).ok());
  auto replayed = s.on_proof(old.client_auth);
  REQUIRE_FALSE(replayed.ok());
  CHECK(replayed.fault().reason == Reason::kAuthFailed);

  // Replaying the server's lines to a client that picked another nonce.
  ClientHandshake c(k, nonce(0x66));
  REQUIRE(c.on_challenge(old.challenge).ok());
  auto stale = c.on_proof(old.server_auth);
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.fault().reason == Reason::kAuthFailed);

  // Reflection: the client's own proof handed back as the server's.
  ClientHandshake c2(k, nonce(0x11));
  REQUIRE(c2.on_challenge(old.challenge).ok());
  auto reflected = c2.on_proof(old.client_auth);
  REQUIRE_FALSE(reflected.ok());
  CHECK(reflected.fault().reason == Reason::kAuthFailed);

  // One proof per challenge: a second guess on the same challenge fails
  // even when it is right.
  ServerHandshake s2(k, nonce(0x22));
  REQUIRE(s2.on_hello(old.hello).ok());
  REQUIRE_FALSE(s2.on_proof(encode(Proof{})).ok());
  REQUIRE_FALSE(s2.on_proof(old.client_auth).ok());
}

TEST_CASE("handshake: truncated, oversized and out-of-order lines are refused as auth_failed", "[rdma][auth]") {
  const Key k = key_a();
  const std::string hello = ClientHandshake(k, nonce(0x11)).hello();
  struct Case {
    std::string line;
    std::string needle;
  };
  const std::vector<Case> bad_hellos = {
      {"", "magic"},
      {hello.substr(0, hello.size() - 1), "nonce"},
      {hello.substr(0, 8), "magic"},
      {hello + "0", "nonce"},
      {hello + " x=1", "takes 1 field"},
      {std::string(kMaxRecordBytes + 1, 'a'), "longer than"},
      {"fa-rdma/1 ep lid=0000 qpn=000011 psn=a1b2c3 mtu=1024 gid=00000000000000000000ffff0a000001 rkey=00001234 "
       "addr=0000000000001000 len=0000000000010040",
       "magic"},
      {encode(Endpoint{0, 1, 1, 1024, {}, 1, 0, 128}), "expected hello, got 'ep'"},
      {encode(Proof{}), "expected hello, got 'auth'"},
      {"GET / HTTP/1.1", "magic"},
  };
  for (const auto& c : bad_hellos) {
    INFO("hello: '" << c.line << "'");
    ServerHandshake s(k, nonce(0x22));
    auto r = s.on_hello(c.line);
    REQUIRE_FALSE(r.ok());
    auto f = r.fault();
    CHECK(f.reason == Reason::kAuthFailed);
    CHECK_THAT(f.message, Catch::Contains(c.needle));
  }
  ServerHandshake early(k, nonce(0x22));
  auto before = early.on_proof(encode(Proof{}));
  REQUIRE_FALSE(before.ok());
  CHECK_THAT(before.fault().message, Catch::Contains("before the hello"));
  ServerHandshake twice(k, nonce(0x22));
  REQUIRE(twice.on_hello(hello).ok());
  REQUIRE_FALSE(twice.on_hello(hello).ok());

  ClientHandshake c(k, nonce(0x11));
  auto cut = c.on_challenge("fa-rdma/2 challenge nonce=" + std::string(63, '2'));
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.fault().reason == Reason::kAuthFailed);
  ClientHandshake c2(k, nonce(0x11));
  REQUIRE_FALSE(c2.on_proof(encode(Proof{})).ok());  // a proof before any challenge
}

TEST_CASE("sealed records: bound to key, direction and sequence number", "[rdma][auth]") {
  const Key k = key_a();
  const SessionKey s = session_key(k, nonce(0x11), nonce(0x22));
  const std::string rec = encode(Plan{5000, 1000});
  const std::string line = seal(s, Direction::kToServer, 3, rec);
  REQUIRE(line.size() == 65 + rec.size());
  auto back = open(s, Direction::kToServer, 3, line);
  REQUIRE(back.ok());
  CHECK(*back == rec);

  auto fails = [&](const std::string& l, Direction d, uint64_t seq, const std::string& needle) {
    INFO("line: '" << l << "'");
    auto r = open(s, d, seq, l);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains(needle));
  };
  fails(line, Direction::kToServer, 4, "does not verify");  // replayed or reordered
  fails(line, Direction::kToClient, 3, "does not verify");  // reflected
  std::string tampered = line;
  tampered[tampered.size() - 1] = '1';  // iters=1001
  fails(tampered, Direction::kToServer, 3, "does not verify");
  std::string upper = line;
  for (size_t i = 0; i < 64; ++i) upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[i])));
  if (upper != line) fails(upper, Direction::kToServer, 3, "does not verify");
  fails(rec, Direction::kToServer, 3, "expected 64 hex digits");  // unsealed
  fails(line.substr(0, 64), Direction::kToServer, 3, "expected 64 hex digits");
  fails(line.substr(0, 64) + "x" + rec, Direction::kToServer, 3, "expected 64 hex digits");
  fails(line + std::string(kMaxLineBytes, 'a'), Direction::kToServer, 3, "longer than");
  const SessionKey other = session_key(k, nonce(0x11), nonce(0x23));
  auto foreign = open(other, Direction::kToServer, 3, line);
  REQUIRE_FALSE(foreign.ok());

  // The longest record there is still fits a sealed line.
  const std::string longest = encode(Failure{Reason::kCompletionError, std::string(kMaxFailureMessage, 'x')});
  CHECK(seal(s, Direction::kToClient, 0, longest).size() <= kMaxLineBytes);
  CHECK(longest.size() <= kMaxRecordBytes);
}
