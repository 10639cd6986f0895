// SPDX-License-Identifier: Apache-2.0
// Kernel backend: the `wireguard` generic netlink family through libnl-genl.
// Messages are built and decoded by genl.cpp; this file only moves them.
#include <linux/netlink.h>
#include <linux/wireguard.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "common/fault.hpp"
#include "common/netlink.hpp"
#include "common/secure.hpp"
#include "overlay/internal.hpp"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

namespace fa::overlay {

namespace {

using Msg = WipedMsg;

// The size bound of one WG_CMD_SET_DEVICE request (~160 peers with one
// allowed IP each): the kernel derives a key per new peer (X25519) while it
// holds the rtnl lock, so a bounded request keeps that hold short.
constexpr size_t kSetMessageBytes = 16 * 1024;

int nl_to_errno(int e) {
  switch (e < 0 ? -e : e) {
    case NLE_OBJ_NOTFOUND:
    case NLE_NODEV:
      return ENODEV;
    case NLE_PERM:
      return EPERM;
    case NLE_OPNOTSUPP:
      return EOPNOTSUPP;
    case NLE_INVAL:
      return EINVAL;
    default:
      return EIO;
  }
}

Error nl_error(const std::string& what, int e) { return Error{what + ": " + nl_geterror(e), nl_to_errno(e)}; }

struct Genl {
  NlSock sock;
  int family = 0;
};

Result<Genl> connect_genl() {
  Genl g;
  g.sock.reset(nl_socket_alloc());
  if (!g.sock) return Error{"nl_socket_alloc failed", ENOMEM};
  if (int e = genl_connect(g.sock.get()); e < 0) return nl_error("connect NETLINK_GENERIC", e);
  // Extended ACKs: the kernel then says which attribute it refused. Capped
  // ACKs: an error does not echo the request, which for the first
  // WG_CMD_SET_DEVICE holds the private key (libnl would read the echo into
  // a buffer it frees unwiped) and is up to kSetMessageBytes long.
  int one = 1;
  ::setsockopt(nl_socket_get_fd(g.sock.get()), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  ::setsockopt(nl_socket_get_fd(g.sock.get()), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  g.family = genl_ctrl_resolve(g.sock.get(), WG_GENL_NAME);
  if (g.family < 0) return nl_error("kernel has no '" WG_GENL_NAME "' generic netlink family", g.family);
  return g;
}

// libnl's code for an error the kernel sent: -errno, at most 4095 (the
// kernel's MAX_ERRNO); anything lower is no errno, and negating INT_MIN
// would overflow.
int nl_error_of(int err) { return err < -4095 ? -NLE_FAILURE : -nl_syserr2nlerr(-err); }

}  // namespace

// Not nl_recvmsgs: the answer carries the private key, and libnl reads into
// a buffer of its own that it frees unwiped; this buffer is ours and wiped
// (so are `parts`, by the caller). One recv per datagram, into a buffer
// twice the largest one the kernel builds for a dump (netlink_dump() sizes
// them by the reader's past receives, at most 32 KiB); a larger datagram is
// refused whole (MSG_TRUNC gives its real size), never read cut.
int genl_recv_dump(int fd, uint32_t port, uint32_t seq, std::vector<std::vector<uint8_t>>& parts) {
  constexpr size_t kCap = 64 * 1024;
  // Not zeroed: only what a recv wrote is read, and only that is wiped.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[kCap]);
  size_t used = 0;  // the most any recv wrote
  auto done = [&](int rc) {
    secure_wipe(buf.get(), used);
    return rc;
  };
  bool torn = false;
  for (;;) {
    ssize_t n;
    do n = ::recv(fd, buf.get(), kCap, MSG_TRUNC);
    while (n < 0 && errno == EINTR);
    if (n < 0) return done(-nl_syserr2nlerr(errno));
    used = std::max(used, std::min(static_cast<size_t>(n), kCap));
    if (n == 0) return done(-NLE_MSG_TRUNC);  // the kernel never sends an empty datagram
    if (static_cast<size_t>(n) > kCap) return done(-NLE_MSG_TRUNC);
    int left = static_cast<int>(n);  // signed: NLMSG_NEXT may step below zero, and NLMSG_OK then stops
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.get()); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_pid != port || h->nlmsg_seq != seq) continue;  // not an answer to this request
      if (h->nlmsg_flags & NLM_F_DUMP_INTR) torn = true;
      if (h->nlmsg_type == NLMSG_ERROR) {
        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return done(-NLE_MSG_TRUNC);
        int err = static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
        return done(err < 0 ? nl_error_of(err) : 0);
      }
      if (h->nlmsg_type == NLMSG_DONE) {
        // A dump that fails midway says so in NLMSG_DONE's payload.
        if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(int))) {
          int err = *static_cast<const int*>(NLMSG_DATA(h));
          if (err < 0) return done(nl_error_of(err));
        }
        return done(torn ? -NLE_DUMP_INTR : 0);
      }
      if (h->nlmsg_type < NLMSG_MIN_TYPE) continue;  // NOOP, OVERRUN
      auto* b = reinterpret_cast<const uint8_t*>(h);
      parts.emplace_back(b, b + h->nlmsg_len);
    }
  }
}

