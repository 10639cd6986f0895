// SPDX-License-Identifier: Apache-2.0
// The rtnetlink answers the agent reads, parsed by libnl-route as on the
// socket: the input is a run of netlink messages (RTM_NEWLINK, RTM_NEWADDR,
// RTM_NEWROUTE, anything else). Each is given to the overlay's link and
// address readers (rtnl_link_info over libnl's parse of a link,
// rtnl_take_addr for an address of the link) and added to the link,
// address and route caches that discovery reads (net_state_from).
// libnl itself is the distribution's, not instrumented: the fuzzer sees
// coverage in our code only, and libnl's reads are not checked by ASan.
// Two faults of libnl-route 3.7 that only messages the kernel never sends
// reach are left out here (docs/reliability.md): it never returns from a
// route whose RTA_MULTIPATH holds a nexthop shorter than its header
// (rtnh_len 0 steps by nothing and allocates a nexthop per turn), and a
// link whose ifi_family is AF_MAX or more indexes its per-family array out
// of bounds when a cache compares it with a link of the same index.
#include <linux/rtnetlink.h>
#include <netlink/cache.h>
#include <netlink/msg.h>
#include <netlink/object.h>
#include <netlink/route/link.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "fuzz/fuzz.hpp"
#include "overlay/internal.hpp"
#include "probes/netlink_io.hpp"

namespace ov = fa::overlay;

namespace {

struct CacheFree {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
using Cache = std::unique_ptr<nl_cache, CacheFree>;
struct MsgFree {
  void operator()(nl_msg* m) const { nlmsg_free(m); }
};
using Msg = std::unique_ptr<nl_msg, MsgFree>;

Cache cache(const char* name) {
  nl_cache* c = nullptr;
  if (nl_cache_alloc_name(name, &c) < 0 || !c) std::abort();
  return Cache(c);
}

void take_link(nl_object* o, void* arg) {
  if (std::strcmp(nl_object_get_type(o), "route/link") != 0) return;
  auto& li = *static_cast<ov::LinkInfo*>(arg);
  ov::LinkInfo got = ov::rtnl_link_info(reinterpret_cast<rtnl_link*>(o));
  // The address dump that follows is filtered by this link's index.
  li.ifindex = got.ifindex;
  li.kind = got.kind;
  li.mtu = got.mtu;
  li.up = got.up;
}

// False for a route with a nexthop libnl would loop on, and for a link of
// a family beyond libnl's table.
bool libnl_copes(const nlmsghdr* h) {
  if (h->nlmsg_type == RTM_NEWLINK && h->nlmsg_len >= NLMSG_LENGTH(sizeof(ifinfomsg)))
    return static_cast<const ifinfomsg*>(NLMSG_DATA(h))->ifi_family < AF_MAX;
  if (h->nlmsg_type != RTM_NEWROUTE || h->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return true;
  int len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(rtmsg)));
  for (auto* a = RTM_RTA(static_cast<const rtmsg*>(NLMSG_DATA(h))); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if ((a->rta_type & NLA_TYPE_MASK) != RTA_MULTIPATH) continue;  // libnl masks the nested bit
    int left = static_cast<int>(RTA_PAYLOAD(a));
    for (auto* nh = static_cast<const rtnexthop*>(RTA_DATA(a)); left >= static_cast<int>(sizeof *nh);
         nh = RTNH_NEXT(nh)) {
      if (nh->rtnh_len < sizeof *nh) return false;
      left -= static_cast<int>(RTNH_ALIGN(nh->rtnh_len));
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Aligned, and padded to the alignment libnl copies (NLMSG_ALIGN of a length).
  std::vector<uint64_t> buf(size / 8 + 2);
  std::memcpy(buf.data(), data, size);
  auto* h = reinterpret_cast<nlmsghdr*>(buf.data());
  int left = static_cast<int>(size);

  Cache links = cache("route/link"), addrs = cache("route/addr"), routes = cache("route/route");
  ov::LinkInfo li;
  for (; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
    if (!libnl_copes(h)) continue;
    Msg m(nlmsg_convert(h));
    if (!m) continue;
    nlmsg_set_proto(m.get(), NETLINK_ROUTE);
    switch (h->nlmsg_type) {
      case RTM_NEWLINK:
        nl_msg_parse(m.get(), take_link, &li);
        nl_cache_parse_and_add(links.get(), m.get());
        break;
      case RTM_NEWADDR:
        ov::rtnl_take_addr(m.get(), li);
        nl_cache_parse_and_add(addrs.get(), m.get());
        break;
      case RTM_NEWROUTE:
        nl_cache_parse_and_add(routes.get(), m.get());
        break;
      default:
        // Messages of other types reach no reader: the caches refuse them.
        nl_cache_parse_and_add(links.get(), m.get());
        break;
    }
  }
  for (const auto& a : li.addrs) {
    FUZZ_CHECK(a.family == AF_INET || a.family == AF_INET6);
    FUZZ_CHECK(a.str().size() > 2);
    FUZZ_CHECK(a.network().contains(a));
  }

  fa::probes::NetState st = fa::probes::net_state_from(links.get(), addrs.get(), routes.get());
  std::set<std::string> names;
  for (const auto& l : st.links) names.insert(l.name);
  for (const auto& d : st.default_route_ifs) FUZZ_CHECK(names.count(d) == 1);
  for (const auto& l : st.links)
    for (const auto& a : l.addrs) FUZZ_CHECK(!fa::probes::ipv4_segment(a.addr, a.prefix_len).empty());
  return 0;
}
