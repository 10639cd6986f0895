// SPDX-License-Identifier: Apache-2.0
// Inside overlay/: codecs and the backend seam. Nothing here is part of the
// public contract; tests include it to feed the pure parts with data.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fd.hpp"
#include "overlay/overlay.hpp"

// libnl's message, declared here at global scope: `struct nl_msg` written
// first inside the namespace below would name another, fa::overlay type
// wherever <netlink/msg.h> is not included before this header.
struct nl_msg;

namespace fa::overlay {

// Peers are looked up by key in maps of up to a few thousand entries; keys
// are X25519 public keys (uniformly distributed), so their first 8 bytes
// are a good hash.
struct KeyHash {
  size_t operator()(const Key& k) const noexcept {
    size_t h;
    std::memcpy(&h, k.data(), sizeof h);
    return h;
  }
};

// X25519(scalar, u) as in RFC 7748 section 5, through OpenSSL.
Result<Key> x25519(const Key& scalar, const Key& u);

// ------------------------------------------------- UAPI text protocol ---
// https://www.wireguard.com/xplatform/ - "set=1" / "get=1" requests, key=value
// lines, blank line ends a message, replies end with "errno=N".

// The full "set=1\n...\n\n" request for a change set.
std::string uapi_set_request(const Device& change);
// A "get=1" reply (up to and including errno=0) -> observed device. Fails on
// errno != 0, unknown or malformed lines, keys/values out of range.
Result<Device> uapi_parse_get(std::string_view reply);
// Reply of a set: "errno=N\n\n" -> ok or the errno.
Status uapi_parse_set_reply(std::string_view reply);

// ------------------------------------------------ genl wireguard family ---

// A netlink message that may carry a private key: wiped whole (its
// allocated size, not only nlmsg_len) before libnl frees it, unless it is
// known to hold none (secret = false: a request of peers alone, whose public
// keys, endpoints and prefixes are no secret; wiping 16 KiB costs ~0.1 ms in
// the lab's emulated VM).
struct WipedMsgFree {
  bool secret = true;
  void operator()(nl_msg* m) const;
};
using WipedMsg = std::unique_ptr<nl_msg, WipedMsgFree>;

// One WG_CMD_SET_DEVICE request per element, each at most max_bytes long
// (netlink messages must fit the receiver's buffer; wireguard-tools uses a
// page). When a message fills, the half-built peer or allowed-IP nest is
// cancelled and the next message resumes from that same peer; a resumed peer
// never repeats REPLACE_ALLOWEDIPS, which would drop what came before.
// Messages carry no nlmsg seq/pid: those are set when sent. They are sent
// as built (one copy of the private key, wiped when freed). max_bytes is
// held to 64 KiB - 1 (a peer list is one nested attribute, with a 16-bit
// length); each buffer is only as large as the rest of the change needs.
std::vector<WipedMsg> genl_build_set(const Device& change, uint16_t family_id, size_t max_bytes);
// Decodes SET_DEVICE requests or GET_DEVICE dump replies (raw netlink
// messages, each starting with nlmsghdr) into one device. A peer continued
// across messages (same public key as the previous message's last peer) is
// merged. Every attribute is type- and length-checked.
Result<Device> genl_parse_device(const std::vector<std::vector<uint8_t>>& msgs);
// Reads the answer to the dump request `seq` sent from netlink port `port`
// on the datagram socket `fd`, copying each of its messages into `parts`
// (messages for another port or sequence are skipped) until NLMSG_DONE.
// Returns 0, or a negative libnl error code: the request's NLMSG_ERROR, an
// error in NLMSG_DONE's payload, -NLE_DUMP_INTR when a message was flagged
// NLM_F_DUMP_INTR (the dump was torn by a concurrent change: read it again),
// -NLE_MSG_TRUNC for an empty datagram or a cut error message. The receive
// buffer (32 KiB, more for a larger datagram) is wiped before it returns.
int genl_recv_dump(int fd, uint32_t port, uint32_t seq, std::vector<std::vector<uint8_t>>& parts);

// ------------------------------------------------------ backend seam ---
// As wireguard-tools' ipc.h: get and set, one implementation per transport;
// callers never learn which one answered.
class WgBackend {
 public:
  virtual ~WgBackend() = default;
  virtual Backend kind() const = 0;
  virtual Result<Device> get_device(const std::string& ifname) = 0;
  virtual Status set_device(const Device& change) = 0;
  // set_device in two halves, so that the caller can work while the backend
  // applies the request: send, then finish (the result). A backend that
  // cannot split does everything in send. finish is called once per send.
  // overlap: the caller has work for the time between them, worth a thread
  // to a backend that would otherwise apply inside send (the kernel).
  virtual Status set_device_send(const Device& change, bool /*overlap*/) {
    pending_ = set_device(change);
    return {};
  }
  virtual Status set_device_finish() { return std::move(pending_); }

