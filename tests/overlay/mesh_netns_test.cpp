// SPDX-License-Identifier: Apache-2.0
// The mesh over real interfaces: three network namespaces on a bridge (the
// underlay exists only inside them), `fabric-agent mesh apply` in each with
// the userspace backend (wireguard-go; the host kernel has no WireGuard), and
// the real wireguard-tools `wg` as the independent observer.
#include <signal.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "tests/overlay/netns_helpers.hpp"

using namespace fa_test;
using nlohmann::json;

namespace {

// A command's one line of output, without its newline.
std::string line_of(std::string out) {
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

struct Mesh {
  std::string t = tag();
  std::string bns = "fab" + t;
  std::vector<std::string> ns, ifn;
  std::string dir;
  std::vector<std::string> pub;

  explicit Mesh(int n) {
    char tmpl[] = "/tmp/fa-mesh-test.XXXXXX";
    dir = ::mkdtemp(tmpl);
    run("ip netns add " + bns + " && ip -n " + bns + " link add br0 type bridge && ip -n " + bns +
        " link set br0 up");
    for (int i = 0; i < n; ++i) {
      std::string s = std::to_string(i + 1);
      ns.push_back("fan" + t + "-" + s);
      // /var/run/wireguard is shared by all namespaces: names must differ.
      ifn.push_back("fw" + t + "n" + s);
      run("ip netns add " + ns[i] + " && ip -n " + ns[i] + " link set lo up && ip -n " + bns + " link add v" +
          s + " type veth peer name eth0 netns " + ns[i] + " && ip -n " + bns + " link set v" + s +
          " master br0 up && ip -n " + ns[i] + " addr add 192.168.77." + s + "/24 dev eth0 && ip -n " +
          ns[i] + " link set eth0 up");
    }
    pub.resize(n);
  }
  ~Mesh() {
    for (size_t i = 0; i < ns.size(); ++i)
      run("ip netns exec " + ns[i] + " " + agent() + " mesh down --interface " + ifn[i] + " >/dev/null 2>&1");
    for (auto& n : ns) run("ip netns del " + n + " 2>/dev/null");
    run("ip netns del " + bns + " 2>/dev/null");
    run("rm -rf '" + dir + "'");
  }

  json doc(size_t i, bool with_peers) const {
    json d = {{"cluster_id", "test-" + t},
              {"interface", ifn[i]},
              {"address", "10.42.0." + std::to_string(i + 1) + "/24"},
              {"peers", json::array()}};
    if (with_peers)
      for (size_t j = 0; j < ns.size(); ++j)
        if (j != i)
          d["peers"].push_back({{"public_key", pub[j]},
                                {"endpoint", "192.168.77." + std::to_string(j + 1) + ":51820"},
                                {"allowed_ips", {"10.42.0." + std::to_string(j + 1) + "/32"}}});
    return d;
  }

  // debug_log: run with FA_LOG_LEVEL=debug and hand back what it logged.
  json apply(size_t i, const json& d, std::string* debug_log = nullptr) const {
    std::string f = dir + "/n" + std::to_string(i) + ".json";
    write_file(f, d.dump(2));
    auto o = run("ip netns exec " + ns[i] + (debug_log ? " env FA_LOG_LEVEL=debug " : " ") + agent() +
                 " mesh apply --backend userspace --json --file " + f + " 2>" + dir + "/err.log");
    std::string log = read_file(dir + "/err.log");
    INFO("apply on " << ns[i] << " rc=" << o.rc << "\n" << o.out << "\n" << log);
    REQUIRE(o.rc == 0);
    if (debug_log) *debug_log = std::move(log);
    return json::parse(o.out);
  }

  bool ping(size_t from, size_t to) const {
    return run("ip netns exec " + ns[from] + " ping -n -q -c 2 -i 0.2 -W 2 10.42.0." +
               std::to_string(to + 1) + " >/dev/null 2>&1")
               .rc == 0;
  }

  std::string wg_pid(size_t i) const { return run("pgrep -x -f 'wireguard-go -f " + ifn[i] + "'").out; }

  // Every node up with its generated key, then each given the others; node 0
  // reaches both.
  void connect() {
    for (size_t i = 0; i < ns.size(); ++i) pub[i] = apply(i, doc(i, false))["public_key"].get<std::string>();
    for (size_t i = 0; i < ns.size(); ++i) apply(i, doc(i, true));
    REQUIRE(ping(0, 1));
    REQUIRE(ping(0, 2));
  }
};

}  // namespace

TEST_CASE("three namespaces: apply, ping, wg show, endpoint change, no-op, kill -9 + adopt", "[netns]") {
  Mesh m(3);
  // First pass without peers: each node generates its key; the public keys
  // are then exchanged as a control plane would.
  for (size_t i = 0; i < 3; ++i) {
    json r = m.apply(i, m.doc(i, false));
    CHECK(r["backend"] == "userspace");
    CHECK(r["changes"]["created"] == true);
    m.pub[i] = r["public_key"].get<std::string>();
    CHECK(r.dump().find("private") == std::string::npos);
  }
  for (size_t i = 0; i < 3; ++i) {
    json r = m.apply(i, m.doc(i, true));
    CHECK(r["changes"]["created"] == false);  // adopted
    CHECK(r["changes"]["peers_added"] == 2);
    CHECK(r["public_key"] == m.pub[i]);  // generated key read back from the live interface
    CHECK(r["address"] == "10.42.0." + std::to_string(i + 1) + "/24");
  }

  SECTION("every pair pings over the overlay and wg lists exactly our peers") {
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < 3; ++j)
        if (i != j) {
          INFO(i << " -> " << j);
          CHECK(m.ping(i, j));
        }
    for (size_t i = 0; i < 3; ++i) {
      std::set<std::string> want, got;
      for (size_t j = 0; j < 3; ++j)
        if (j != i) want.insert(m.pub[j]);
      for (auto& [k, v] : wg_map(m.ns[i], m.ifn[i], "peers")) got.insert(k);
      CHECK(got == want);
      auto ips = wg_map(m.ns[i], m.ifn[i], "allowed-ips");
      for (size_t j = 0; j < 3; ++j)
        if (j != i) CHECK(ips[m.pub[j]] == "10.42.0." + std::to_string(j + 1) + "/32");
    }
  }

