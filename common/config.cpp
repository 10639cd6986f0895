// SPDX-License-Identifier: Apache-2.0
#include "common/config.hpp"

#include <arpa/inet.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <charconv>
#include <sys/stat.h>

#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "common/fs.hpp"

namespace fa {

const std::string_view kEmbeddedDefaultsYaml = R"(# fabric-agent configuration: every key with its default.
# Listen address, HOST:PORT or [V6]:PORT. Plain HTTP is only allowed on
# loopback unless allow_plain_http_on_non_loopback is true; use tls otherwise.
listen: 127.0.0.1:7471
allow_plain_http_on_non_loopback: false
tls:
  cert: ""          # PEM certificate chain; set with key to serve HTTPS
  key: ""           # PEM private key
  client_ca: ""     # PEM CA bundle; set to require client certificates it signed
# Bearer token file (mode 0600). Empty: <state_dir>/token, created on first run.
token_file: ""
provider_id: ""     # RoCE fabric identity is provider_id + IPv4 segment
overlay:
  cidr: 10.42.0.0/24
  interface: wg0
  listen_port: 51820
  mtu: 1420
  backend: auto     # auto | kernel | userspace
  public_address: ""  # WireGuard endpoint host for InfiniBand nodes
fabric:
  netdev: ""        # RoCE fabric netdev; empty: discovered
  hcas: []          # restrict to these HCAs, e.g. [mlx5_0, mlx5_1:1]
  lldpd_socket: ""  # lldpd's control socket for LLDP neighbours; empty: lldpd's default
api:
  max_connections: 512              # when full, the oldest connection without a token makes room
  max_unauthenticated_per_client: 32  # per client address (IPv6: per /64)
  read_timeout: 10s
  idle_timeout: 60s
  max_wait: 300s    # cap on GET /v1/status?wait=N
pods:
  socket: /run/fabric-agent/pods.sock  # where the OCI hooks register containers
  cdi_dir: /var/run/cdi                # CDI spec directory; "" = no spec written
  dev_root: /dev
  # Where to keep a copy of this agent (binary, fabric-agent-runtime, the
  # shared libraries and loader it runs with) for the CDI spec's hooks, which
  # the runtime runs on the host: for an agent in a container (the Kubernetes
  # DaemonSet), whose binary the host lacks; "" = the hooks run this binary.
  hook_dir: ""
nfd:                # node labels for Kubernetes (docs/kubernetes.md)
  # Node Feature Discovery's local feature file, rewritten at every discovery
  # pass while its directory exists (NFD's worker makes it); "" = never.
  feature_file: /etc/kubernetes/node-feature-discovery/features.d/fabric-agent
health:             # when a condition is raised (docs/health.md)
  flap_down: 25s            # a flap: a fabric port down this long, then up ...
  flap_count: 3             # ... this many times ...
  flap_window: 12h          # ... within this window
  carrier_losses: 5         # or this many losses of the link ...
  carrier_window: 24h       # ... within this window
  symbol_errors_per_hour: 120
  handshake_timeout: 180s   # a mesh peer silent this long is down
  hold: 5m                  # a cleared condition stays raised this long
state_dir: /var/lib/fabric-agent
sysfs_root: /sys
log_level: info     # trace | debug | info | warn | error | critical | off
refresh_interval: 30s
)";

namespace {

// Thrown inside the walker only; parse_config turns it into an Error.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Walker {
 public:
  // `origin`: the drop-in each overridden path (and what is under it) came
  // from; every other path is in `source`.
  explicit Walker(std::string source, std::map<std::string, std::string> origin = {})
      : source_(std::move(source)), origin_(std::move(origin)) {}

  // The file a value at `path` ("a.b", "a.b[2]") was read from.
  const std::string& file_of(const std::string& path) const {
    for (std::string p = path;;) {
      if (auto it = origin_.find(p); it != origin_.end()) return it->second;
      auto cut = p.find_last_of(".[");
      if (cut == std::string::npos) return source_;
      p.resize(cut);
    }
  }

  [[noreturn]] void fail(const YAML::Node& n, const std::string& path, const std::string& what) const {
    const YAML::Mark m = n.Mark();
    std::string where = file_of(path);
    if (!m.is_null()) where += ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
    throw ConfigError(where + ": " + (path.empty() ? "" : path + ": ") + what);
  }

