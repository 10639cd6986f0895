// SPDX-License-Identifier: Apache-2.0
// One test per error class of the config loader: each must name
// file:line:column, the key, the value as written and the accepted form.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/config.hpp"

using fa::Config;
using fa::parse_config;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {
std::string err(const std::string& yaml) {
  auto r = parse_config(yaml, "agent.yaml");
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}
}  // namespace

TEST_CASE("embedded defaults parse to the built-in defaults", "[config]") {
  auto r = parse_config(fa::kEmbeddedDefaultsYaml, "<embedded defaults>");
  REQUIRE(r.ok());
  CHECK(*r == Config{});
  CHECK(r->listen == "127.0.0.1:7471");
  CHECK(r->effective_token_file() == "/var/lib/fabric-agent/token");
}

TEST_CASE("an empty document gives the defaults", "[config]") {
  auto r = parse_config("", "agent.yaml");
  REQUIRE(r.ok());
  Config want;
  want.source = "agent.yaml";
  CHECK(*r == want);
}

TEST_CASE("every key is read", "[config]") {
  auto r = parse_config(R"(
listen: "[::1]:9000"
tls: {cert: /c.pem, key: /k.pem, client_ca: /ca.pem}
token_file: /etc/fabric-agent/token
provider_id: prov-1
overlay: {cidr: 10.50.0.0/16, interface: wg7, listen_port: 51000, mtu: 1380, backend: userspace, public_address: 192.0.2.4}
fabric: {netdev: ens1f0, hcas: [mlx5_0, "mlx5_1:1"], lldpd_socket: /run/lldpd-fabric.socket}
api: {max_connections: 7, read_timeout: 2s, idle_timeout: 1m, max_wait: 5}
state_dir: /tmp/st
sysfs_root: /fixtures/sys
log_level: debug
refresh_interval: 5m
nfd: {feature_file: /run/nfd/features.d/agent}
)",
                        "a.yaml");
  REQUIRE(r.ok());
  CHECK(r->listen == "[::1]:9000");
  CHECK(r->tls.enabled());
  CHECK(r->tls.mutual());
  CHECK(r->token_file == "/etc/fabric-agent/token");
  CHECK(r->provider_id == "prov-1");
  CHECK(r->overlay.cidr == "10.50.0.0/16");
  CHECK(r->overlay.interface == "wg7");
  CHECK(r->overlay.listen_port == 51000);
  CHECK(r->overlay.mtu == 1380);
  CHECK(r->overlay.backend == "userspace");
  CHECK(r->overlay.public_address == "192.0.2.4");
  CHECK(r->fabric.netdev == "ens1f0");
  CHECK(r->fabric.hcas == std::vector<std::string>{"mlx5_0", "mlx5_1:1"});
  CHECK(r->fabric.lldpd_socket == "/run/lldpd-fabric.socket");
  CHECK(r->api.max_connections == 7);
  CHECK(r->api.read_timeout == std::chrono::seconds(2));
  CHECK(r->api.idle_timeout == std::chrono::seconds(60));
  CHECK(r->api.max_wait == std::chrono::seconds(5));
  CHECK(r->state_dir == "/tmp/st");
  CHECK(r->sysfs_root == "/fixtures/sys");
  CHECK(r->log_level == "debug");
  CHECK(r->refresh_interval == std::chrono::seconds(300));
  CHECK(r->nfd.feature_file == "/run/nfd/features.d/agent");
}

TEST_CASE("nfd.feature_file: on by default at NFD's directory, empty turns it off", "[config]") {
  CHECK(Config{}.nfd.feature_file == "/etc/kubernetes/node-feature-discovery/features.d/fabric-agent");
  auto r = parse_config("nfd: {feature_file: \"\"}\n", "a.yaml");
  REQUIRE(r.ok());
  CHECK(r->nfd.feature_file.empty());
}

TEST_CASE("config error: YAML syntax", "[config]") {
  CHECK(err("listen: [unclosed\n") == "agent.yaml:2:1: not valid YAML: end of sequence flow not found");
  CHECK_THAT(err("a: b\n c: d\n"), StartsWith("agent.yaml:2:3: not valid YAML"));
}

