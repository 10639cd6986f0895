// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "overlay/internal.hpp"

using namespace fa::overlay;

namespace {
const char* kPriv = "e84b5a6d2717c1003a13b431570353dbaca9146cf150c5f8575680feba52027a";
const char* kPeer1 = "b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33";
const char* kPeer2 = "58402e695ba1772b1cc9309755f043251ea77fdcf10fbe63989ceb7e19321376";
Key hex(const char* s) { return *key_from_hex(s); }
}  // namespace

TEST_CASE("UAPI get reply parses into the device model", "[uapi]") {
  std::string reply = std::string("private_key=") + kPriv +
                      "\nlisten_port=12912\n"
                      "public_key=" +
                      kPeer1 +
                      "\npreshared_key=0000000000000000000000000000000000000000000000000000000000000000\n"
                      "protocol_version=1\n"
                      "endpoint=[abcd:23::33%2]:51820\n"
                      "last_handshake_time_sec=1700000000\nlast_handshake_time_nsec=5\n"
                      "tx_bytes=38333\nrx_bytes=2224\npersistent_keepalive_interval=25\n"
                      "allowed_ip=192.168.4.4/32\n"
                      "public_key=" +
                      kPeer2 +
                      "\nendpoint=182.122.22.19:3233\npersistent_keepalive_interval=0\n"
                      "allowed_ip=192.168.4.6/32\nallowed_ip=10.0.0.0/8\n"
                      "errno=0\n\n";
  // The scope id of a link-local endpoint is not part of our model.
  auto d = uapi_parse_get(reply);
  REQUIRE(d.ok());
  CHECK(key_to_hex(*d->private_key) == kPriv);
  // UAPI carries no device public key: the parser derives it, as the
  // kernel reports it.
  REQUIRE(d->public_key);
  CHECK(*d->public_key == *public_key_of(*d->private_key));
  CHECK(d->listen_port == 12912);
  REQUIRE(d->peers.size() == 2);
  CHECK(key_to_hex(d->peers[0].public_key) == kPeer1);
  CHECK(d->peers[0].endpoint->str() == "[abcd:23::33]:51820");
  CHECK(d->peers[0].last_handshake_sec == 1700000000);
  CHECK(d->peers[0].tx_bytes == 38333);
  CHECK(d->peers[0].rx_bytes == 2224);
  CHECK(d->peers[0].persistent_keepalive == 25);
  REQUIRE(d->peers[1].allowed_ips.size() == 2);
  CHECK(d->peers[1].allowed_ips[1].str() == "10.0.0.0/8");
  CHECK(d->peers[1].persistent_keepalive == 0);
}

TEST_CASE("UAPI get reply: errors and malformed lines are refused", "[uapi]") {
  CHECK_FALSE(uapi_parse_get("errno=2\n\n").ok());
  CHECK(uapi_parse_get("errno=2\n\n").error().sys_errno == 2);
  CHECK_FALSE(uapi_parse_get("listen_port=51820\n\n").ok());  // no errno line
  CHECK_FALSE(uapi_parse_get("listen_port=70000\nerrno=0\n\n").ok());
  CHECK_FALSE(uapi_parse_get("listen_port=12x\nerrno=0\n\n").ok());
  CHECK_FALSE(uapi_parse_get("private_key=abcd\nerrno=0\n\n").ok());
  CHECK_FALSE(uapi_parse_get("endpoint=1.2.3.4:5\nerrno=0\n\n").ok());  // peer key before public_key
  CHECK_FALSE(uapi_parse_get("bogus\nerrno=0\n\n").ok());
  CHECK_FALSE(uapi_parse_get("listen_port=1\nerrno=0").ok());
  auto empty = uapi_parse_get("errno=0\n\n");
  REQUIRE(empty.ok());
  CHECK(empty->peers.empty());
  CHECK_FALSE(empty->private_key);
}

TEST_CASE("UAPI set request carries exactly the change set", "[uapi]") {
  Device ch;
  ch.name = "wg0";
  ch.private_key = hex(kPriv);
  ch.listen_port = 51820;
  Peer add;
  add.public_key = hex(kPeer1);
  add.endpoint = *Endpoint::parse("192.0.2.1:51820");
  add.allowed_ips = {*IpPrefix::parse("10.42.0.2/32"), *IpPrefix::parse("10.42.0.129/25")};
  add.persistent_keepalive = 25;
  add.replace_allowed_ips = true;
  Peer rm;
  rm.public_key = hex(kPeer2);
  rm.remove = true;
  rm.allowed_ips = {*IpPrefix::parse("10.42.0.3/32")};  // ignored for a removal
  Peer up;
  up.public_key = hex(kPeer2);
  up.update_only = true;
  up.endpoint = *Endpoint::parse("[2001:db8::1]:7");
  ch.peers = {add, rm, up};
  CHECK(uapi_set_request(ch) ==
        std::string("set=1\nprivate_key=") + kPriv + "\nlisten_port=51820\npublic_key=" + kPeer1 +
            "\nendpoint=192.0.2.1:51820\npersistent_keepalive_interval=25\n"
            "replace_allowed_ips=true\nallowed_ip=10.42.0.2/32\nallowed_ip=10.42.0.128/25\n"
            "public_key=" +
            kPeer2 + "\nremove=true\npublic_key=" + kPeer2 +
            "\nupdate_only=true\nendpoint=[2001:db8::1]:7\n\n");
  CHECK(uapi_set_request(Device{}) == "set=1\n\n");
  CHECK(uapi_parse_set_reply("errno=0\n\n").ok());
  auto e = uapi_parse_set_reply("errno=22\n\n");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().sys_errno == 22);
  CHECK_FALSE(uapi_parse_set_reply("hello\n\n").ok());
}

TEST_CASE("UAPI set request stays within the size reserved for it", "[uapi]") {
  // uapi_set_request reserves 160 + sum(212 + 55 * allowed IPs) bytes so that
  // the buffer holding the private key never moves; the longest lines of
  // every kind must fit that bound.
  Device ch;
  ch.private_key = hex(kPriv);
  ch.listen_port = 65535;
  ch.fwmark = 4294967295u;
  ch.replace_peers = true;
  for (int i = 0; i < 50; ++i) {
    Peer p;
    p.public_key = hex(i % 2 ? kPeer1 : kPeer2);
    p.update_only = true;
    p.replace_allowed_ips = true;
    p.persistent_keepalive = 65535;
    p.endpoint = *Endpoint::parse("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
    for (int j = 0; j < i % 7; ++j) {
      auto a = IpPrefix::parse("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff" + std::to_string(10 + j) + "/128");
      REQUIRE(a.ok());
      p.allowed_ips.push_back(*a);
    }
    ch.peers.push_back(p);
  }
  Peer gone;
  gone.public_key = hex(kPeer1);
  gone.remove = true;
  ch.peers.push_back(gone);
  size_t bound = 160;
  for (const auto& p : ch.peers) bound += 212 + 55 * p.allowed_ips.size();
  std::string req = uapi_set_request(ch);
  CHECK(req.size() <= bound);
  CHECK(req.capacity() == bound);
  // replace_peers before the key: wireguard-go then derives nothing for
  // peers it is about to drop.
  CHECK(req.rfind("set=1\nreplace_peers=true\nprivate_key=", 0) == 0);
  ch.replace_peers = false;
  CHECK(uapi_set_request(ch).rfind("set=1\nprivate_key=", 0) == 0);
}
