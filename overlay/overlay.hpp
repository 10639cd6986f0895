// SPDX-License-Identifier: Apache-2.0
// Public face of overlay/: the WireGuard mesh of one node.
//
//   parse_desired / parse_desired_yaml   document -> DesiredMesh (whole document validated)
//   apply                                DesiredMesh -> live interface, smallest change only
//   show / down                          read / remove the live interface
//
// The daemon (PUT/GET/DELETE /v1/mesh, adopt on startup) and the CLI
// (`fabric-agent mesh apply|show|down`) both go through these calls and
// nothing else. See docs/overlay.md.
#pragma once

#include <boost/container/small_vector.hpp>
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
#include "common/task.hpp"

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
void append_key_hex(std::string& out, const Key& k);  // key_to_hex appended, without a temporary
void append_public_key_hex(std::string& out, const Key& k);  // the same by table: public keys only
Result<Key> key_from_hex(std::string_view s);
// The same two decoders for public keys only: a table lookup per character,
// ~10x fewer instructions (a 250-peer document and the device's 250-peer
// reply are decoded on every apply). The ones above are for anything that
// may hold a private key. Same results, same error messages.
Result<Key> public_key_from_base64(std::string_view s);
Result<Key> public_key_from_hex(std::string_view s);

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
  void append_to(std::string& out) const;  // str() appended, without a temporary
  IpPrefix network() const;  // host bits cleared
  bool contains(const IpPrefix& inner) const;
  auto operator<=>(const IpPrefix&) const = default;
};

// A peer's allowed IPs. In a cluster mesh each peer routes one /32 (its node's
// overlay address), kept inline: a desired state, a diff and a change set of
// 1000 peers are one allocation each instead of 1001 (and as many frees).
using IpList = boost::container::small_vector<IpPrefix, 1>;

// "IPv4:port" or "[IPv6]:port". Names are not resolved: the control plane
// pushes addresses, and a DNS lookup inside apply would make it slow and
// non-deterministic.
struct Endpoint {
  int family = 0;
  std::array<uint8_t, 16> addr{};
  uint16_t port = 0;

  static Result<Endpoint> parse(std::string_view s);
  std::string str() const;
  void append_to(std::string& out) const;  // str() appended, without a temporary
  auto operator<=>(const Endpoint&) const = default;
};

// ------------------------------------------------ device model (wg-style) ---
// One plain tree used for desired state, observed state and change sets, so
// that they diff directly (wireguard-tools' syncconf). In a change set an
// absent optional means "leave as it is".