  SECTION("changing one endpoint leaves the other session alone; identical re-apply is a no-op") {
    REQUIRE(m.ping(0, 1));
    REQUIRE(m.ping(0, 2));
    auto before = wg_map(m.ns[0], m.ifn[0], "latest-handshakes");
    REQUIRE(before[m.pub[1]] != "0");
    // Handshake times have one-second resolution: a reset would show.
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    run("ip -n " + m.ns[2] + " addr add 192.168.77.13/24 dev eth0");
    json d = m.doc(0, true);
    d["peers"][1]["endpoint"] = "192.168.77.13:51820";
    json r = m.apply(0, d);
    CHECK(r["changes"]["peers_updated"] == 1);
    CHECK(r["changes"]["peers_added"] == 0);
    CHECK(r["changes"]["peers_removed"] == 0);
    CHECK(wg_map(m.ns[0], m.ifn[0], "endpoints")[m.pub[2]] == "192.168.77.13:51820");
    CHECK(m.ping(0, 1));
    CHECK(m.ping(0, 2));
    auto after = wg_map(m.ns[0], m.ifn[0], "latest-handshakes");
    CHECK(after[m.pub[1]] == before[m.pub[1]]);

    std::string pid = m.wg_pid(0);
    json again = m.apply(0, d);
    CHECK(again["changes"]["device_changed"] == false);
    CHECK(again["changes"]["link_changed"] == false);
    CHECK(again["changes"]["created"] == false);
    CHECK(m.wg_pid(0) == pid);
    CHECK(wg_map(m.ns[0], m.ifn[0], "latest-handshakes") == after);
  }

