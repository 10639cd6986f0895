// SPDX-License-Identifier: Apache-2.0
// rtnetlink through libnl-route: the link itself (create, MTU, up, move to a
// namespace, delete) and its addresses. Used by both backends; the wireguard
// configuration proper goes through genl (kernel) or UAPI (userspace).
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <memory>

#include "common/netlink.hpp"
#include "overlay/internal.hpp"

namespace fa::overlay {

namespace {

struct LinkFree {
  void operator()(rtnl_link* l) const { rtnl_link_put(l); }
};
struct AddrFree {
  void operator()(rtnl_addr* a) const { rtnl_addr_put(a); }
};
struct NlAddrFree {
  void operator()(nl_addr* a) const { nl_addr_put(a); }
};
using Link = std::unique_ptr<rtnl_link, LinkFree>;
using Addr = std::unique_ptr<rtnl_addr, AddrFree>;
using NlAddr = std::unique_ptr<nl_addr, NlAddrFree>;

// libnl returns -NLE_*; turn the ones callers decide on back into errno.
int nlerr_to_errno(int nlerr) {
  switch (nlerr < 0 ? -nlerr : nlerr) {
    case NLE_OPNOTSUPP:
      return EOPNOTSUPP;
    case NLE_EXIST:
      return EEXIST;
    case NLE_OBJ_NOTFOUND:
    case NLE_NODEV:
      return ENODEV;
    case NLE_PERM:
      return EPERM;
    case NLE_BUSY:
      return EBUSY;
    case NLE_INVAL:
      return EINVAL;
    case NLE_NOMEM:
      return ENOMEM;
    default:
      return EIO;
  }
}

Error nl_error(const std::string& what, int nlerr) {
  return Error{what + ": " + nl_geterror(nlerr), nlerr_to_errno(nlerr)};
}

Result<NlSock> route_socket() {
  NlSock s(nl_socket_alloc());
  if (!s) return Error{"nl_socket_alloc failed", ENOMEM};
  // Replies are matched on sequence and port id by libnl's auto-ack path;
  // the port id is chosen by the kernel at bind, never getpid().
  if (int e = nl_connect(s.get(), NETLINK_ROUTE); e < 0) return nl_error("connect NETLINK_ROUTE", e);
  return s;
}

Result<Link> get_link(nl_sock* s, const std::string& ifname) {
  rtnl_link* l = nullptr;
  int e = rtnl_link_get_kernel(s, 0, ifname.c_str(), &l);
  if (e < 0) return nl_error(ifname, e);
  return Link(l);
}

Status change_link(const std::string& ifname, rtnl_link* change, const char* what) {
  auto s = route_socket();
  if (!s) return s.take_error();
  auto l = get_link(s->get(), ifname);
  if (!l) return l.take_error();
  if (int e = rtnl_link_change(s->get(), l->get(), change, 0); e < 0)
    return nl_error(ifname + ": " + what, e);
  return {};
}

Status addr_op(int ifindex, const IpPrefix& a, bool add) {
  auto s = route_socket();
  if (!s) return s.take_error();
  Addr ad(rtnl_addr_alloc());
  NlAddr local(nl_addr_build(a.family, a.addr.data(), a.family == AF_INET ? 4 : 16));
  if (!ad || !local) return Error{"out of memory", ENOMEM};
  nl_addr_set_prefixlen(local.get(), a.len);
  rtnl_addr_set_ifindex(ad.get(), ifindex);
  rtnl_addr_set_family(ad.get(), a.family);
  if (int e = rtnl_addr_set_local(ad.get(), local.get()); e < 0) return nl_error("address " + a.str(), e);
  rtnl_addr_set_prefixlen(ad.get(), a.len);
  int e = add ? rtnl_addr_add(s->get(), ad.get(), 0) : rtnl_addr_delete(s->get(), ad.get(), 0);
  if (e < 0) return nl_error(std::string(add ? "add" : "delete") + " address " + a.str(), e);
  return {};
}

void add_addr(nl_object* o, void* arg) {
  auto& li = *static_cast<LinkInfo*>(arg);
  auto* a = reinterpret_cast<rtnl_addr*>(o);
  if (rtnl_addr_get_ifindex(a) != li.ifindex) return;
  nl_addr* local = rtnl_addr_get_local(a);
  if (!local) return;
  IpPrefix p;
  p.family = nl_addr_get_family(local);
  unsigned len = nl_addr_get_len(local);
  if ((p.family != AF_INET || len != 4) && (p.family != AF_INET6 || len != 16)) return;
  auto* bin = static_cast<const uint8_t*>(nl_addr_get_binary_addr(local));
  std::copy(bin, bin + len, p.addr.begin());
  p.len = static_cast<uint8_t>(rtnl_addr_get_prefixlen(a));
  li.addrs.push_back(p);
}

int parse_addr(nl_msg* m, void* arg) {
  rtnl_take_addr(m, *static_cast<LinkInfo*>(arg));
  return NL_OK;
}

// The link's own addresses. The dump request names the link and the
// socket asks for strict checking, so the kernel (4.20 and later) sends
// only this link's addresses rather than every address of the host (a
// GPU host with a veth per container has hundreds); an older kernel
// ignores the filter and sends all of them, which are filtered here.
Status read_addrs(nl_sock* s, LinkInfo& li) {
  int one = 1;
  ::setsockopt(nl_socket_get_fd(s), SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof one);
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_UNSPEC;
  ifa.ifa_index = static_cast<uint32_t>(li.ifindex);
  std::unique_ptr<nl_msg, decltype(&nlmsg_free)> req(nlmsg_alloc_simple(RTM_GETADDR, NLM_F_DUMP),
                                                     &nlmsg_free);
  if (!req || nlmsg_append(req.get(), &ifa, sizeof ifa, NLMSG_ALIGNTO) < 0)
    return Error{"out of memory", ENOMEM};
  li.addrs.clear();
  if (int e = nl_send_auto(s, req.get()); e < 0) return nl_error("dump addresses", e);
  // The socket's callbacks (its sequence checks) with our parser for the
  // answers; nl_socket_get_cb hands out a reference of its own.
  nl_cb* sock_cb = nl_socket_get_cb(s);
  std::unique_ptr<nl_cb, decltype(&nl_cb_put)> cb(nl_cb_clone(sock_cb), &nl_cb_put);
  nl_cb_put(sock_cb);
  if (!cb) return Error{"out of memory", ENOMEM};
  nl_cb_set(cb.get(), NL_CB_VALID, NL_CB_CUSTOM, parse_addr, &li);
  if (int e = nl_recvmsgs(s, cb.get()); e < 0) return nl_error("dump addresses", e);
  return {};
}

}  // namespace

LinkInfo rtnl_link_info(rtnl_link* l) {
  LinkInfo li;
  li.ifindex = rtnl_link_get_ifindex(l);
  if (const char* t = rtnl_link_get_type(l)) li.kind = t;
  li.mtu = rtnl_link_get_mtu(l);
  li.up = (rtnl_link_get_flags(l) & IFF_UP) != 0;
  return li;
}

void rtnl_take_addr(nl_msg* m, LinkInfo& li) {
  // Parsed into an rtnl_addr by libnl-route; an answer it cannot parse is
  // not one of ours (rtnl_addr_alloc_cache skips those the same way).
  nl_msg_parse(m, add_addr, &li);
}

Result<std::optional<LinkInfo>> rtnl_get_link(const std::string& ifname) {
  auto s = route_socket();
  if (!s) return s.take_error();
  auto l = get_link(s->get(), ifname);
  if (!l) {
    if (l.error().sys_errno == ENODEV) return std::optional<LinkInfo>();
    return l.take_error();
  }
  LinkInfo li = rtnl_link_info(l->get());
  if (Status st = read_addrs(s->get(), li); !st) return st.take_error();
  return std::optional<LinkInfo>(li);
}

Status rtnl_add_wireguard(const std::string& ifname) {
  auto s = route_socket();
  if (!s) return s.take_error();
  Link l(rtnl_link_alloc());
  if (!l) return Error{"out of memory", ENOMEM};
  rtnl_link_set_name(l.get(), ifname.c_str());
  if (int e = rtnl_link_set_type(l.get(), "wireguard"); e < 0) return nl_error(ifname + ": link type", e);
  if (int e = rtnl_link_add(s->get(), l.get(), NLM_F_CREATE | NLM_F_EXCL); e < 0)
    return nl_error(ifname + ": create wireguard link", e);
  return {};
}

Status rtnl_set_mtu(const std::string& ifname, uint32_t mtu) {
  Link ch(rtnl_link_alloc());
  if (!ch) return Error{"out of memory", ENOMEM};
  rtnl_link_set_mtu(ch.get(), mtu);
  return change_link(ifname, ch.get(), "set mtu");
}

Status rtnl_set_up(const std::string& ifname) {
  Link ch(rtnl_link_alloc());
  if (!ch) return Error{"out of memory", ENOMEM};
  rtnl_link_set_flags(ch.get(), IFF_UP);
  return change_link(ifname, ch.get(), "set up");
}

Status rtnl_move_to_netns(const std::string& ifname, int netns_fd) {
  Link ch(rtnl_link_alloc());
  if (!ch) return Error{"out of memory", ENOMEM};
  rtnl_link_set_ns_fd(ch.get(), netns_fd);
  return change_link(ifname, ch.get(), "move to netns");
}

Status rtnl_add_addr(int ifindex, const IpPrefix& a) { return addr_op(ifindex, a, true); }
Status rtnl_del_addr(int ifindex, const IpPrefix& a) { return addr_op(ifindex, a, false); }

Status rtnl_delete_link(const std::string& ifname) {
  auto s = route_socket();
  if (!s) return s.take_error();
  Link l(rtnl_link_alloc());
  if (!l) return Error{"out of memory", ENOMEM};
  rtnl_link_set_name(l.get(), ifname.c_str());
  if (int e = rtnl_link_delete(s->get(), l.get()); e < 0) return nl_error(ifname + ": delete link", e);
  return {};
}

Result<Fd> open_netns(const std::string& path_or_name) {
  std::string path = path_or_name[0] == '/' ? path_or_name : "/run/netns/" + path_or_name;
  // Non-blocking, so that a FIFO at that path cannot hold the caller; then
  // the kernel says whether it is a network namespace at all.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return Error::from_errno("open netns " + path);
  int type = ::ioctl(fd.get(), NS_GET_NSTYPE);
  if (type != CLONE_NEWNET)
    return Error{"netns " + path + " is not a network namespace (accepted: /run/netns/NAME, /proc/PID/ns/net)",
                 EINVAL};
  return fd;
}

Result<std::unique_ptr<NetnsGuard>> NetnsGuard::enter(int target_fd) {
  Fd orig(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!orig.valid()) return Error::from_errno("open /proc/thread-self/ns/net");
  if (::setns(target_fd, CLONE_NEWNET) != 0) return Error::from_errno("setns(CLONE_NEWNET)");
  return std::unique_ptr<NetnsGuard>(new NetnsGuard(std::move(orig)));
}

NetnsGuard::~NetnsGuard() {
  // Failing to return would leave this thread configuring the wrong
  // namespace from now on; there is no safe way to go on.
  if (::setns(orig_.get(), CLONE_NEWNET) != 0) std::abort();
}

}  // namespace fa::overlay