  static std::string shown(const YAML::Node& n) {
    switch (n.Type()) {
      case YAML::NodeType::Scalar: return "'" + n.Scalar() + "'";
      case YAML::NodeType::Sequence: return "a list";
      case YAML::NodeType::Map: return "a mapping";
      case YAML::NodeType::Null: return "an empty value";
      default: return "an undefined value";
    }
  }

  std::string scalar(const YAML::Node& n, const std::string& path, const std::string& accepted) const {
    if (n.IsNull()) return "";
    if (!n.IsScalar()) fail(n, path, shown(n) + " is not accepted; accepted: " + accepted);
    return n.Scalar();
  }

  std::string str(const YAML::Node& n, const std::string& path) const { return scalar(n, path, "a string"); }

  bool boolean(const YAML::Node& n, const std::string& path) const {
    const std::string accepted = "true or false";
    std::string s = scalar(n, path, accepted);
    if (s == "true") return true;
    if (s == "false") return false;
    fail(n, path, "'" + s + "' is not accepted; accepted: " + accepted);
  }

  long integer(const YAML::Node& n, const std::string& path, long lo, long hi) const {
    const std::string accepted = "an integer " + std::to_string(lo) + ".." + std::to_string(hi);
    std::string s = scalar(n, path, accepted);
    long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size())
      fail(n, path, "'" + s + "' is not an integer; accepted: " + accepted);
    if (v < lo || v > hi) fail(n, path, "'" + s + "' is out of range; accepted: " + accepted);
    return v;
  }

  // "30s", "5m", "1h" or a bare number of seconds.
  std::chrono::seconds duration(const YAML::Node& n, const std::string& path, long lo_s, long hi_s) const {
    const std::string accepted = "a duration like 30s, 5m or 1h, " + std::to_string(lo_s) + "s.." +
                                 std::to_string(hi_s) + "s";
    std::string s = scalar(n, path, accepted);
    long mult = 1;
    std::string digits = s;
    if (!s.empty() && (s.back() == 's' || s.back() == 'm' || s.back() == 'h')) {
      mult = s.back() == 's' ? 1 : s.back() == 'm' ? 60 : 3600;
      digits.pop_back();
    }
    long v = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size())
      fail(n, path, "'" + s + "' is not a duration; accepted: " + accepted);
    if (v > hi_s || v * mult < lo_s || v * mult > hi_s)
      fail(n, path, "'" + s + "' is out of range; accepted: " + accepted);
    return std::chrono::seconds(v * mult);
  }

  std::string one_of(const YAML::Node& n, const std::string& path, std::initializer_list<const char*> options) const {
    std::string accepted;
    for (const char* o : options) accepted += (accepted.empty() ? "" : " | ") + std::string(o);
    std::string s = scalar(n, path, accepted);
    for (const char* o : options)
      if (s == o) return s;
    fail(n, path, "'" + s + "' is not accepted; accepted: " + accepted);
  }

  using Handler = std::function<void(const YAML::Node& value, const std::string& path)>;

  // Walks a mapping: every key must be known, none repeated.
  void mapping(const YAML::Node& n, const std::string& path, const std::vector<std::pair<std::string, Handler>>& keys) const {
    if (n.IsNull()) return;  // "tls:" with nothing under it: all defaults
    if (!n.IsMap()) fail(n, path, shown(n) + " is not accepted; accepted: a mapping of keys");
    std::set<std::string> seen;
    for (const auto& kv : n) {
      const YAML::Node& k = kv.first;
      if (!k.IsScalar()) fail(k, path, "a key must be a plain name, not " + shown(k));
      const std::string key = k.Scalar();
      const std::string full = path.empty() ? key : path + "." + key;
      if (!seen.insert(key).second) fail(k, full, "key given twice");
      const Handler* h = nullptr;
      for (const auto& [name, fn] : keys)
        if (name == key) h = &fn;
      if (!h) {
        std::string accepted;
        for (const auto& [name, fn] : keys) accepted += (accepted.empty() ? "" : ", ") + name;
        fail(k, full, "unknown key; accepted keys" + std::string(path.empty() ? "" : " under " + path) + ": " + accepted);
      }
      (*h)(kv.second, full);
    }
  }

 private:
  std::string source_;
  std::map<std::string, std::string> origin_;
};