namespace {

constexpr uint32_t kDumpSeq = 0x46410000;  // "FA"

class KernelBackend : public WgBackend {
 public:
  Backend kind() const override { return Backend::Kernel; }

  Result<Device> get_device(const std::string& ifname) override {
    auto g = genl();
    if (!g) return g.take_error();
    auto d = read_device(*g, ifname);
    if (!d) genl_.reset();
    return d;
  }

  Status set_device(const Device& change) override {
    auto g = genl();
    if (!g) return g.take_error();
    auto msgs = build(*g, change);
    if (!msgs) return msgs.take_error();
    auto s = send_msgs(*g, change.name, *msgs);
    if (!s) genl_.reset();
    return s;
  }

 private:
  Result<Device> read_device(Genl* g, const std::string& ifname) {
    // A dump interrupted by a concurrent change (NLM_F_DUMP_INTR, which libnl
    // reports as NLE_DUMP_INTR) is inconsistent: we retry it whole rather
    // than diff against a torn view, a few times before giving up.
    for (int attempt = 0; attempt < 5; ++attempt) {
      Msg req(nlmsg_alloc());
      if (!req) return Error{"out of memory", ENOMEM};
      // A sequence number outside libnl's count: libnl expects the answers
      // to the requests it numbers in order (the change's acks, on this same
      // socket), and this answer is read by genl_recv_dump, not by libnl.
      const uint32_t seq = kDumpSeq + static_cast<uint32_t>(attempt);
      if (!genlmsg_put(req.get(), NL_AUTO_PORT, seq, g->family, 0, NLM_F_REQUEST | NLM_F_DUMP,
                       WG_CMD_GET_DEVICE, WG_GENL_VERSION) ||
          nla_put_string(req.get(), WGDEVICE_A_IFNAME, ifname.c_str()) < 0)
        return Error{"building WG_CMD_GET_DEVICE failed"};
      std::vector<std::vector<uint8_t>> parts;
      auto wipe_parts = [&parts] {  // they held the private key
        for (auto& p : parts) secure_wipe(p.data(), p.size());
      };
      if (int e = nl_send_auto(g->sock.get(), req.get()); e < 0)
        return nl_error(ifname + ": send GET_DEVICE", e);
      int e = genl_recv_dump(nl_socket_get_fd(g->sock.get()), nl_socket_get_local_port(g->sock.get()), seq,
                             parts);
      if (e < 0) wipe_parts();
      if (e == -NLE_DUMP_INTR) continue;
      if (e < 0) return nl_error(ifname + ": WG_CMD_GET_DEVICE", e);
      auto d = genl_parse_device(parts);
      wipe_parts();
      if (d) d->name = ifname;
      return d;
    }
    return Error{ifname + ": WG_CMD_GET_DEVICE dump interrupted 5 times in a row", EAGAIN};
  }

  static Result<std::vector<Msg>> build(Genl* g, const Device& change) {
    auto msgs = genl_build_set(change, static_cast<uint16_t>(g->family), kSetMessageBytes);
    if (msgs.empty()) return Error{change.name + ": could not build WG_CMD_SET_DEVICE", EINVAL};
    return msgs;
  }
  static Status send_msgs(Genl* g, const std::string& ifname, std::vector<Msg>& msgs) {
    for (auto& m : msgs) {
      if (int e = nl_send_auto(g->sock.get(), m.get()); e < 0)
        return nl_error(ifname + ": send SET_DEVICE", e);
      if (int e = nl_wait_for_ack(g->sock.get()); e < 0) return nl_error(ifname + ": WG_CMD_SET_DEVICE", e);
      fault_point("kernel: one WG_CMD_SET_DEVICE request applied");
    }
    return {};
  }

  // One socket and one family lookup serve the whole apply (the read, then
  // the change); a failed exchange may leave answers unread on it, so an
  // error drops it and the next call starts afresh.
  Result<Genl*> genl() {
    if (!genl_) {
      auto g = connect_genl();
      if (!g) return g.take_error();
      genl_ = std::move(*g);
    }
    return &*genl_;
  }
  std::optional<Genl> genl_;
};

}  // namespace

std::unique_ptr<WgBackend> make_kernel_backend() { return std::make_unique<KernelBackend>(); }

}  // namespace fa::overlay
