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
struct rtnl_link;

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
// allocated size, not only nlmsg_len) before libnl frees it.
struct WipedMsgFree {
  void operator()(nl_msg* m) const;
};
using WipedMsg = std::unique_ptr<nl_msg, WipedMsgFree>;

// One WG_CMD_SET_DEVICE request per element, each at most max_bytes long.
// When a message fills, the half-built peer or allowed-IP nest is cancelled
// and the next message resumes from that same peer; a resumed peer never
// repeats REPLACE_ALLOWEDIPS, which would drop what came before. Messages
// carry no nlmsg seq/pid: those are set when sent. Empty on failure (a
// bound too small for one peer).
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
// buffer is ours, not libnl's, so that it is wiped (it held the private key).
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
};

std::unique_ptr<WgBackend> make_kernel_backend();
std::unique_ptr<WgBackend> make_userspace_backend(std::string uapi_dir);

// Userspace process management (userspace.cpp).
std::string uapi_socket_path(const std::string& uapi_dir, const std::string& ifname);
Result<Fd> uapi_connect(const std::string& uapi_dir, const std::string& ifname);
// pid of the process listening on the UAPI socket (SO_PEERCRED), if any.
Result<pid_t> uapi_server_pid(const std::string& uapi_dir, const std::string& ifname);
// Starts `wireguard-go -f IFNAME` in its own session (it must outlive the
// agent), writes state_dir/IFNAME.pid and waits until the UAPI socket answers.
Result<pid_t> start_wireguard_go(const std::string& binary, const std::string& ifname,
                                 const std::string& uapi_dir, const std::string& state_dir);
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
};

// The link and its addresses; an absent link is ok with nullopt.
Result<std::optional<LinkInfo>> rtnl_get_link(const std::string& ifname);
// What rtnl_get_link keeps of the kernel's answers, without a socket (fuzz/
// feeds them messages made of any bytes): of the link libnl-route parsed,
// and of one RTM_NEWADDR message of the address dump (added to li.addrs
// when it is li.ifindex's).
LinkInfo rtnl_link_info(rtnl_link* l);
void rtnl_take_addr(nl_msg* m, LinkInfo& li);
// Creates a `wireguard` link. errno EOPNOTSUPP means the kernel has no module.
Status rtnl_add_wireguard(const std::string& ifname);
Status rtnl_set_mtu(const std::string& ifname, uint32_t mtu);
Status rtnl_set_up(const std::string& ifname);
Status rtnl_add_addr(int ifindex, const IpPrefix& a);
Status rtnl_del_addr(int ifindex, const IpPrefix& a);
Status rtnl_move_to_netns(const std::string& ifname, int netns_fd);
Status rtnl_delete_link(const std::string& ifname);

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