bool valid_ifname(const std::string& s) {
  if (s.empty() || s.size() > 15) return false;  // IFNAMSIZ - 1
  for (char c : s)
    if (c == '/' || c == ':' || c == ' ' || c == '\t' || c == '\n' || static_cast<unsigned char>(c) < 0x21) return false;
  return s != "." && s != "..";
}

bool valid_ipv4_cidr(const std::string& s, int min_prefix, int max_prefix) {
  auto slash = s.find('/');
  if (slash == std::string::npos) return false;
  in_addr a{};
  if (inet_pton(AF_INET, s.substr(0, slash).c_str(), &a) != 1) return false;
  std::string p = s.substr(slash + 1);
  int v = -1;
  auto [e, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (p.empty() || ec != std::errc() || e != p.data() + p.size()) return false;
  if (v < min_prefix || v > max_prefix) return false;
  // The network address itself, not a host inside it: 10.42.0.0/24, not 10.42.0.7/24.
  uint32_t host = ntohl(a.s_addr);
  uint32_t mask = v == 0 ? 0 : ~uint32_t{0} << (32 - v);
  return (host & ~mask) == 0;
}

bool valid_hca(const std::string& s) {
  auto colon = s.find(':');
  std::string name = s.substr(0, colon);
  if (name.empty() || name.size() > 63) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  if (colon == std::string::npos) return true;
  std::string port = s.substr(colon + 1);
  int v = 0;
  auto [e, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
  return !port.empty() && ec == std::errc() && e == port.data() + port.size() && v >= 1 && v <= 255;
}

bool valid_provider_id(const std::string& s) {
  if (s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

Config walk(const YAML::Node& root, const Walker& w) {
  Config c;
  if (root.IsNull()) return c;
  auto path_value = [&](std::string& out) {
    return [&out, &w](const YAML::Node& v, const std::string& p) {
      out = w.str(v, p);
      if (!out.empty() && out.find('\0') != std::string::npos) w.fail(v, p, "path contains a NUL byte");
    };
  };
  w.mapping(
      root, "",
      {
          {"listen",
           [&](const YAML::Node& v, const std::string& p) {
             std::string s = w.scalar(v, p, "HOST:PORT or [IPV6]:PORT, e.g. 127.0.0.1:7471");
             auto hp = parse_host_port(s);
             if (!hp) w.fail(v, p, "'" + s + "' " + hp.error().message + "; accepted: HOST:PORT or [IPV6]:PORT, e.g. 127.0.0.1:7471");
             c.listen = s;
           }},
          {"allow_plain_http_on_non_loopback",
           [&](const YAML::Node& v, const std::string& p) { c.allow_plain_http_on_non_loopback = w.boolean(v, p); }},
          {"tls",
           [&](const YAML::Node& v, const std::string& p) {
             w.mapping(v, p,
                       {{"cert", path_value(c.tls.cert)},
                        {"key", path_value(c.tls.key)},
                        {"client_ca", path_value(c.tls.client_ca)}});
             if (c.tls.cert.empty() != c.tls.key.empty())
               w.fail(v, p, "cert and key go together; accepted: both set (HTTPS) or both empty (plain HTTP)");
             if (!c.tls.client_ca.empty() && c.tls.cert.empty())
               w.fail(v, p, "client_ca needs cert and key; accepted: client_ca only together with cert and key");
           }},
          {"token_file", path_value(c.token_file)},
          {"provider_id",
           [&](const YAML::Node& v, const std::string& p) {
             std::string s = w.str(v, p);
             if (!valid_provider_id(s))
               w.fail(v, p, "'" + s + "' is not accepted; accepted: up to 64 of A-Z a-z 0-9 . _ -");
             c.provider_id = s;
           }},
          {"overlay",
           [&](const YAML::Node& v, const std::string& p) {
             w.mapping(v, p,
                       {
                           {"cidr",
                            [&](const YAML::Node& x, const std::string& q) {
                              std::string s = w.str(x, q);
                              if (!valid_ipv4_cidr(s, 8, 30))
                                w.fail(x, q, "'" + s + "' is not accepted; accepted: an IPv4 network A.B.C.D/N, N 8..30, host bits zero");
                              c.overlay.cidr = s;
                            }},
                           {"interface",
                            [&](const YAML::Node& x, const std::string& q) {
                              std::string s = w.str(x, q);
                              if (!valid_ifname(s))
                                w.fail(x, q, "'" + s + "' is not accepted; accepted: an interface name of 1..15 characters without '/', ':' or spaces");
                              c.overlay.interface = s;
                            }},
                           {"listen_port",
                            [&](const YAML::Node& x, const std::string& q) {
                              c.overlay.listen_port = static_cast<uint16_t>(w.integer(x, q, 1, 65535));
                            }},
                           {"mtu", [&](const YAML::Node& x, const std::string& q) { c.overlay.mtu = static_cast<int>(w.integer(x, q, 1280, 9000)); }},
                           {"backend",
                            [&](const YAML::Node& x, const std::string& q) { c.overlay.backend = w.one_of(x, q, {"auto", "kernel", "userspace"}); }},
                           {"public_address",
                            [&](const YAML::Node& x, const std::string& q) {
                              std::string s = w.str(x, q);
                              in_addr a4{};
                              in6_addr a6{};
                              if (!s.empty() && inet_pton(AF_INET, s.c_str(), &a4) != 1 && inet_pton(AF_INET6, s.c_str(), &a6) != 1)
                                w.fail(x, q, "'" + s + "' is not accepted; accepted: an IPv4 or IPv6 address, or empty");
                              c.overlay.public_address = s;
                            }},
                       });
           }},
          {"fabric",
           [&](const YAML::Node& v, const std::string& p) {
             w.mapping(v, p,
                       {
                           {"netdev",
                            [&](const YAML::Node& x, const std::string& q) {
                              std::string s = w.str(x, q);
                              if (!s.empty() && !valid_ifname(s))
                                w.fail(x, q, "'" + s + "' is not accepted; accepted: an interface name of 1..15 characters, or empty");
                              c.fabric.netdev = s;
                            }},
                           {"hcas",
                            [&](const YAML::Node& x, const std::string& q) {
                              c.fabric.hcas.clear();
                              if (x.IsNull()) return;
                              if (!x.IsSequence())
                                w.fail(x, q, Walker::shown(x) + " is not accepted; accepted: a list of HCA names, e.g. [mlx5_0, mlx5_1:1]");
                              for (size_t i = 0; i < x.size(); ++i) {
                                const std::string qi = q + "[" + std::to_string(i) + "]";
                                std::string s = w.scalar(x[i], qi, "an HCA name, optionally :PORT, e.g. mlx5_0 or mlx5_0:1");
                                if (!valid_hca(s))
                                  w.fail(x[i], qi, "'" + s + "' is not accepted; accepted: an HCA name, optionally :PORT 1..255, e.g. mlx5_0 or mlx5_0:1");
                                c.fabric.hcas.push_back(s);
                              }
                            }},
                           {"lldpd_socket",
                            [&](const YAML::Node& x, const std::string& q) {
                              std::string s = w.str(x, q);
                              if (!s.empty() && (s.front() != '/' || s.size() >= 108))
                                w.fail(x, q, "'" + s + "' is not accepted; accepted: an absolute path shorter than 108 characters such as /run/lldpd.socket, or empty");
                              c.fabric.lldpd_socket = s;
                            }},
                       });
           }},
          {"api",
           [&](const YAML::Node& v, const std::string& p) {
             w.mapping(v, p,
                       {
                           {"max_connections",
                            [&](const YAML::Node& x, const std::string& q) { c.api.max_connections = static_cast<int>(w.integer(x, q, 1, 100000)); }},
                           {"max_unauthenticated_per_client",
                            [&](const YAML::Node& x, const std::string& q) {
                              c.api.max_unauthenticated_per_client = static_cast<int>(w.integer(x, q, 1, 100000));
                            }},
                           {"read_timeout", [&](const YAML::Node& x, const std::string& q) { c.api.read_timeout = w.duration(x, q, 1, 600); }},
                           {"idle_timeout", [&](const YAML::Node& x, const std::string& q) { c.api.idle_timeout = w.duration(x, q, 1, 3600); }},
                           {"max_wait", [&](const YAML::Node& x, const std::string& q) { c.api.max_wait = w.duration(x, q, 1, 300); }},
                       });
           }},
          {"pods",
           [&](const YAML::Node& v, const std::string& p) {
             w.mapping(v, p,
                       {
                           {"socket",
                            [&](const YAML::Node& x, const std::string& q) {
                              std::string s = w.str(x, q);
                              if (s.empty() || s[0] != '/' || s.size() >= 108)
                                w.fail(x, q, "'" + s + "' is not accepted; accepted: an absolute path shorter than 108 characters");
                              c.pods.socket = s;
                            }},
                           {"cdi_dir", path_value(c.pods.cdi_dir)},
                           {"dev_root",
                            [&](const YAML::Node& x, const std::string& q) {
                              std::string s = w.str(x, q);
                              if (s.empty()) w.fail(x, q, "empty; accepted: a directory path such as /dev");
                              c.pods.dev_root = s;
                            }},
                           {"hook_dir",
                            [&](const YAML::Node& x, const std::string& q) {
                              std::string s = w.str(x, q);
                              if (!s.empty() && (s[0] != '/' || s == "/" || s.find('\0') != std::string::npos))
                                w.fail(x, q, "'" + s + "' is not accepted; accepted: \"\" or an absolute directory path other than /");
                              c.pods.hook_dir = s;
                            }},
                       });
           }},
          {"nfd",
           [&](const YAML::Node& v, const std::string& p) {
             w.mapping(v, p,
                       {
                           {"feature_file",
                            [&](const YAML::Node& x, const std::string& q) {
                              std::string s = w.str(x, q);
                              const std::string accepted =
                                  "; accepted: an absolute path whose file name does not start with '.' (NFD skips dot "
                                  "files), e.g. /etc/kubernetes/node-feature-discovery/features.d/fabric-agent, or \"\" for none";
                              auto slash = s.rfind('/');
                              if (!s.empty() && (s[0] != '/' || slash + 1 >= s.size() || s[slash + 1] == '.' ||
                                                 s.find('\0') != std::string::npos))
                                w.fail(x, q, "'" + s + "' is not accepted" + accepted);
                              c.nfd.feature_file = s;
                            }},
                       });
           }},
          {"health",
           [&](const YAML::Node& v, const std::string& p) {
             w.mapping(v, p,
                       {
                           {"flap_down", [&](const YAML::Node& x, const std::string& q) { c.health.flap_down = w.duration(x, q, 1, 3600); }},
                           {"flap_count", [&](const YAML::Node& x, const std::string& q) { c.health.flap_count = static_cast<int>(w.integer(x, q, 1, 1000)); }},
                           {"flap_window", [&](const YAML::Node& x, const std::string& q) { c.health.flap_window = w.duration(x, q, 60, 30 * 86400); }},
                           {"carrier_losses", [&](const YAML::Node& x, const std::string& q) { c.health.carrier_losses = static_cast<int>(w.integer(x, q, 1, 1000)); }},
                           {"carrier_window", [&](const YAML::Node& x, const std::string& q) { c.health.carrier_window = w.duration(x, q, 60, 30 * 86400); }},
                           {"symbol_errors_per_hour", [&](const YAML::Node& x, const std::string& q) { c.health.symbol_errors_per_hour = static_cast<int>(w.integer(x, q, 1, 100000000)); }},
                           {"handshake_timeout", [&](const YAML::Node& x, const std::string& q) { c.health.handshake_timeout = w.duration(x, q, 30, 86400); }},
                           {"hold", [&](const YAML::Node& x, const std::string& q) { c.health.hold = w.duration(x, q, 0, 86400); }},
                       });
           }},
          {"state_dir",
           [&](const YAML::Node& v, const std::string& p) {
             std::string s = w.str(v, p);
             if (s.empty()) w.fail(v, p, "empty; accepted: a directory path");
             c.state_dir = s;
           }},
          {"sysfs_root",
           [&](const YAML::Node& v, const std::string& p) {
             std::string s = w.str(v, p);
             if (s.empty()) w.fail(v, p, "empty; accepted: a directory path such as /sys");
             c.sysfs_root = s;
           }},
          {"log_level",
           [&](const YAML::Node& v, const std::string& p) {
             c.log_level = w.one_of(v, p, {"trace", "debug", "info", "warn", "error", "critical", "off"});
           }},
          {"refresh_interval", [&](const YAML::Node& v, const std::string& p) { c.refresh_interval = w.duration(v, p, 1, 86400); }},
      });
  // Whole-document checks, after every key is read.
  if (!c.allow_plain_http_on_non_loopback && !c.tls.enabled()) {
    auto hp = parse_host_port(c.listen);
    if (hp && !is_loopback_host(hp->host))
      w.fail(root["listen"] ? root["listen"] : root, "listen",
             "'" + c.listen + "' is not loopback and tls is not set: plain HTTP would send the token in clear; "
             "accepted: a loopback address, tls.cert + tls.key, or allow_plain_http_on_non_loopback: true");
  }
  return c;
}

}  // namespace

Result<HostPort> parse_host_port(std::string_view s) {
  HostPort hp;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return Error{"is not [IPV6]:PORT"};
    hp.host = std::string(s.substr(1, close - 1));
    port = s.substr(close + 2);
    in6_addr a6{};
    if (inet_pton(AF_INET6, hp.host.c_str(), &a6) != 1) return Error{"has no valid IPv6 address in brackets"};
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos) return Error{"has no :PORT"};
    hp.host = std::string(s.substr(0, colon));
    port = s.substr(colon + 1);
    if (hp.host.find(':') != std::string::npos) return Error{"has an IPv6 address without brackets"};
    in_addr a4{};
    if (hp.host != "localhost" && inet_pton(AF_INET, hp.host.c_str(), &a4) != 1)
      return Error{"has no valid IPv4 address (or localhost)"};
  }
  int v = 0;
  auto [e, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (port.empty() || ec != std::errc() || e != port.data() + port.size() || v < 0 || v > 65535)
    return Error{"has no port 0..65535"};
  hp.port = static_cast<uint16_t>(v);
  return hp;
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  return false;
}

namespace {

std::string yaml_where(const std::string& source, const YAML::Mark& m) {
  return m.is_null() ? source : source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

// Lays `over` (a drop-in, from `file`) onto `base`: mappings merge key by
// key, anything else replaces; each replaced path is recorded in `origin`.
void merge_layer(YAML::Node base, const YAML::Node& over, const std::string& path, const std::string& file,
                 std::map<std::string, std::string>& origin) {
  std::set<std::string> seen;
  for (const auto& kv : over) {
    const YAML::Node& k = kv.first;
    if (!k.IsScalar())
      throw ConfigError(yaml_where(file, k.Mark()) + ": " + (path.empty() ? "" : path + ": ") +
                        "a key must be a plain name");
    const std::string key = k.Scalar();
    const std::string full = path.empty() ? key : path + "." + key;
    if (!seen.insert(key).second) throw ConfigError(yaml_where(file, k.Mark()) + ": " + full + ": key given twice");
    const YAML::Node& cbase = base;
    YAML::Node below = cbase[key];
    if (below.IsDefined() && below.IsMap() && kv.second.IsMap()) {
      merge_layer(below, kv.second, full, file, origin);
      continue;
    }
    if (below.IsDefined())
      base[key] = kv.second;
    else
      base.force_insert(kv.first, kv.second);  // the drop-in's key node, with its place for errors
    // What an earlier drop-in set at or under this path is replaced too.
    for (auto it = origin.lower_bound(full); it != origin.end() && it->first.rfind(full, 0) == 0;) {
      const char next = it->first.size() > full.size() ? it->first[full.size()] : '\0';
      if (next == '\0' || next == '.' || next == '[')
        it = origin.erase(it);
      else
        ++it;
    }
    origin[full] = file;
  }
}

Result<Config> parse_layers(const std::vector<ConfigLayer>& layers) {
  const std::string& main = layers.front().source;
  YAML::Node root;
  std::map<std::string, std::string> origin;
  try {
    for (size_t i = 0; i < layers.size(); ++i) {
      const ConfigLayer& l = layers[i];
      YAML::Node n;
      try {
        n = YAML::Load(l.text);
      } catch (const YAML::Exception& e) {
        return Error{yaml_where(l.source, e.mark) + ": not valid YAML: " + e.msg};
      }
      if (i == 0) {
        root = n;
        continue;
      }
      if (n.IsNull()) continue;  // an empty drop-in changes nothing
      if (!n.IsMap())
        return Error{yaml_where(l.source, n.Mark()) + ": " + Walker::shown(n) +
                     " is not accepted; accepted: a mapping of the config's keys (docs/operator.md)"};
      if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
      if (!root.IsMap()) break;  // the walk names the main file's problem
      merge_layer(root, n, "", l.source, origin);
    }
    Walker w(main, origin);
    Config c = walk(root, w);
    c.source = main;
    for (size_t i = 1; i < layers.size(); ++i) c.dropins.push_back(layers[i].source);
    return c;
  } catch (const ConfigError& e) {
    return Error{e.what()};
  } catch (const YAML::Exception& e) {
    return Error{main + ": " + e.what()};
  }
}

}  // namespace

Result<Config> parse_config(std::string_view yaml, const std::string& source_name) {
  return parse_layers({ConfigLayer{std::string(yaml), source_name}});
}

Result<Config> parse_config_layers(const std::vector<ConfigLayer>& layers) {
  if (layers.empty()) return parse_config("", "<embedded defaults>");
  return parse_layers(layers);
}

Result<std::vector<ConfigLayer>> read_dropins(const std::string& dir) {
  std::vector<ConfigLayer> out;
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0) {
    if (errno == ENOENT) return out;
    return Error{"config drop-in directory " + dir + ": " + std::strerror(errno), errno};
  }
  if (!S_ISDIR(ds.st_mode)) return Error{"config drop-in directory " + dir + ": not a directory"};
  // Whoever can write here configures a daemon that runs as root.
  auto unsafe = [](const struct stat& st) {
    return (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || (st.st_uid != 0 && st.st_uid != ::geteuid());
  };
  auto refusal = [](const std::string& what, const struct stat& st) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error{what + ": mode " + mode + ", owner uid " + std::to_string(st.st_uid) +
                 " is not accepted; accepted: owned by root and not writable by group or others (chmod go-w)"};
  };
  if (unsafe(ds)) return refusal("config drop-in directory " + dir, ds);
  auto all = list_dir(dir);
  if (!all) return Error{"config drop-in directory " + all.error().message, all.error().sys_errno};
  std::vector<std::string> names;  // sorted by list_dir
  for (const std::string& name : *all)
    // Dot files are editors' and Kubernetes' (..data); only *.yaml counts.
    if (name[0] != '.' && name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0) names.push_back(name);
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return Error{"config drop-in " + path + ": " + std::strerror(errno), errno};
    if (!S_ISREG(st.st_mode)) return Error{"config drop-in " + path + ": not a regular file"};
    if (unsafe(st)) return refusal("config drop-in " + path, st);
    auto text = read_text_file(path, 1 << 20);
    if (!text) return Error{"config drop-in " + text.error().message, text.error().sys_errno};
    out.push_back(ConfigLayer{std::move(*text), path});
  }
  return out;
}

Result<Config> load_config_file(const std::string& path) {
  auto text = read_text_file(path, 1 << 20);
  if (!text) return Error{"config " + text.error().message, text.error().sys_errno};
  auto more = read_dropins(path + ".d");
  if (!more) return more.take_error();
  std::vector<ConfigLayer> layers{ConfigLayer{std::move(*text), path}};
  for (auto& l : *more) layers.push_back(std::move(l));
  return parse_layers(layers);
}

Result<Config> load_config(const std::string& path_or_empty) {
  if (!path_or_empty.empty()) return load_config_file(path_or_empty);
  if (::access(kDefaultConfigPath, F_OK) == 0) return load_config_file(kDefaultConfigPath);
  auto more = read_dropins(std::string(kDefaultConfigPath) + ".d");
  if (!more) return more.take_error();
  std::vector<ConfigLayer> layers{ConfigLayer{std::string(kEmbeddedDefaultsYaml), "<embedded defaults>"}};
  for (auto& l : *more) layers.push_back(std::move(l));
  return parse_layers(layers);
}

}  // namespace fa