 private:
  Status pending_;
};

std::unique_ptr<WgBackend> make_kernel_backend();

// conn: an open UAPI connection to conn_ifname's wireguard-go (the one that
// identified it), reused for every get/set; without one, it connects on first use.
// get_sent: a `get=1` is already on conn (EarlyGet); the first get_device
// only reads its answer.
std::unique_ptr<WgBackend> make_userspace_backend(std::string uapi_dir, Fd conn = Fd(),
                                                  std::string conn_ifname = {}, bool get_sent = false);

// Userspace process management (userspace.cpp).
std::string uapi_socket_path(const std::string& uapi_dir, const std::string& ifname);
bool uapi_socket_alive(const std::string& uapi_dir, const std::string& ifname);
Result<Fd> uapi_connect(const std::string& uapi_dir, const std::string& ifname);
// pid of the process at the other end of a connected unix socket (SO_PEERCRED).
Result<pid_t> uapi_peer_pid(int fd, const std::string& what);
// Starts `wireguard-go -f IFNAME` in its own session (it must outlive the
// agent), writes state_dir/IFNAME.pid and waits until the UAPI socket answers.
Result<pid_t> start_wireguard_go(const std::string& binary, const std::string& ifname,
                                 const std::string& uapi_dir, const std::string& state_dir);
// pid of the process listening on the UAPI socket (SO_PEERCRED), if any.
Result<pid_t> uapi_server_pid(const std::string& uapi_dir, const std::string& ifname);
// Stops the wireguard-go we started for ifname (pid file matches the socket's
// server), waits for it to exit. Ok when there is none.
Status stop_wireguard_go(const std::string& ifname, const std::string& uapi_dir,
                         const std::string& state_dir);

// ------------------------------------------------------ rtnetlink (libnl-route) ---
struct LinkInfo {
  int ifindex = 0;
  std::string kind;  // "wireguard", "tun", ...
  uint32_t mtu = 0;
  bool up = false;
  std::vector<IpPrefix> addrs;  // IPv4 and IPv6 addresses on the link
  bool addrs_read = false;      // addrs holds what the kernel said
};

// Whether rtnl_get_link also reads the link's addresses, on the same socket.
// IfKernelWireguard: only for a kernel `wireguard` link, whose change does
// not leave the process waiting for another one (wireguard-go's) during
// which the addresses could be read instead.
enum class LinkAddrs { No, Yes, IfKernelWireguard };
// Absent link -> ok with nullopt. Without addresses, li.addrs stays empty
// (one netlink round trip instead of two); rtnl_read_addrs fills it.
Result<std::optional<LinkInfo>> rtnl_get_link(const std::string& ifname, LinkAddrs addrs = LinkAddrs::Yes);
Status rtnl_read_addrs(LinkInfo& li);
// Creates a `wireguard` link. errno EOPNOTSUPP means the kernel has no module.
Status rtnl_add_wireguard(const std::string& ifname);
Status rtnl_set_mtu(const std::string& ifname, uint32_t mtu);
Status rtnl_set_up(const std::string& ifname);
Status rtnl_add_addr(int ifindex, const IpPrefix& a);
Status rtnl_del_addr(int ifindex, const IpPrefix& a);
Status rtnl_move_to_netns(const std::string& ifname, int netns_fd);
Status rtnl_delete_link(const std::string& ifname);

// What EarlyGet's thread read for the kernel backend (kernel.cpp), all of it
// read in the namespace the thread started in. Only a complete read counts:
// `link` is set once the link was looked up (nullopt inside: no such link);
// `backend` (with its netlink socket) and `device` once a kernel wireguard
// link's device was read. On any failure the rest stays unset and apply()
// reads for itself (and reports what fails then). The device's private key
// is wiped if nobody takes it.
struct EarlyGet::KernelRead {
  std::optional<std::optional<LinkInfo>> link;
  std::unique_ptr<WgBackend> backend;
  std::optional<Device> device;
  KernelRead() = default;
  KernelRead(const KernelRead&) = delete;
  KernelRead& operator=(const KernelRead&) = delete;
  ~KernelRead();
};
std::unique_ptr<EarlyGet::KernelRead> kernel_read(const std::string& ifname);

// Opens a netns by path or name (/run/netns/NAME).
Result<Fd> open_netns(const std::string& path_or_name);

// Enters a network namespace for the lifetime of the guard, for the calling
// thread only (setns), and returns to the original one on destruction.
class NetnsGuard {
 public:
  static Result<std::unique_ptr<NetnsGuard>> enter(int target_fd);
  ~NetnsGuard();
  NetnsGuard(const NetnsGuard&) = delete;
  NetnsGuard& operator=(const NetnsGuard&) = delete;

 private:
  explicit NetnsGuard(Fd orig) : orig_(std::move(orig)) {}
  Fd orig_;
};

}  // namespace fa::overlay
