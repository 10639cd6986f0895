// SPDX-License-Identifier: Apache-2.0
// The agent's configuration: one YAML file (default /etc/fabric-agent/agent.yaml)
// over embedded defaults, so `fabric-agent run` with no file serves on loopback.
//
// Parsing follows systemd-networkd: parse -> verify the whole document -> use.
// Every error names file:line:column, the key path, the value as written and
// the accepted form, e.g.
//   agent.yaml:7:8: overlay.mtu: 70000 is out of range; accepted: an integer 1280..9000
// An unknown key is an error too (a typo must not silently fall back to a default).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace fa {

inline constexpr const char* kDefaultConfigPath = "/etc/fabric-agent/agent.yaml";

struct TlsConfig {
  std::string cert;       // PEM server certificate (chain); empty: plain HTTP
  std::string key;        // PEM private key for cert
  std::string client_ca;  // PEM CA bundle; set: clients must present a cert it signed
  bool enabled() const { return !cert.empty(); }
  bool mutual() const { return !client_ca.empty(); }
  bool operator==(const TlsConfig&) const = default;
};

struct OverlayConfig {
  std::string cidr = "10.42.0.0/24";  // node i gets host i+1 of this network
  std::string interface = "wg0";
  uint16_t listen_port = 51820;
  int mtu = 1420;
  std::string backend = "auto";  // auto | kernel | userspace
  // Address peers reach this node's WireGuard port at when the fabric has no
  // IP of its own (InfiniBand): the host's public address. Empty: RoCE nodes
  // use their fabric address.
  std::string public_address;
  bool operator==(const OverlayConfig&) const = default;
};

struct FabricConfig {
  std::string netdev;             // RoCE: the fabric netdev; empty: discovered
  std::vector<std::string> hcas;  // restrict to these HCAs ("mlx5_0" or "mlx5_0:1"); empty: all
  std::string lldpd_socket;       // lldpd's control socket; empty: /run/lldpd.socket
  bool operator==(const FabricConfig&) const = default;
};

// Where the daemon meets container runtimes (pods/): the hooks' unix socket
// and the CDI spec directory. Tests point them into a temp dir.
struct PodsConfig {
  std::string socket = "/run/fabric-agent/pods.sock";
  std::string cdi_dir = "/var/run/cdi";  // empty: no CDI spec is written
  std::string dev_root = "/dev";         // device nodes the CDI spec names
  std::string hook_dir;                  // "": the hooks run this binary; else a copy of it kept there for the host
  bool operator==(const PodsConfig&) const = default;
};

// Node labels for Kubernetes: the Node Feature Discovery local feature file
// the daemon rewrites at every discovery pass (agent/nfd.hpp). Written only
// while its directory exists; empty: never.
struct NfdConfig {
  std::string feature_file = "/etc/kubernetes/node-feature-discovery/features.d/fabric-agent";
  bool operator==(const NfdConfig&) const = default;
};

// Bounds on the HTTP API, against slow or greedy clients.
struct ApiConfig {
  int max_connections = 512;
  // Connections from one client address (an IPv6 /64) that have not yet
  // sent an authenticated request; more are closed at accept.
  int max_unauthenticated_per_client = 32;
  std::chrono::seconds read_timeout{10};   // whole request (headers + body) must arrive within this
  std::chrono::seconds idle_timeout{60};   // keep-alive connection with no request
  std::chrono::seconds max_wait{300};      // cap on GET /v1/status?wait=N
  bool operator==(const ApiConfig&) const = default;
};

// When a fabric port, a link or a peer counts as unhealthy (docs/health.md).
struct HealthSettings {
  std::chrono::seconds flap_down{25};        // a flap: down at least this long, then up
  int flap_count = 3;                        // this many flaps ...
  std::chrono::seconds flap_window{12 * 3600};  // ... within this window
  int carrier_losses = 5;                    // or this many losses of the link ...
  std::chrono::seconds carrier_window{24 * 3600};  // ... within this window
  int symbol_errors_per_hour = 120;
  std::chrono::seconds handshake_timeout{180};  // a peer silent this long is down
  std::chrono::seconds hold{300};            // a cleared condition stays raised this long
  bool operator==(const HealthSettings&) const = default;
};

struct Config {
  std::string listen = "127.0.0.1:7471";  // HOST:PORT or [V6]:PORT
  // Plain HTTP sends the bearer token in clear: it is refused on any address
  // but loopback unless this is set on purpose.
  bool allow_plain_http_on_non_loopback = false;
  TlsConfig tls;
  std::string token_file;  // empty: <state_dir>/token, created on first run
  std::string provider_id;
  OverlayConfig overlay;
  FabricConfig fabric;
  ApiConfig api;
  PodsConfig pods;
  NfdConfig nfd;
  HealthSettings health;
  std::string state_dir = "/var/lib/fabric-agent";
  std::string sysfs_root = "/sys";
  std::string log_level = "info";
  std::chrono::seconds refresh_interval{30};

  // Where this config came from: a file path or "<embedded defaults>", and
  // the drop-ins laid over it (<file>.d/*.yaml, in name order).
  std::string source = "<embedded defaults>";
  std::vector<std::string> dropins;

  // "FILE" or "FILE + DROPIN, DROPIN": for log lines.
  std::string sources() const {
    std::string s = source;
    for (size_t i = 0; i < dropins.size(); ++i) s += (i == 0 ? " + " : ", ") + dropins[i];
    return s;
  }

  std::string effective_token_file() const { return token_file.empty() ? state_dir + "/token" : token_file; }
  bool operator==(const Config&) const = default;
};

// The embedded defaults written out as a config file (documented, every key).
// parse_config(kEmbeddedDefaultsYaml) yields Config{} (a unit test holds them equal).
extern const std::string_view kEmbeddedDefaultsYaml;

// Parses YAML text; `source_name` is used in error messages (file name).
// An empty document gives the defaults.
Result<Config> parse_config(std::string_view yaml, const std::string& source_name);

// One YAML document of a layered config and the file it came from.
struct ConfigLayer {
  std::string text;
  std::string source;
};

// The first layer is the config file; each further one (a drop-in) is laid
// over what came before: a mapping merges key by key, any other value
// (scalar, list, empty) replaces. The merged document is validated as one,
// and an error names the file (and line) the offending value came from.
Result<Config> parse_config_layers(const std::vector<ConfigLayer>& layers);

// The drop-ins of DIR: every *.yaml file whose name does not start with
// '.', in byte order of names; none when DIR does not exist. Refused: a
// directory or file writable by group or others or owned by another user
// than root (whoever writes them configures a root daemon), a non-regular
// file, a file over 1 MiB.
Result<std::vector<ConfigLayer>> read_dropins(const std::string& dir);

// Reads and parses a file and its drop-ins (PATH.d/*.yaml).
Result<Config> load_config_file(const std::string& path);

// What `--config` resolves to: the given path (must exist), else the default
// path if it exists, else the embedded defaults; each with its drop-ins
// (/etc/fabric-agent/agent.yaml.d/ for the last two).
Result<Config> load_config(const std::string& path_or_empty);

// Splits a listen address "HOST:PORT" / "[V6]:PORT". Used by the config
// validator and the server.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
Result<HostPort> parse_host_port(std::string_view s);

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace fa
