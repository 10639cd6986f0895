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

#include "common/secure.hpp"
#include "overlay/internal.hpp"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

namespace fa::overlay {

namespace {

struct SockFree {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
using Sock = std::unique_ptr<nl_sock, SockFree>;
using Msg = WipedMsg;

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
  Sock sock;
  int family = 0;
};

Result<Genl> connect_genl() {
  Genl g;
  g.sock.reset(nl_socket_alloc());
  if (!g.sock) return Error{"nl_socket_alloc failed", ENOMEM};
  if (int e = genl_connect(g.sock.get()); e < 0) return nl_error("connect NETLINK_GENERIC", e);
  // Extended ACKs: the kernel then says which attribute it refused.
  int one = 1;
  ::setsockopt(nl_socket_get_fd(g.sock.get()), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  g.family = genl_ctrl_resolve(g.sock.get(), WG_GENL_NAME);
  if (g.family < 0) return nl_error("kernel has no '" WG_GENL_NAME "' generic netlink family", g.family);
  return g;
}

int collect(nl_msg* m, void* arg) {
  auto* out = static_cast<std::vector<std::vector<uint8_t>>*>(arg);
  nlmsghdr* h = nlmsg_hdr(m);
  auto* b = reinterpret_cast<const uint8_t*>(h);
  out->emplace_back(b, b + h->nlmsg_len);
  return NL_OK;
}

class KernelBackend : public WgBackend {
 public:
  Backend kind() const override { return Backend::Kernel; }

  Result<Device> get_device(const std::string& ifname) override {
    auto g = connect_genl();
    if (!g) return g.take_error();
    // A dump interrupted by a concurrent change (NLM_F_DUMP_INTR, which libnl
    // reports as NLE_DUMP_INTR) is inconsistent: we retry it whole rather
    // than diff against a torn view, a few times before giving up.
    for (int attempt = 0; attempt < 5; ++attempt) {
      Msg req(nlmsg_alloc());
      if (!req) return Error{"out of memory", ENOMEM};
      if (!genlmsg_put(req.get(), NL_AUTO_PORT, NL_AUTO_SEQ, g->family, 0, NLM_F_REQUEST | NLM_F_DUMP,
                       WG_CMD_GET_DEVICE, WG_GENL_VERSION) ||
          nla_put_string(req.get(), WGDEVICE_A_IFNAME, ifname.c_str()) < 0)
        return Error{"building WG_CMD_GET_DEVICE failed"};
      std::vector<std::vector<uint8_t>> parts;
      nl_socket_modify_cb(g->sock.get(), NL_CB_VALID, NL_CB_CUSTOM, collect, &parts);
      if (int e = nl_send_auto(g->sock.get(), req.get()); e < 0)
        return nl_error(ifname + ": send GET_DEVICE", e);
      int e = nl_recvmsgs_default(g->sock.get());
      if (e == -NLE_DUMP_INTR) continue;
      if (e < 0) return nl_error(ifname + ": WG_CMD_GET_DEVICE", e);
      auto d = genl_parse_device(parts);
      // They held the private key. (libnl's own receive buffer, freed inside
      // nl_recvmsgs, cannot be reached from here.)
      for (auto& p : parts) secure_wipe(p.data(), p.size());
      if (d) d->name = ifname;
      return d;
    }
    return Error{ifname + ": WG_CMD_GET_DEVICE dump interrupted 5 times in a row", EAGAIN};
  }

  Status set_device(const Device& change) override {
    auto g = connect_genl();
    if (!g) return g.take_error();
    // One page per message, as wireguard-tools does: the kernel's receive
    // path handles any size, but a page keeps each request bounded.
    size_t max = std::min<size_t>(static_cast<size_t>(::getpagesize()), 8192);
    auto msgs = genl_build_set(change, static_cast<uint16_t>(g->family), max);
    if (msgs.empty()) return Error{change.name + ": could not build WG_CMD_SET_DEVICE", EINVAL};
    for (auto& raw : msgs) {
      auto* h = reinterpret_cast<nlmsghdr*>(raw.data());
      Msg m(nlmsg_convert(h));
      secure_wipe(raw.data(), raw.size());
      if (!m) return Error{"out of memory", ENOMEM};
      if (int e = nl_send_auto(g->sock.get(), m.get()); e < 0)
        return nl_error(change.name + ": send SET_DEVICE", e);
      if (int e = nl_wait_for_ack(g->sock.get()); e < 0)
        return nl_error(change.name + ": WG_CMD_SET_DEVICE", e);
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<WgBackend> make_kernel_backend() { return std::make_unique<KernelBackend>(); }

}  // namespace fa::overlay
