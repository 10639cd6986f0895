// SPDX-License-Identifier: Apache-2.0
#include "probes/netlink_io.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>

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
  std::map<int, size_t> by_index;
  for (nl_object* o = nl_cache_get_first(links.get()); o; o = nl_cache_get_next(o)) {
    auto* l = reinterpret_cast<rtnl_link*>(o);
    const char* name = rtnl_link_get_name(l);
    if (!name) continue;
    NetLink nl;
    nl.name = name;
    nl.up = (rtnl_link_get_flags(l) & IFF_UP) != 0;
    by_index[rtnl_link_get_ifindex(l)] = st.links.size();
    st.links.push_back(std::move(nl));
  }

  raw = nullptr;
  if (int rc = rtnl_addr_alloc_cache(sk.get(), &raw); rc < 0) {
    st.error = nl_err("rtnetlink: address dump", rc);
    return st;
  }
  CachePtr addrs(raw);
  for (nl_object* o = nl_cache_get_first(addrs.get()); o; o = nl_cache_get_next(o)) {
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

  raw = nullptr;
  if (int rc = rtnl_route_alloc_cache(sk.get(), AF_UNSPEC, 0, &raw); rc < 0) {
    st.error = nl_err("rtnetlink: route dump", rc);
    return st;
  }
  CachePtr routes(raw);
  for (nl_object* o = nl_cache_get_first(routes.get()); o; o = nl_cache_get_next(o)) {
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

}  // namespace fa::probes
