// SPDX-License-Identifier: Apache-2.0
// overlay::apply() called in-process, in a network namespace of the test's
// own (unshare), against wireguard-go: what ApplyOptions::while_waiting
// promises its caller (the daemon makes its status text there).
#include <sched.h>

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

TEST_CASE("apply: while_waiting runs once per apply, after validation, also when nothing changes",
          "[netns]") {
  OwnNetns ns;
  ApplyOptions opt;
  opt.backend = Backend::Userspace;
  opt.report = false;
  int calls = 0;
  std::set<std::string> seen;  // the device's peers when the work ran
  opt.while_waiting = [&] {
    ++calls;
    seen = lines(run("wg show " + ns.ifname + " peers 2>/dev/null").out);
  };

  DesiredMesh m = mesh_of(ns.ifname, 3);
  auto r = apply(m, opt);
  REQUIRE(r.ok());
  CHECK(calls == 1);
  CHECK((*r)["changes"]["peers_added"] == 3);

  // Nothing to send: the work still runs, once; the device is as applied.
  auto again = apply(m, opt);
  REQUIRE(again.ok());
  CHECK((*again)["changes"]["device_changed"] == false);
  CHECK(calls == 2);
  std::set<std::string> want;
  for (const auto& p : m.peers) want.insert(key_to_base64(p.public_key));
  CHECK(seen == want);

  // Refused before anything is sent (a peer with the node's own key): the
  // work does not run.
  DesiredMesh own = m;
  DesiredPeer me;
  auto pub = run("wg show " + ns.ifname + " public-key").out;
  while (!pub.empty() && pub.back() == '\n') pub.pop_back();
  auto k = key_from_base64(pub);
  REQUIRE(k.ok());
  me.public_key = *k;
  me.allowed_ips = {*IpPrefix::parse("10.42.0.9/32")};
  own.peers.push_back(me);
  auto refused = apply(own, opt);
  CHECK_FALSE(refused.ok());
  CHECK(calls == 2);
  CHECK(lines(run("wg show " + ns.ifname + " peers").out) == want);
}