struct Peer {
  Key public_key{};
  std::optional<Endpoint> endpoint;
  IpList allowed_ips;
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
// The same, moving desired's allowed-IP lists into the change (desired's
// peers are left without them; when current has no peer, desired's peer
// list itself becomes the change's and desired is left with none).
Device diff(const Device& current, Device&& desired);
// True when applying `change` would touch nothing.
bool is_noop(const Device& change);
// Pure: `current` with `change` applied, as WireGuard applies a set request
// (replace_peers, remove, update_only, replace_allowed_ips). apply() uses it
// to report the result without reading a large device back. new_public_key:
// the public key of change.private_key when the caller already derived it.
// `current` is taken by value: a caller done with it moves it in.
Device merge(Device current, const Device& change, const Key* new_public_key = nullptr);

// ------------------------------------------------------- desired state ---

struct DesiredPeer {
  Key public_key{};
  std::optional<Endpoint> endpoint;
  IpList allowed_ips;
  uint16_t persistent_keepalive = 0;
};

// The `mesh apply` file / PUT /v1/mesh body (DESIGN.md "Mesh desired state").
struct DesiredMesh {
  std::string cluster_id;
  std::string interface = "wg0";
  IpPrefix address;  // this node's overlay address, e.g. 10.42.0.1/24
  uint16_t listen_port = 51820;
  std::optional<std::string> private_key_file;
  std::optional<uint32_t> mtu;
  std::optional<std::string> netns;  // path (/run/netns/x, /proc/N/ns/net) or name under /run/netns
  std::vector<DesiredPeer> peers;
};

nlohmann::json to_json(const DesiredMesh& m);  // canonical form; parse_desired(to_json(m)) == m

struct ValidationError {
  std::string field;        // path into the document, e.g. "peers[3].endpoint"
  std::string value;        // the offending value as written ("" when missing)
  std::string message;      // what is accepted, e.g. "expected IPv4:port or [IPv6]:port"
  std::string str() const;  // "peers[3].endpoint: `x': expected ..."
};

struct ParseOptions {
  std::string overlay_cidr = "10.42.0.0/24";  // address and allowed IPs must lie inside
  // parse_desired_json only: called as soon as a valid `interface` value has
  // been read, before the rest of the document (see EarlyGet).
  std::function<void(const std::string&)> on_interface;
};

struct ParseResult {
  std::optional<DesiredMesh> mesh;      // set only when errors is empty
  std::vector<ValidationError> errors;  // every problem found, in document order
  bool ok() const { return mesh.has_value(); }
};

// Validates the whole document before anything is touched: required fields,
// types, ranges, address inside the overlay CIDR, one node per address,
// unique public keys and allowed IPs, no peer with our own key (when the key
// is known from private_key_file), endpoints, keepalive 0-65535, MTU
// 1280-9000, interface name rules, unknown keys.
ParseResult parse_desired(const nlohmann::json& doc, const ParseOptions& opt = {});
// The same for JSON text, without building a document when the text has the
// usual shape (see RawSax in desired.cpp); results are those of
// parse_desired(json::parse(text)). Throws nlohmann::json::parse_error on a
// syntax error, as json::parse does; a number no double can hold (1e999),
// which json::parse refuses with out_of_range, is reported as an error of
// its field instead.
ParseResult parse_desired_json(std::string_view text, const ParseOptions& opt = {});
// parse_desired_json's first try, on its own: the document's usual shape
// read without building a document; nullopt for any other text (another
// shape, a syntax error, nesting a desired state does not have), which
// parse_desired(json) then reads. Never throws nlohmann's exceptions.
std::optional<ParseResult> parse_desired_json_sax(std::string_view text, const ParseOptions& opt = {});
ParseResult parse_desired_yaml(std::string_view text, const ParseOptions& opt = {});

// --------------------------------------------------------------- actions ---

enum class Backend { Auto, Kernel, Userspace };
Result<Backend> parse_backend(std::string_view s);  // "auto" | "kernel" | "userspace"
const char* backend_name(Backend b);

// The interface's device, asked for before the desired state is validated,
// so that the answer is under way while the caller parses: a UAPI `get=1`
// sent to the wireguard-go serving `ifname` (it writes its answer, ~60 KB for
// 250 peers, meanwhile), or, where no wireguard-go serves that name and
// `backend` is not Userspace, the link and (for a kernel wireguard link) the
// device read over netlink on a thread of its own (the kernel answers inside the system
// call, so only another thread overlaps it: ~2 ms of a 250-peer `mesh apply`
// in the lab's emulated VM). apply() uses the answer instead of asking
// again when it configures that interface in this namespace. Reading is not
// touching: a document found invalid just drops it (the destructor waits
// for the thread and wipes what it read). Empty (and ignored) when nothing
// could be asked.
class EarlyGet {
 public:
  struct KernelRead;  // overlay/internal.hpp
  EarlyGet();
  ~EarlyGet();
  EarlyGet(EarlyGet&&) noexcept;
  EarlyGet& operator=(EarlyGet&&) noexcept;
  static EarlyGet start(const std::string& ifname, const std::string& uapi_dir, Backend backend);
  const std::string& ifname() const { return ifname_; }
  bool pending() const { return conn_.valid(); }
  Fd take() { return std::move(conn_); }
  // The netlink read (after waiting for its thread), or null when none was
  // started or it was taken already.
  std::unique_ptr<KernelRead> take_kernel();

