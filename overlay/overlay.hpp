// SPDX-License-Identifier: Apache-2.0
// Public face of overlay/: the WireGuard mesh of one node.
//
//   parse_desired                 document -> DesiredMesh (the whole document validated)
//   apply                         DesiredMesh -> live interface, smallest change only
//   apply_peers                   a change of some peers, sent without reading the device
//   show / down                   read / remove the live interface
//
// The daemon (PUT/PATCH/GET/DELETE /v1/mesh, adoption at start), the CLI
// (`fabric-agent mesh apply|show|down`) and pods/ go through these calls and
// nothing else. See docs/overlay.md.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fd.hpp"
#include "common/result.hpp"

namespace fa::overlay {

// ---------------------------------------------------------------- keys ---

inline constexpr size_t kKeyLen = 32;
using Key = std::array<uint8_t, kKeyLen>;

// Base64 (44 chars, standard alphabet, one '=') as wg(8) prints keys.
std::string key_to_base64(const Key& k);
Result<Key> key_from_base64(std::string_view s);
// The content of a private key file (base64, trailing newline and blanks
// allowed) -> key; `text` is wiped either way.
Result<Key> key_from_file_text(std::string& text);
// Lower-case hex (64 chars), the UAPI wire form.
std::string key_to_hex(const Key& k);
Result<Key> key_from_hex(std::string_view s);

// 32 random bytes from getrandom(2), clamped as wg genkey does.
Result<Key> generate_private_key();
// X25519 public key of a private key (OpenSSL's EVP interface).
Result<Key> public_key_of(const Key& private_key);
// Overwrites key material in a way the compiler does not elide.
void wipe(Key& k);

// ------------------------------------------------------------- addresses ---

// An IPv4 or IPv6 prefix, e.g. 10.42.0.2/32. Host bits may be set (an
// interface address like 10.42.0.1/24 is one of these too).
struct IpPrefix {
  int family = 0;  // AF_INET or AF_INET6
  std::array<uint8_t, 16> addr{};
  uint8_t len = 0;

  static Result<IpPrefix> parse(std::string_view s);  // "a.b.c.d/n", "x::y/n"; no "/n" = host prefix
  std::string str() const;
  IpPrefix network() const;  // host bits cleared
  bool contains(const IpPrefix& inner) const;
  auto operator<=>(const IpPrefix&) const = default;
};

// "IPv4:port" or "[IPv6]:port". Names are not resolved: the control plane
// pushes addresses, and a DNS lookup inside apply would make it slow and
// non-deterministic.
struct Endpoint {
  int family = 0;
  std::array<uint8_t, 16> addr{};
  uint16_t port = 0;

  static Result<Endpoint> parse(std::string_view s);
  std::string str() const;
  auto operator<=>(const Endpoint&) const = default;
};

// ------------------------------------------------ device model (wg-style) ---
// One plain tree used for desired state, observed state and change sets, so
// that they diff directly (wireguard-tools' syncconf). In a change set an
// absent optional means "leave as it is".

struct Peer {
  Key public_key{};
  std::optional<Endpoint> endpoint;
  std::vector<IpPrefix> allowed_ips;
  std::optional<uint16_t> persistent_keepalive;

  // Change-set flags (WGPEER_F_* / UAPI remove, update_only, replace_allowed_ips).
  bool remove = false;
  bool update_only = false;
  bool replace_allowed_ips = false;