TEST_CASE("config error: unknown key, top level and nested", "[config]") {
  CHECK_THAT(err("log_level: info\nlisten_addr: 1.2.3.4:5\n"),
             StartsWith("agent.yaml:2:1: listen_addr: unknown key; accepted keys: listen, allow_plain_http_on_non_loopback, tls,"));
  CHECK_THAT(err("overlay:\n  mtu: 1400\n  iface: wg0\n"),
             StartsWith("agent.yaml:3:3: overlay.iface: unknown key; accepted keys under overlay: cidr, interface,"));
}

TEST_CASE("config error: key given twice", "[config]") {
  CHECK(err("log_level: info\nlog_level: debug\n") == "agent.yaml:2:1: log_level: key given twice");
}

TEST_CASE("config error: wrong shape", "[config]") {
  CHECK(err("- a\n- b\n") == "agent.yaml:1:1: a list is not accepted; accepted: a mapping of keys");
  CHECK(err("tls: yes\n") == "agent.yaml:1:6: tls: 'yes' is not accepted; accepted: a mapping of keys");
  CHECK(err("listen: {a: 1}\n") ==
        "agent.yaml:1:9: listen: a mapping is not accepted; accepted: HOST:PORT or [IPV6]:PORT, e.g. 127.0.0.1:7471");
  CHECK(err("fabric:\n  hcas: mlx5_0\n") ==
        "agent.yaml:2:9: fabric.hcas: 'mlx5_0' is not accepted; accepted: a list of HCA names, e.g. [mlx5_0, mlx5_1:1]");
}

TEST_CASE("config error: integer not a number or out of range", "[config]") {
  CHECK(err("overlay:\n  mtu: 70000\n") ==
        "agent.yaml:2:8: overlay.mtu: '70000' is out of range; accepted: an integer 1280..9000");
  CHECK(err("overlay:\n  listen_port: 51820x\n") ==
        "agent.yaml:2:16: overlay.listen_port: '51820x' is not an integer; accepted: an integer 1..65535");
  CHECK(err("overlay:\n  listen_port: 0\n") ==
        "agent.yaml:2:16: overlay.listen_port: '0' is out of range; accepted: an integer 1..65535");
}

TEST_CASE("config error: enumerations and booleans", "[config]") {
  CHECK(err("log_level: verbose\n") ==
        "agent.yaml:1:12: log_level: 'verbose' is not accepted; accepted: trace | debug | info | warn | error | critical | off");
  CHECK(err("overlay: {backend: kernl}\n") ==
        "agent.yaml:1:20: overlay.backend: 'kernl' is not accepted; accepted: auto | kernel | userspace");
  CHECK(err("allow_plain_http_on_non_loopback: yes\n") ==
        "agent.yaml:1:35: allow_plain_http_on_non_loopback: 'yes' is not accepted; accepted: true or false");
}

TEST_CASE("config error: durations", "[config]") {
  CHECK(err("refresh_interval: 30x\n") ==
        "agent.yaml:1:19: refresh_interval: '30x' is not a duration; accepted: a duration like 30s, 5m or 1h, 1s..86400s");
  CHECK(err("api:\n  max_wait: 10m\n") ==
        "agent.yaml:2:13: api.max_wait: '10m' is out of range; accepted: a duration like 30s, 5m or 1h, 1s..300s");
  CHECK(err("refresh_interval: 0\n") ==
        "agent.yaml:1:19: refresh_interval: '0' is out of range; accepted: a duration like 30s, 5m or 1h, 1s..86400s");
}