  SECTION("kill -9 of the agent and a new apply lose no packet") {
    REQUIRE(m.ping(0, 1));
    std::string pid = m.wg_pid(0);
    REQUIRE_FALSE(pid.empty());
    std::string f = m.dir + "/n0.json";
    write_file(f, m.doc(0, true).dump());
    // 150 pings at 20 ms while the agent is killed mid-apply and re-run.
    std::string pinglog = m.dir + "/ping.log";
    std::thread pinger([&] {
      run("ip netns exec " + m.ns[0] + " ping -n -q -c 150 -i 0.02 -W 1 10.42.0.2 >" + pinglog + " 2>&1");
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int delay_ms : {0, 5, 20}) {
      // The agent runs in its own process group, killed as a whole with
      // SIGKILL: wireguard-go (own session) must not care.
      auto o = run("ip netns exec " + m.ns[0] + " setsid sh -c '" + agent() + " mesh apply --file " + f +
                   " >/dev/null 2>&1 & echo $!'");
      pid_t apid = static_cast<pid_t>(std::stol(o.out));
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      ::kill(apid, SIGKILL);
    }
    json r = m.apply(0, m.doc(0, true));
    CHECK(r["changes"]["created"] == false);
    CHECK(r["changes"]["device_changed"] == false);
    pinger.join();
    std::string log = read_file(pinglog);
    INFO(log);
    CHECK(log.find("150 packets transmitted, 150 received") != std::string::npos);
    CHECK(m.wg_pid(0) == pid);
    CHECK(m.ping(0, 2));
  }
}

TEST_CASE("peer removal and addition touch only those peers", "[netns]") {
  Mesh m(3);
  m.connect();
  auto before = wg_map(m.ns[0], m.ifn[0], "latest-handshakes");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  json d = m.doc(0, true);
  json third = d["peers"][1];
  d["peers"].erase(1);
  json r = m.apply(0, d);
  CHECK(r["changes"]["peers_removed"] == 1);
  CHECK(r["peers"].size() == 1);
  CHECK(wg_map(m.ns[0], m.ifn[0], "peers").count(m.pub[2]) == 0);
  CHECK_FALSE(m.ping(0, 2));
  d["peers"].push_back(third);
  r = m.apply(0, d);
  CHECK(r["changes"]["peers_added"] == 1);
  CHECK(m.ping(0, 2));
  CHECK(m.ping(0, 1));
  CHECK(wg_map(m.ns[0], m.ifn[0], "latest-handshakes")[m.pub[1]] == before[m.pub[1]]);
}

TEST_CASE("a peer set with no current peer in it replaces the list in one step, and back", "[netns]") {
  Mesh m(3);
  m.connect();
  // Node 0 handed to another cluster: two other peers, none of the old.
  json other = m.doc(0, false);
  std::map<std::string, std::string> want_ips, want_eps;
  for (int k = 0; k < 2; ++k) {
    std::string key = line_of(run("wg genkey | wg pubkey").out);
    REQUIRE(key.size() == 44);
    std::string ip = "10.42.0." + std::to_string(20 + k) + "/32";
    std::string ep = "192.168.77." + std::to_string(20 + k) + ":51820";
    other["peers"].push_back({{"public_key", key}, {"endpoint", ep}, {"allowed_ips", {ip}}});
    want_ips[key] = ip;
    want_eps[key] = ep;
  }
  auto apply_debug = [&](const json& d) {
    std::string log;
    json r = m.apply(0, d, &log);
    return std::make_pair(std::move(r), std::move(log));
  };
  auto [r, log] = apply_debug(other);
  CHECK(log.find("no current peer stays: the peer list is replaced in one step (2 go)") != std::string::npos);
  CHECK(r["changes"]["peers_removed"] == 2);
  CHECK(r["changes"]["peers_added"] == 2);
  CHECK(r["peers"].size() == 2);
  CHECK(wg_map(m.ns[0], m.ifn[0], "allowed-ips") == want_ips);
  CHECK(wg_map(m.ns[0], m.ifn[0], "endpoints") == want_eps);
  CHECK_FALSE(m.ping(0, 1));
  // Back to the first cluster: replaced again, and the sessions come back.
  std::tie(r, log) = apply_debug(m.doc(0, true));
  CHECK(log.find("the peer list is replaced in one step (2 go)") != std::string::npos);
  CHECK(r["changes"]["peers_removed"] == 2);
  CHECK(r["changes"]["peers_added"] == 2);
  std::set<std::string> got, want{m.pub[1], m.pub[2]};
  for (auto& [k, v] : wg_map(m.ns[0], m.ifn[0], "peers")) got.insert(k);
  CHECK(got == want);
  CHECK(m.ping(0, 1));
  CHECK(m.ping(0, 2));
  // One peer stays: removed one by one, the staying peer's session kept
  // (handshake times have one-second resolution: a reset would show).
  auto before = wg_map(m.ns[0], m.ifn[0], "latest-handshakes");
  REQUIRE(before[m.pub[1]] != "0");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  json one = m.doc(0, true);
  one["peers"].erase(1);
  one["peers"].push_back(other["peers"][0]);
  std::tie(r, log) = apply_debug(one);
  CHECK(log.find("replaced in one step") == std::string::npos);
  CHECK(r["changes"]["peers_removed"] == 1);
  CHECK(r["changes"]["peers_added"] == 1);
  CHECK(m.ping(0, 1));
  CHECK(wg_map(m.ns[0], m.ifn[0], "latest-handshakes")[m.pub[1]] == before[m.pub[1]]);
  // A new private key with a new peer list (replace_peers goes before the
  // key in the request): the key and exactly the new peers land.
  std::string key_file = m.dir + "/node0.key";
  run("umask 077 && wg genkey > " + key_file);
  std::string new_pub = line_of(run("wg pubkey < " + key_file).out);
  REQUIRE(new_pub.size() == 44);
  // Node 0 holds node 1 and the first other peer: node 2 and the second
  // other peer keep neither.
  json rekeyed = m.doc(0, false);
  rekeyed["private_key_file"] = key_file;
  rekeyed["peers"] = {m.doc(0, true)["peers"][1], other["peers"][1]};
  std::tie(r, log) = apply_debug(rekeyed);
  CHECK(log.find("the peer list is replaced in one step (2 go)") != std::string::npos);
  CHECK(r["changes"]["peers_removed"] == 2);
  CHECK(r["changes"]["peers_added"] == 2);
  CHECK(r["public_key"] == new_pub);
  CHECK(run("ip netns exec " + m.ns[0] + " wg show " + m.ifn[0] + " public-key").out == new_pub + "\n");
  std::map<std::string, std::string> rekeyed_ips;
  for (const auto& p : rekeyed["peers"])
    rekeyed_ips[p["public_key"].get<std::string>()] = p["allowed_ips"][0].get<std::string>();
  CHECK(wg_map(m.ns[0], m.ifn[0], "allowed-ips") == rekeyed_ips);
  // Emptied: the flag alone.
  std::tie(r, log) = apply_debug(m.doc(0, false));
  CHECK(log.find("the peer list is replaced in one step (2 go)") != std::string::npos);
  CHECK(r["changes"]["peers_removed"] == 2);
  CHECK(wg_map(m.ns[0], m.ifn[0], "peers").empty());
}

TEST_CASE("netns: born in the underlay namespace, moved into the pod's, socket stays behind", "[netns]") {
  Mesh m(2);
  std::string pod = "fap" + m.t;
  run("ip netns add " + pod + " && ip -n " + pod + " link set lo up");
  struct PodGuard {
    std::string n;
    ~PodGuard() { run("ip netns del " + n + " 2>/dev/null"); }
  } pg{pod};
  for (size_t i = 0; i < 2; ++i) {
    json d = m.doc(i, false);
    if (i == 0) d["netns"] = pod;
    m.pub[i] = m.apply(i, d)["public_key"].get<std::string>();
  }
  json d0 = m.doc(0, true);
  d0["netns"] = pod;
  json r = m.apply(0, d0);
  CHECK(r["changes"]["created"] == false);
  CHECK(r["changes"]["peers_added"] == 1);
  m.apply(1, m.doc(1, true));
  // The interface lives in the pod namespace, its UDP socket in the birthplace.
  CHECK(run("ip -n " + pod + " link show " + m.ifn[0]).rc == 0);
  CHECK(run("ip -n " + m.ns[0] + " link show " + m.ifn[0] + " 2>/dev/null").rc != 0);
  CHECK(run("ip netns exec " + m.ns[0] + " ss -Hulpn 'sport = :51820'").out.find("wireguard-go") !=
        std::string::npos);
  CHECK(run("ip netns exec " + pod + " ss -Hulpn 'sport = :51820'").out.empty());
  CHECK(run("ip netns exec " + pod + " ping -n -q -c 2 -i 0.2 -W 2 10.42.0.2 >/dev/null 2>&1").rc == 0);
  CHECK(m.ping(1, 0));
  auto shown = run("ip netns exec " + m.ns[0] + " " + agent() + " mesh show --json --interface " + m.ifn[0] +
                   " --netns " + pod + " 2>/dev/null");
  REQUIRE(shown.rc == 0);
  CHECK(json::parse(shown.out)["peers"].size() == 1);
  CHECK(run("ip netns exec " + m.ns[0] + " " + agent() + " mesh down --interface " + m.ifn[0] + " --netns " +
            pod + " 2>/dev/null")
            .rc == 0);
  CHECK(run("ip -n " + pod + " link show " + m.ifn[0] + " 2>/dev/null").rc != 0);
  CHECK(m.wg_pid(0).empty());
}

TEST_CASE("invalid file: named field, nothing touched", "[netns]") {
  Mesh m(1);
  json d = m.doc(0, false);
  d["peers"] = {{{"public_key", "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="},
                 {"endpoint", "nope"},
                 {"allowed_ips", {"10.42.0.2/32"}}}};
  std::string f = m.dir + "/bad.json";
  write_file(f, d.dump());
  auto o = run("ip netns exec " + m.ns[0] + " " + agent() + " mesh apply --file " + f + " 2>&1");
  CHECK(o.rc == 2);
  CHECK_THAT(o.out, Catch::Contains("peers[0].endpoint: `nope': expected IPv4:port or [IPv6]:port"));
  CHECK(run("ip -n " + m.ns[0] + " link show " + m.ifn[0] + " 2>/dev/null").rc != 0);
}

// Without --json, `mesh apply` prints one line: whether it created or
// adopted the interface, which backend and why, the counts.
TEST_CASE("mesh apply's summary line: created, then adopted, with the counts", "[netns]") {
  Mesh m(1);
  const std::string f = m.dir + "/s.json";
  auto apply_line = [&](const json& want) {
    write_file(f, want.dump());
    auto o = run("ip netns exec " + m.ns[0] + " " + agent() + " mesh apply --backend userspace --file " + f);
    INFO(o.out);
    REQUIRE(o.rc == 0);
    return o.out;
  };
  json d = m.doc(0, false);
  CHECK_THAT(apply_line(d),
             Catch::Matches(m.ifn[0] + ": backend userspace \\(userspace backend requested\\); "
                                       "created; peers \\+0 -0 ~0; [0-9]+\\.[0-9][0-9] ms\n"));
  const std::string head =
      m.ifn[0] +
      ": backend userspace \\(existing interface served by wireguard-go \\(pid [0-9]+\\) adopted\\); ";
  d["peers"].push_back({{"public_key", "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="},
                        {"endpoint", "192.168.77.9:51820"},
                        {"allowed_ips", {"10.42.0.9/32"}}});
  CHECK_THAT(apply_line(d), Catch::Matches(head + "adopted; peers \\+1 -0 ~0; [0-9]+\\.[0-9][0-9] ms\n"));
  d["peers"][0]["endpoint"] = "192.168.77.8:51820";
  CHECK_THAT(apply_line(d), Catch::Matches(head + "adopted; peers \\+0 -0 ~1; [0-9]+\\.[0-9][0-9] ms\n"));
  d["peers"] = json::array();
  CHECK_THAT(apply_line(d), Catch::Matches(head + "adopted; peers \\+0 -1 ~0; [0-9]+\\.[0-9][0-9] ms\n"));
}

TEST_CASE("a peer with the node's own public key is refused, in both output modes, nothing touched",
          "[netns]") {
  Mesh m(2);
  for (size_t i = 0; i < 2; ++i) m.pub[i] = m.apply(i, m.doc(i, false))["public_key"].get<std::string>();
  json d = m.doc(0, true);  // peer: node 1
  m.apply(0, d);
  auto before = run("ip netns exec " + m.ns[0] + " wg show " + m.ifn[0] + " dump").out;
  d["peers"].push_back(
      {{"public_key", m.pub[0]}, {"endpoint", "192.168.77.9:51820"}, {"allowed_ips", {"10.42.0.9/32"}}});
  std::string f = m.dir + "/self.json";
  write_file(f, d.dump());
  for (const char* mode : {"", " --json"}) {
    auto o = run("ip netns exec " + m.ns[0] + " " + agent() + " mesh apply --backend userspace" + mode +
                 " --file " + f + " 2>&1");
    INFO("mode '" << mode << "': " << o.out);
    CHECK(o.rc == 1);
    CHECK_THAT(o.out,
               Catch::Contains("peers[1].public_key: `" + m.pub[0] + "': this is the node's own public key"));
  }
  auto after = run("ip netns exec " + m.ns[0] + " wg show " + m.ifn[0] + " dump").out;
  // dump lines carry handshake times and counters, which may move; compare the peer keys.
  auto keys = [](const std::string& dump) {
    std::set<std::string> k;
    std::istringstream in(dump);
    std::string line;
    std::getline(in, line);  // the interface line
    while (std::getline(in, line)) k.insert(line.substr(0, line.find('\t')));
    return k;
  };
  CHECK(keys(after) == keys(before));
  CHECK(keys(after) == std::set<std::string>{m.pub[1]});
  // A change of an existing peer still lands.
  d = m.doc(0, true);
  d["peers"][0]["endpoint"] = "192.168.77.2:51821";
  write_file(f, d.dump());
  auto o = run("ip netns exec " + m.ns[0] + " " + agent() + " mesh apply --backend userspace --file " + f +
               " 2>&1");
  CHECK(o.rc == 0);
  CHECK_THAT(o.out, Catch::Contains("; peers +0 -0 ~1; "));
}

TEST_CASE("a private key changed behind the agent's back: the own-key check and show use the new one",
          "[netns]") {
  Mesh m(2);
  for (size_t i = 0; i < 2; ++i) m.pub[i] = m.apply(i, m.doc(i, false))["public_key"].get<std::string>();
  std::string f = m.dir + "/k.json", err = m.dir + "/k.err";
  REQUIRE(run("wg genkey >" + m.dir + "/k2 && ip netns exec " + m.ns[0] + " wg set " + m.ifn[0] +
              " private-key " + m.dir + "/k2")
              .rc == 0);
  std::string new_pub =
      run("ip netns exec " + m.ns[0] + " wg show " + m.ifn[0] + " public-key | tr -d '\\n'").out;
  REQUIRE(new_pub != m.pub[0]);
  json d = m.doc(0, true);
  d["peers"].push_back(
      {{"public_key", new_pub}, {"endpoint", "192.168.77.9:51820"}, {"allowed_ips", {"10.42.0.9/32"}}});
  write_file(f, d.dump());
  auto o = run("ip netns exec " + m.ns[0] + " " + agent() + " mesh apply --backend userspace --file " + f + " 2>" +
               err);
  INFO(read_file(err));
  CHECK(o.rc == 1);
  CHECK_THAT(read_file(err),
             Catch::Contains("peers[1].public_key: `" + new_pub + "': this is the node's own"));
  auto shown = run("ip netns exec " + m.ns[0] + " " + agent() + " mesh show --json --interface " + m.ifn[0]);
  REQUIRE(shown.rc == 0);
  CHECK(json::parse(shown.out)["public_key"] == new_pub);
}

TEST_CASE("wireguard-go outlives a SIGKILLed agent process group, and mesh down stops it", "[netns]") {
  Mesh m(1);
  std::string f = m.dir + "/n0.json";
  write_file(f, m.doc(0, false).dump());
  // The agent and a shell that outlives it share one new process group; the
  // whole group is then killed with SIGKILL, as a supervisor would.
  auto o = run("ip netns exec " + m.ns[0] + " setsid sh -c '" + agent() + " mesh apply --file " + f + " >" +
               m.dir + "/a.log 2>&1; sleep 60' >/dev/null 2>&1 & echo $!");
  pid_t leader = static_cast<pid_t>(std::stol(o.out));
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    up = read_file(m.dir + "/a.log").find("created") != std::string::npos;
  }
  REQUIRE(up);
  std::string pid = m.wg_pid(0);
  REQUIRE_FALSE(pid.empty());
  (void)leader;  // setsid may have forked: find the shell by its command line
  auto sh = run("pgrep -f \"^sh -c " + agent() + " mesh apply --file " + f + "\"").out;
  REQUIRE_FALSE(sh.empty());
  pid_t pgid = ::getpgid(static_cast<pid_t>(std::stol(sh)));
  REQUIRE(pgid > 1);
  REQUIRE(pgid != ::getpgrp());
  CHECK(::kill(-pgid, SIGKILL) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(run("pgrep -f \"^sh -c " + agent() + " mesh apply --file " + f + "\"").out.empty());
  CHECK(m.wg_pid(0) == pid);
  CHECK(run("ip netns exec " + m.ns[0] + " wg show " + m.ifn[0] + " public-key").rc == 0);
  CHECK(
      run("ip netns exec " + m.ns[0] + " " + agent() + " mesh down --interface " + m.ifn[0] + " 2>/dev/null")
          .rc == 0);
  CHECK(m.wg_pid(0).empty());
  CHECK(run("ip -n " + m.ns[0] + " link show " + m.ifn[0] + " 2>/dev/null").rc != 0);
}

TEST_CASE("a wireguard-go someone else started is reused, not restarted", "[netns]") {
  Mesh m(1);
  // Started by hand (daemonizing, as an operator would), not by the agent.
  REQUIRE(run("ip netns exec " + m.ns[0] + " wireguard-go " + m.ifn[0] + " >/dev/null 2>&1").rc == 0);
  std::string pid;
  for (int i = 0; i < 100 && pid.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (run("ip netns exec " + m.ns[0] + " wg show " + m.ifn[0] + " >/dev/null 2>&1").rc == 0)
      pid = run("pgrep -f 'wireguard-go " + m.ifn[0] + "$'").out;
  }
  REQUIRE_FALSE(pid.empty());
  json r = m.apply(0, m.doc(0, false));
  CHECK(r["changes"]["created"] == false);
  CHECK(r["backend"] == "userspace");
  CHECK_THAT(r["changes"]["backend_reason"].get<std::string>(), Catch::Contains("adopted"));
  CHECK(run("pgrep -f 'wireguard-go " + m.ifn[0] + "$'").out == pid);
  CHECK(r["public_key"].is_string());  // a key was generated into the adopted device
  CHECK(run("ip netns exec " + m.ns[0] + " ping -c 1 -W 1 10.42.0.1 >/dev/null 2>&1").rc == 0);
  // down removes the interface; the process it did not start is not signalled
  // by the agent (wireguard-go exits on its own once its tun is gone).
  CHECK(
      run("ip netns exec " + m.ns[0] + " " + agent() + " mesh down --interface " + m.ifn[0] + " 2>/dev/null")
          .rc == 0);
  CHECK(run("ip -n " + m.ns[0] + " link show " + m.ifn[0] + " 2>/dev/null").rc != 0);
  // Ours to end in the test only: the very pid started above, if still there.
  pid_t p = static_cast<pid_t>(std::stol(pid));
  for (int i = 0; i < 100 && ::kill(p, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (::kill(p, 0) == 0) ::kill(p, SIGTERM);
}