  // Observed only.
  int64_t last_handshake_sec = 0;
  int64_t last_handshake_nsec = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
};

struct Device {
  std::string name;
  std::optional<Key> private_key;
  std::optional<Key> public_key;  // observed only
  std::optional<uint16_t> listen_port;
  std::optional<uint32_t> fwmark;
  // Set by diff() only when no current peer stays (every session it would
  // reset belongs to a peer that goes anyway).
  bool replace_peers = false;
  std::vector<Peer> peers;
};

// Pure: the smallest change set that turns `current` into `desired`. Peers
// only in `current` are removed (each with its own remove flag or, when no
// current peer stays, all at once with replace_peers), new peers are added,
// changed peers carry update_only plus exactly the fields that differ
// (replace_allowed_ips only when the set of allowed IPs differs). Unchanged
// peers are not in the set.
Device diff(const Device& current, const Device& desired);
// True when applying `change` would touch nothing.
bool is_noop(const Device& change);

// ------------------------------------------------------- desired state ---

struct DesiredPeer {
  Key public_key{};
  std::optional<Endpoint> endpoint;
  std::vector<IpPrefix> allowed_ips;
  uint16_t persistent_keepalive = 0;
  bool operator==(const DesiredPeer&) const = default;
};

// The `mesh apply` file / PUT /v1/mesh body (docs/overlay.md).
struct DesiredMesh {
  std::string cluster_id;
  std::string interface = "wg0";
  IpPrefix address;  // this node's overlay address, e.g. 10.42.0.1/24
  uint16_t listen_port = 51820;
  std::optional<std::string> private_key_file;
  std::optional<uint32_t> mtu;
  std::optional<std::string> netns;  // path (/run/netns/x, /proc/N/ns/net) or name under /run/netns
  std::vector<DesiredPeer> peers;
  bool operator==(const DesiredMesh&) const = default;
};

nlohmann::json to_json(const DesiredMesh& m);  // canonical form; parse_desired(to_json(m)) == m
// Linux's rules for an interface name (dev_valid_name): 1-15 bytes, no '/', ':' or blanks.
bool valid_interface_name(std::string_view s);
nlohmann::json to_json(const DesiredPeer& p);

struct ValidationError {
  std::string field;        // path into the document, e.g. "peers[3].endpoint"
  std::string value;        // the offending value as written ("" when missing)
  std::string message;      // what is accepted, e.g. "expected IPv4:port or [IPv6]:port"
  std::string str() const;  // "peers[3].endpoint: `x': expected ..."
};

struct ParseOptions {
  std::string overlay_cidr = "10.42.0.0/24";  // address and allowed IPs must lie inside
};

template <class T>
struct Parsed {
  std::optional<T> value;               // set only when errors is empty
  std::vector<ValidationError> errors;  // every problem found, in document order
  bool ok() const { return value.has_value(); }
};
using ParseResult = Parsed<DesiredMesh>;

// Validates the whole document before anything is touched: required fields,
// types, ranges, address inside the overlay CIDR, one node per address,
// unique public keys and allowed IPs, endpoints, keepalive 0-65535, MTU
// 1280-9000, interface name rules, unknown keys.
ParseResult parse_desired(const nlohmann::json& doc, const ParseOptions& opt = {});
// A desired-state file's text: JSON when it starts with '{', else YAML
// (converted to the same document). Syntax errors are errors of the result.
ParseResult parse_desired_text(std::string_view text, const ParseOptions& opt = {});

// A change of some peers of a running mesh (PATCH /v1/mesh): `peers` are
// added, or replace the peer with the same key whole; `remove` go.
struct PeerChanges {
  std::string cluster_id;
  std::vector<DesiredPeer> peers;
  std::vector<Key> remove;
};
// The PATCH body {cluster_id, peers: [...], remove: [key, ...]}, each peer
// validated as in parse_desired (field paths "peers[i]...", "remove[i]").
Parsed<PeerChanges> parse_peer_changes(const nlohmann::json& doc, const ParseOptions& opt = {});
// `m` with the changes made (a replaced peer keeps its place, new ones are
// appended), checked whole as parse_desired checks a document; errors name
// the change's fields.
Parsed<DesiredMesh> with_changes(const DesiredMesh& m, const PeerChanges& c, const ParseOptions& opt = {});

// --------------------------------------------------------------- actions ---

enum class Backend { Auto, Kernel, Userspace };
Result<Backend> parse_backend(std::string_view s);  // "auto" | "kernel" | "userspace"
const char* backend_name(Backend b);

struct ApplyOptions {
  Backend backend = Backend::Auto;
  std::string wireguard_go = "wireguard-go";    // binary for the userspace backend
  std::string uapi_dir = "/var/run/wireguard";  // where wireguard-go puts IF.sock (fixed by wireguard-go)
  std::string state_dir = "/run/fabric-agent/overlay";  // pid files of wireguard-go we started
};

// What an apply did.
struct ApplyResult {
  std::string interface;
  Backend backend = Backend::Auto;
  std::string backend_reason;
  std::optional<Key> public_key;
  bool created = false, moved = false, device_changed = false, link_changed = false;
  int peers_added = 0, peers_removed = 0, peers_updated = 0;
  long long elapsed_us = 0;
};
// {interface, backend, public_key, changes: {created, moved, backend_reason,
//  peers_added, peers_removed, peers_updated, device_changed, link_changed,
//  elapsed_us}}
nlohmann::json to_json(const ApplyResult& r);
// "wg0: backend kernel (...); created; peers +2 -0 ~0; 1.23 ms"
std::string summary_line(const ApplyResult& r);

// Brings the interface to `m`: creates it if missing (in this namespace, then
// moves it into m.netns), otherwise adopts it as it is and sends only the
// difference from what it holds.
Result<ApplyResult> apply(const DesiredMesh& m, const ApplyOptions& opt = {});
// Sends `changes` to the interface of `m` (the mesh before them) without
// reading the interface: each added or changed peer whole (its allowed IPs
// replaced), each removed one removed; peers given as they already are in
// `m` are not sent. When the interface does not exist it is created with
// apply() of `m` with the changes made. The caller has checked the changes
// with with_changes().
Result<ApplyResult> apply_peers(const DesiredMesh& m, const PeerChanges& changes, const ApplyOptions& opt = {});

struct ShowOptions {
  std::optional<std::string> netns;  // look for the interface there
  std::string uapi_dir = "/var/run/wireguard";
};
struct Shown {
  std::string interface;
  Backend backend = Backend::Auto;
  Device device;  // never with a private key
  std::optional<IpPrefix> address;  // the link's first IPv4 address
  uint32_t mtu = 0;
  bool up = false;
};
Result<Shown> show(const std::string& ifname, const ShowOptions& opt = {});
// `mesh show --json`: { interface, backend, public_key, listen_port, address,
//   mtu, up, peers: [ { public_key, endpoint, allowed_ips, persistent_keepalive,
//              last_handshake_unix, rx_bytes, tx_bytes } ] }.
nlohmann::json to_json(const Shown& s);

struct DownOptions {
  std::optional<std::string> netns;
  std::string uapi_dir = "/var/run/wireguard";
  std::string state_dir = "/run/fabric-agent/overlay";
};
// Removes the interface and stops the wireguard-go process we started for
// it. Absent interface: ok (idempotent).
Status down(const std::string& ifname, const DownOptions& opt = {});

// For pods/: whether `ifname` exists in the network namespace `ns_fd`, and
// moving it from there into `to_ns_fd` (false: there was nothing to move).
Result<bool> interface_exists(const std::string& ifname, int ns_fd);
Result<bool> move_interface(const std::string& ifname, int from_ns_fd, int to_ns_fd);

}  // namespace fa::overlay
