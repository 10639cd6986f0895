// SPDX-License-Identifier: Apache-2.0
// overlay::apply() and apply_peers() called in-process, in a network
// namespace of the test's own (unshare), against wireguard-go.
#include <sched.h>
#include <stdlib.h>

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "overlay/overlay.hpp"
#include "tests/overlay/netns_helpers.hpp"

using namespace fa::overlay;
using fa_test::run;

namespace {

std::set<std::string> lines(const std::string& s) {
  std::set<std::string> out;
  size_t a = 0;
  for (size_t b; (b = s.find('\n', a)) != std::string::npos; a = b + 1)
    if (b > a) out.insert(s.substr(a, b - a));
  return out;
}

Key random_public_key() {
  auto k = generate_private_key();
  REQUIRE(k.ok());
  auto p = public_key_of(*k);
  REQUIRE(p.ok());
  return *p;
}

// A namespace of this process's own with loopback up; the interface's name
// is unique on the host (wireguard-go's sockets share /var/run/wireguard).
struct OwnNetns {
  std::string ifname = "fwa" + fa_test::tag();
  OwnNetns() {
    REQUIRE(::unshare(CLONE_NEWNET) == 0);
    REQUIRE(run("ip link set lo up").rc == 0);
  }
  ~OwnNetns() { (void)down(ifname); }
};

DesiredMesh mesh_of(const std::string& ifname, size_t peers) {
  DesiredMesh m;
  m.cluster_id = "c";
  m.interface = ifname;
  m.address = *IpPrefix::parse("10.42.0.1/24");
  for (size_t i = 0; i < peers; ++i) {
    DesiredPeer p;
    p.public_key = random_public_key();
    p.endpoint = *Endpoint::parse("192.0.2." + std::to_string(i + 2) + ":51820");
    p.allowed_ips = {*IpPrefix::parse("10.42.0." + std::to_string(i + 2) + "/32")};
    m.peers.push_back(p);
  }
  return m;
}

}  // namespace

std::string wg(const std::string& what) { return run("wg show " + what).out; }

TEST_CASE("apply_peers: sends only the changed peers without reading the device, and brings a lost interface back whole",
          "[netns]") {
  OwnNetns ns;
  ApplyOptions opt;
  opt.backend = Backend::Userspace;
  // The node's key in a file of mode 0600, as the daemon keeps it.
  char dir[] = "/tmp/fa-apply-peers-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string key_file = std::string(dir) + "/wg.key";
  auto priv = generate_private_key();
  REQUIRE(priv.ok());
  REQUIRE(run("umask 077; echo " + key_to_base64(*priv) + " > " + key_file).rc == 0);
  const Key own = *public_key_of(*priv);

  DesiredMesh m = mesh_of(ns.ifname, 3);
  m.private_key_file = key_file;
  auto r = apply(m, opt);
  REQUIRE(r.ok());
  CHECK(r->peers_added == 3);
  CHECK(r->public_key == own);

  PeerChanges c;
  c.cluster_id = m.cluster_id;
  DesiredPeer moved = m.peers[0];
  moved.endpoint = *Endpoint::parse("192.0.2.99:4000");
  DesiredPeer fresh = mesh_of(ns.ifname, 1).peers[0];
  fresh.allowed_ips = {*IpPrefix::parse("10.42.0.40/32")};
  c.peers = {moved, m.peers[1], fresh};  // peers[1] as it is: not sent
  c.remove = {m.peers[2].public_key};
  auto p = apply_peers(m, c, opt);
  REQUIRE(p.ok());
  CHECK(p->peers_added == 1);
  CHECK(p->peers_updated == 1);
  CHECK(p->peers_removed == 1);
  CHECK(p->device_changed);
  CHECK_FALSE(p->created);
  auto endpoints = lines(wg(ns.ifname + " endpoints"));
  CHECK(endpoints.count(key_to_base64(moved.public_key) + "\t192.0.2.99:4000") == 1);
  CHECK(lines(wg(ns.ifname + " peers")) ==
        std::set<std::string>{key_to_base64(m.peers[0].public_key), key_to_base64(m.peers[1].public_key),
                              key_to_base64(fresh.public_key)});
  CHECK(lines(wg(ns.ifname + " allowed-ips")).count(key_to_base64(fresh.public_key) + "\t10.42.0.40/32") == 1);

  auto after = with_changes(m, c);
  REQUIRE(after.ok());
  // The same change again: every peer already as asked, nothing sent.
  PeerChanges same;
  same.cluster_id = m.cluster_id;
  same.peers = {moved};
  auto again = apply_peers(*after.value, same, opt);
  REQUIRE(again.ok());
  CHECK_FALSE(again->device_changed);

  // A peer with the node's own key is refused, and nothing is sent.
  PeerChanges me;
  me.cluster_id = m.cluster_id;
  DesiredPeer self;
  self.public_key = own;
  self.allowed_ips = {*IpPrefix::parse("10.42.0.50/32")};
  me.peers = {self};
  auto refused = apply_peers(*after.value, me, opt);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("own public key"));
  CHECK(lines(wg(ns.ifname + " peers")).size() == 3);

  // The interface gone (a reboot, `ip link del`): the next change brings the
  // whole mesh back, with the change in it.
  REQUIRE(down(ns.ifname).ok());
  PeerChanges later;
  later.cluster_id = m.cluster_id;
  later.remove = {fresh.public_key};
  auto back = apply_peers(*after.value, later, opt);
  REQUIRE(back.ok());
  CHECK(back->created);
  CHECK(back->peers_added == 2);
  CHECK(lines(wg(ns.ifname + " peers")) ==
        std::set<std::string>{key_to_base64(m.peers[0].public_key), key_to_base64(m.peers[1].public_key)});
  run(std::string("rm -rf ") + dir);
}