 private:
  std::string ifname_;
  Fd conn_;
  Task<std::unique_ptr<KernelRead>> kernel_;
};

// What an apply did, in plain fields: the "changes" object of apply()'s
// document, for a caller that prints the counts and wants no document
// (ApplyOptions::summary).
struct ApplySummary {
  std::string interface;
  Backend backend = Backend::Auto;
  std::string backend_reason;
  bool created = false, moved = false, device_changed = false, link_changed = false;
  int peers_added = 0, peers_removed = 0, peers_updated = 0;
  long long elapsed_us = 0;
};

struct ApplyOptions {
  Backend backend = Backend::Auto;
  std::string wireguard_go = "wireguard-go";    // binary for the userspace backend
  std::string uapi_dir = "/var/run/wireguard";  // where wireguard-go puts IF.sock (fixed by wireguard-go)
  std::string state_dir = "/run/fabric-agent/overlay";  // pid files of wireguard-go we started
  // The whole report (the `mesh show --json` document). false: apply()
  // returns only interface, backend and changes (what `mesh apply` without
  // --json prints): no per-peer document is built, and the public key is
  // derived only if the change needs it (a new private key or a new peer,
  // for the own-key check), which spares X25519 and loading libcrypto when
  // a one-peer change needs no key at all.
  bool report = true;
  // The info line "IF: peers +N -M ~K" once a change has landed (the daemon's
  // record of each change). false: the caller prints those counts itself
  // (`mesh apply`'s summary on stdout), and the line would say it twice;
  // it is still logged when the change sets the private key or listen port,
  // which the counts do not tell.
  bool log_change = true;
  // Optional: a get already sent (see EarlyGet); apply() takes it over.
  EarlyGet* early_get = nullptr;
  // Optional: the caller's own work for after the change (the daemon's
  // status text, say), run while the backend applies it: called once the
  // change has been sent (or found empty) and before apply() waits for the
  // answer (wireguard-go takes ~60 ms for 1000 new peers; the kernel's
  // requests go out from a thread meanwhile when they add 8 or more peers,
  // otherwise the kernel has done its work by then). Not called when
  // apply() fails before that point; apply() may still fail after it. It
  // runs on the calling thread, inside m.netns if there is one.
  std::function<void()> while_waiting;
  // Optional, with report false: apply() fills this and returns an empty
  // document instead of building one (`mesh apply`'s summary line: the
  // document's ~20 small allocations and map look-ups cost ~0.3 ms of a
  // 250-peer push in the lab's emulated VM, after the kernel has answered).
  ApplySummary* summary = nullptr;
};

// Brings the interface to `m`: creates it if missing (in this namespace, then
// moves it into m.netns), otherwise adopts it as it is and sends only the
// difference. Returns the `mesh show --json` document plus "changes":
// {created, moved, peers_added, peers_removed, peers_updated, backend_reason}.
Result<nlohmann::json> apply(const DesiredMesh& m, const ApplyOptions& opt = {});

struct ShowOptions {
  std::optional<std::string> netns;  // look for the interface there
  std::string uapi_dir = "/var/run/wireguard";
};
// `mesh show --json`: { interface, backend, public_key, listen_port, address,
//   peers: [ { public_key, endpoint, allowed_ips, persistent_keepalive,
//              last_handshake_unix, rx_bytes, tx_bytes } ] }. Never a private key.
Result<nlohmann::json> show(const std::string& ifname, const ShowOptions& opt = {});

struct DownOptions {
  std::optional<std::string> netns;
  std::string uapi_dir = "/var/run/wireguard";
  std::string state_dir = "/run/fabric-agent/overlay";
};
// Removes the interface and stops the wireguard-go process we started for
// it. Absent interface: ok (idempotent).
Status down(const std::string& ifname, const DownOptions& opt = {});

}  // namespace fa::overlay
