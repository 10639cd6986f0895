// SPDX-License-Identifier: Apache-2.0
// One test per error class of the config loader: each must name
// file:line:column, the key, the value as written and the accepted form.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

TEST_CASE("pods.hook_dir: none by default, an absolute directory when set", "[config]") {
  CHECK(Config{}.pods.hook_dir.empty());
  auto r = parse_config("pods: {hook_dir: /var/lib/fabric-agent/hook}\n", "a.yaml");
  REQUIRE(r.ok());
  CHECK(r->pods.hook_dir == "/var/lib/fabric-agent/hook");
  const std::string accepted = " is not accepted; accepted: \"\" or an absolute directory path other than /";
  CHECK(err("pods:\n  hook_dir: hook\n") == "agent.yaml:2:13: pods.hook_dir: 'hook'" + accepted);
  CHECK(err("pods:\n  hook_dir: /\n") == "agent.yaml:2:13: pods.hook_dir: '/'" + accepted);
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

namespace {
// A config file and its drop-in directory under a fresh temporary directory.
struct ConfigDir {
  std::string dir;
  ConfigDir() {
    char tmpl[] = "/tmp/fa-config-dropins-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    REQUIRE(::mkdir((dir + "/agent.yaml.d").c_str(), 0755) == 0);
  }
  ~ConfigDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string main() const { return dir + "/agent.yaml"; }
  std::string dropin(const std::string& name) const { return dir + "/agent.yaml.d/" + name; }
  void write(const std::string& path, const std::string& text, mode_t mode = 0644) const {
    std::ofstream(path) << text;
    REQUIRE(::chmod(path.c_str(), mode) == 0);
  }
};
}  // namespace

TEST_CASE("config drop-ins: agent.yaml.d/*.yaml laid over the file in name order, mappings merged key by key",
          "[config][dropins]") {
  ConfigDir d;
  d.write(d.main(), "provider_id: from-main\noverlay:\n  interface: wg5\n  mtu: 1400\nfabric:\n  hcas: [mlx5_0, mlx5_1]\n");
  // 20- after 10-: its provider_id wins; overlay merges (mtu from main, interface from 10-).
  d.write(d.dropin("20-fleet.yaml"), "provider_id: from-20\nfabric:\n  hcas: [mlx5_4]\n");
  d.write(d.dropin("10-site.yaml"), "provider_id: from-10\noverlay:\n  interface: wg9\n");
  // Not drop-ins: other suffixes, dot files (editors' and Kubernetes' ..data), an empty one changes nothing.
  d.write(d.dropin("30-notes.txt"), "provider_id: from-txt\n");
  d.write(d.dropin(".40-hidden.yaml"), "provider_id: from-hidden\n");
  d.write(d.dropin("50-empty.yaml"), "");
  auto r = fa::load_config_file(d.main());
  REQUIRE(r.ok());
  CHECK(r->provider_id == "from-20");
  CHECK(r->overlay.interface == "wg9");
  CHECK(r->overlay.mtu == 1400);
  CHECK(r->fabric.hcas == std::vector<std::string>{"mlx5_4"});  // a list replaces, it is not appended to
  CHECK(r->source == d.main());
  CHECK(r->dropins == std::vector<std::string>{d.dropin("10-site.yaml"), d.dropin("20-fleet.yaml"), d.dropin("50-empty.yaml")});
  CHECK(r->sources() == d.main() + " + " + d.dropin("10-site.yaml") + ", " + d.dropin("20-fleet.yaml") + ", " +
                            d.dropin("50-empty.yaml"));

  // No directory: the file alone.
  std::filesystem::remove_all(d.dir + "/agent.yaml.d");
  auto alone = fa::load_config_file(d.main());
  REQUIRE(alone.ok());
  CHECK(alone->provider_id == "from-main");
  CHECK(alone->dropins.empty());
}

TEST_CASE("config drop-ins: an error names the drop-in, its line and the key, and the whole config is refused",
          "[config][dropins]") {
  ConfigDir d;
  d.write(d.main(), "overlay:\n  mtu: 1400\n");
  d.write(d.dropin("10-a.yaml"), "refresh_interval: 10s\noverlay:\n  mtu: 1\n");
  auto bad = fa::load_config_file(d.main());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message ==
        d.dropin("10-a.yaml") + ":3:8: overlay.mtu: '1' is out of range; accepted: an integer 1280..9000");

  // A later drop-in that replaces the value takes the blame with it.
  d.write(d.dropin("10-a.yaml"), "overlay:\n  mtu: 1500\n");
  d.write(d.dropin("20-b.yaml"), "\n\noverlay: {mtu: 99999}\n");
  bad = fa::load_config_file(d.main());
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, StartsWith(d.dropin("20-b.yaml") + ":3:"));
  CHECK_THAT(bad.error().message, Contains("overlay.mtu: '99999' is out of range"));

  // A value from the main file is still blamed on it.
  ::unlink(d.dropin("20-b.yaml").c_str());
  d.write(d.main(), "overlay:\n  mtu: 1400\n  interface: 'a b'\n");
  bad = fa::load_config_file(d.main());
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, StartsWith(d.main() + ":3:14: overlay.interface: 'a b' is not accepted"));
  d.write(d.main(), "overlay:\n  mtu: 1400\n");

  // Unknown keys, a document that is not a mapping, broken YAML, a key twice.
  d.write(d.dropin("20-b.yaml"), "overlay:\n  mtuu: 1\n");
  CHECK_THAT(fa::load_config_file(d.main()).error().message,
             StartsWith(d.dropin("20-b.yaml") + ":2:3: overlay.mtuu: unknown key; accepted keys under overlay: "));
  d.write(d.dropin("20-b.yaml"), "- provider_id: x\n");
  CHECK(fa::load_config_file(d.main()).error().message ==
        d.dropin("20-b.yaml") + ":1:1: a list is not accepted; accepted: a mapping of the config's keys (docs/operator.md)");
  d.write(d.dropin("20-b.yaml"), "overlay: [\n");
  CHECK_THAT(fa::load_config_file(d.main()).error().message, StartsWith(d.dropin("20-b.yaml") + ":1:1: not valid YAML: "));
  d.write(d.dropin("20-b.yaml"), "provider_id: a\nprovider_id: b\n");
  CHECK(fa::load_config_file(d.main()).error().message == d.dropin("20-b.yaml") + ":2:1: provider_id: key given twice");
  // A plain-HTTP listen address that is not loopback, set by a drop-in.
  d.write(d.dropin("20-b.yaml"), "listen: 0.0.0.0:7471\n");
  CHECK_THAT(fa::load_config_file(d.main()).error().message, StartsWith(d.dropin("20-b.yaml") + ":1:9: listen: '0.0.0.0:7471' is not loopback"));
}