TEST_CASE("config error: addresses, names and lists", "[config]") {
  CHECK(err("listen: 127.0.0.1\n") ==
        "agent.yaml:1:9: listen: '127.0.0.1' has no :PORT; accepted: HOST:PORT or [IPV6]:PORT, e.g. 127.0.0.1:7471");
  CHECK(err("listen: 300.0.0.1:80\n") ==
        "agent.yaml:1:9: listen: '300.0.0.1:80' has no valid IPv4 address (or localhost); accepted: HOST:PORT or [IPV6]:PORT, e.g. 127.0.0.1:7471");
  CHECK(err("overlay: {cidr: 10.42.0.1/24}\n") ==
        "agent.yaml:1:17: overlay.cidr: '10.42.0.1/24' is not accepted; accepted: an IPv4 network A.B.C.D/N, N 8..30, host bits zero");
  CHECK(err("overlay: {interface: wg0/x}\n") ==
        "agent.yaml:1:22: overlay.interface: 'wg0/x' is not accepted; accepted: an interface name of 1..15 characters without '/', ':' or spaces");
  CHECK(err("fabric:\n  hcas: [mlx5_0, 'mlx5 1']\n") ==
        "agent.yaml:2:18: fabric.hcas[1]: 'mlx5 1' is not accepted; accepted: an HCA name, optionally :PORT 1..255, e.g. mlx5_0 or mlx5_0:1");
  CHECK(err("fabric:\n  lldpd_socket: run/lldpd.socket\n") ==
        "agent.yaml:2:17: fabric.lldpd_socket: 'run/lldpd.socket' is not accepted; accepted: an absolute path shorter "
        "than 108 characters such as /run/lldpd.socket, or empty");
  const std::string nfd_accepted =
      "; accepted: an absolute path whose file name does not start with '.' (NFD skips dot files), e.g. "
      "/etc/kubernetes/node-feature-discovery/features.d/fabric-agent, or \"\" for none";
  CHECK(err("nfd:\n  feature_file: features.d/fabric-agent\n") ==
        "agent.yaml:2:17: nfd.feature_file: 'features.d/fabric-agent' is not accepted" + nfd_accepted);
  CHECK(err("nfd:\n  feature_file: /etc/kubernetes/node-feature-discovery/features.d/.fabric-agent\n") ==
        "agent.yaml:2:17: nfd.feature_file: '/etc/kubernetes/node-feature-discovery/features.d/.fabric-agent' is not "
        "accepted" + nfd_accepted);
  CHECK(err("nfd:\n  feature_file: /etc/kubernetes/node-feature-discovery/features.d/\n") ==
        "agent.yaml:2:17: nfd.feature_file: '/etc/kubernetes/node-feature-discovery/features.d/' is not accepted" +
            nfd_accepted);
  CHECK(err("provider_id: 'a b'\n") ==
        "agent.yaml:1:14: provider_id: 'a b' is not accepted; accepted: up to 64 of A-Z a-z 0-9 . _ -");
}

TEST_CASE("config error: keys that only go together", "[config]") {
  CHECK(err("tls:\n  cert: /c.pem\n") ==
        "agent.yaml:2:3: tls: cert and key go together; accepted: both set (HTTPS) or both empty (plain HTTP)");
}

TEST_CASE("config error: plain HTTP on a non-loopback address", "[config]") {
  CHECK_THAT(err("listen: 0.0.0.0:7471\n"),
             StartsWith("agent.yaml:1:9: listen: '0.0.0.0:7471' is not loopback and tls is not set"));
  CHECK_THAT(err("listen: 0.0.0.0:7471\n"), Contains("allow_plain_http_on_non_loopback: true"));
  CHECK(parse_config("listen: 0.0.0.0:7471\nallow_plain_http_on_non_loopback: true\n", "a").ok());
  CHECK(parse_config("listen: 0.0.0.0:7471\ntls: {cert: /c, key: /k}\n", "a").ok());
  CHECK(parse_config("listen: localhost:7471\n", "a").ok());
  CHECK(parse_config("listen: 127.0.0.2:1\n", "a").ok());
}

TEST_CASE("config files: missing file named, file name in errors", "[config]") {
  auto missing = fa::load_config_file("/nonexistent/agent.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "config open /nonexistent/agent.yaml: No such file or directory");

  char tmpl[] = "/tmp/fa-config-test-XXXXXX";
  int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(tmpl) << "overlay:\n  mtu: 1\n";
  auto bad = fa::load_config(tmpl);
  unlink(tmpl);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == std::string(tmpl) + ":2:8: overlay.mtu: '1' is out of range; accepted: an integer 1280..9000");
}
