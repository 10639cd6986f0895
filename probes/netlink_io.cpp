// SPDX-License-Identifier: Apache-2.0
#include "probes/netlink_io.hpp"

#include <arpa/inet.h>
#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "common/netlink.hpp"

namespace fa::probes {
namespace {

struct CacheDel {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
using CachePtr = std::unique_ptr<nl_cache, CacheDel>;

std::string nl_err(const char* what, int rc) { return std::string(what) + ": " + nl_geterror(rc); }

}  // namespace

NetState read_net_state() {
  NetState st;
  NlSock sk(nl_socket_alloc());
  if (!sk) {
    st.error = "rtnetlink: nl_socket_alloc failed";
    return st;
  }
  if (int rc = nl_connect(sk.get(), NETLINK_ROUTE); rc < 0) {
    st.error = nl_err("rtnetlink: connect", rc);
    return st;
  }
  // libnl's cache fill is a dump; an interrupted dump (NLM_F_DUMP_INTR) is
  // returned by libnl as -NLE_DUMP_INTR and we report it rather than use a
  // half-read table.
  nl_cache* raw = nullptr;
  if (int rc = rtnl_link_alloc_cache(sk.get(), AF_UNSPEC, &raw); rc < 0) {
    st.error = nl_err("rtnetlink: link dump", rc);
    return st;
  }
  CachePtr links(raw);
  raw = nullptr;
  if (int rc = rtnl_addr_alloc_cache(sk.get(), &raw); rc < 0) {
    st = net_state_from(links.get(), nullptr, nullptr);
    st.error = nl_err("rtnetlink: address dump", rc);
    return st;
  }
  CachePtr addrs(raw);
  raw = nullptr;
  if (int rc = rtnl_route_alloc_cache(sk.get(), AF_UNSPEC, 0, &raw); rc < 0) {
    st = net_state_from(links.get(), addrs.get(), nullptr);
    st.error = nl_err("rtnetlink: route dump", rc);
    return st;
  }
  CachePtr routes(raw);
  return net_state_from(links.get(), addrs.get(), routes.get());
}

NetState net_state_from(nl_cache* links, nl_cache* addrs, nl_cache* routes) {
  NetState st;
  std::map<int, size_t> by_index;
  for (nl_object* o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
    auto* l = reinterpret_cast<rtnl_link*>(o);
    const char* name = rtnl_link_get_name(l);
    if (!name) continue;
    NetLink nl;
    nl.name = name;
    nl.up = (rtnl_link_get_flags(l) & IFF_UP) != 0;
    by_index[rtnl_link_get_ifindex(l)] = st.links.size();
    st.links.push_back(std::move(nl));
  }
  if (!addrs) return st;
  for (nl_object* o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    if (rtnl_addr_get_family(a) != AF_INET) continue;
    nl_addr* local = rtnl_addr_get_local(a);
    if (!local || nl_addr_get_len(local) != 4) continue;
    auto it = by_index.find(rtnl_addr_get_ifindex(a));
    if (it == by_index.end()) continue;
    uint32_t be;
    std::memcpy(&be, nl_addr_get_binary_addr(local), 4);
    st.links[it->second].addrs.push_back({ntohl(be), rtnl_addr_get_prefixlen(a)});
  }
  if (!routes) return st;
  for (nl_object* o = nl_cache_get_first(routes); o; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_route*>(o);
    int fam = rtnl_route_get_family(r);
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (rtnl_route_get_table(r) != RT_TABLE_MAIN) continue;
    nl_addr* dst = rtnl_route_get_dst(r);
    if (dst && nl_addr_get_prefixlen(dst) != 0) continue;  // not a default route
    if (rtnl_route_get_type(r) != RTN_UNICAST) continue;
    // Every nexthop's device carries the default route (multipath too).
    int n = rtnl_route_get_nnexthops(r);
    for (int i = 0; i < n; ++i) {
      rtnl_nexthop* nh = rtnl_route_nexthop_n(r, i);
      auto it = by_index.find(rtnl_route_nh_get_ifindex(nh));
      if (it != by_index.end()) st.default_route_ifs.insert(st.links[it->second].name);
    }
  }
  return st;
}

namespace {

struct MsgFree {
  void operator()(nl_msg* m) const { nlmsg_free(m); }
};

Result<DcbIeee> dcb_ieee_get(nl_sock* sk, const std::string& ifname) {
  std::string where = "RTM_GETDCB (DCB_CMD_IEEE_GET) for " + ifname;
  std::unique_ptr<nl_msg, MsgFree> msg(nlmsg_alloc_simple(RTM_GETDCB, NLM_F_REQUEST));
  if (!msg) return Error{where + ": nlmsg_alloc failed", ENOMEM};
  dcbmsg dm{};
  dm.dcb_family = AF_UNSPEC;
  dm.cmd = DCB_CMD_IEEE_GET;
  if (nlmsg_append(msg.get(), &dm, sizeof dm, NLMSG_ALIGNTO) < 0 ||
      nla_put_string(msg.get(), DCB_ATTR_IFNAME, ifname.c_str()) < 0)
    return Error{where + ": message too long", EMSGSIZE};
  if (int rc = nl_send_auto(sk, msg.get()); rc < 0) return Error{nl_err(where.c_str(), rc).c_str(), EIO};
  sockaddr_nl peer{};
  unsigned char* raw = nullptr;
  int n = nl_recv(sk, &peer, &raw, nullptr);
  if (n <= 0) return Error{nl_err(where.c_str(), n < 0 ? n : -NLE_MSG_TRUNC).c_str(), EIO};
  std::unique_ptr<unsigned char, decltype(&std::free)> own(raw, &std::free);
  for (auto* h = reinterpret_cast<nlmsghdr*>(raw); nlmsg_ok(h, n); h = nlmsg_next(h, &n)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      auto* e = static_cast<nlmsgerr*>(nlmsg_data(h));
      if (e->error != 0) return Error::from_errno(where, -e->error);
      continue;
    }
    if (h->nlmsg_type != RTM_GETDCB) continue;
    auto* data = reinterpret_cast<const uint8_t*>(nlmsg_attrdata(h, sizeof(dcbmsg)));
    int len = nlmsg_attrlen(h, sizeof(dcbmsg));
    auto d = decode_dcb_ieee(std::span<const uint8_t>(data, static_cast<size_t>(len > 0 ? len : 0)));
    if (!d) return Error{ifname + ": " + d.error().message, EPROTO};
    return d;
  }
  return Error{where + ": no reply", EIO};
}

}  // namespace

std::map<std::string, Result<DcbIeee>> read_dcb(const std::vector<std::string>& netdevs) {
  std::map<std::string, Result<DcbIeee>> out;
  NlSock sk(nl_socket_alloc());
  // No ACKs: each request is answered by its reply or its error, nothing else.
  if (sk) nl_socket_disable_auto_ack(sk.get());
  int rc = sk ? nl_connect(sk.get(), NETLINK_ROUTE) : -NLE_NOMEM;
  for (const auto& nd : netdevs) {
    if (out.count(nd)) continue;
    if (rc < 0)
      out.emplace(nd, Error{nl_err("rtnetlink: connect", rc), EIO});
    else
      out.emplace(nd, dcb_ieee_get(sk.get(), nd));
  }
  return out;
}

}  // namespace fa::probes