TEST_CASE("config drop-ins: a directory or file others can write is refused, naming it, its mode and what is accepted",
          "[config][dropins]") {
  ConfigDir d;
  d.write(d.main(), "provider_id: p\n");
  d.write(d.dropin("10-a.yaml"), "provider_id: q\n", 0666);
  auto bad = fa::load_config_file(d.main());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "config drop-in " + d.dropin("10-a.yaml") +
                                   ": mode 0666, owner uid " + std::to_string(::geteuid()) +
                                   " is not accepted; accepted: owned by root and not writable by group or others "
                                   "(chmod go-w)");
  REQUIRE(::chmod(d.dropin("10-a.yaml").c_str(), 0644) == 0);
  REQUIRE(::chmod((d.dir + "/agent.yaml.d").c_str(), 0777) == 0);
  bad = fa::load_config_file(d.main());
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, StartsWith("config drop-in directory " + d.dir + "/agent.yaml.d: mode 0777"));
  REQUIRE(::chmod((d.dir + "/agent.yaml.d").c_str(), 0755) == 0);
  // A directory named like a drop-in, and a symlink to a file (Kubernetes'
  // ConfigMap volumes are symlinks into ..data): the first is refused, the
  // second followed.
  REQUIRE(::mkdir(d.dropin("20-dir.yaml").c_str(), 0755) == 0);
  CHECK(fa::load_config_file(d.main()).error().message == "config drop-in " + d.dropin("20-dir.yaml") + ": not a regular file");
  REQUIRE(::rmdir(d.dropin("20-dir.yaml").c_str()) == 0);
  REQUIRE(::mkdir((d.dir + "/agent.yaml.d/..data").c_str(), 0755) == 0);
  d.write(d.dir + "/agent.yaml.d/..data/20-k8s.yaml", "provider_id: from-configmap\n");
  REQUIRE(::symlink("..data/20-k8s.yaml", d.dropin("20-k8s.yaml").c_str()) == 0);
  auto ok = fa::load_config_file(d.main());
  REQUIRE(ok.ok());
  CHECK(ok->provider_id == "from-configmap");
}
