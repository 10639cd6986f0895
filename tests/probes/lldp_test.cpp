// SPDX-License-Identifier: Apache-2.0
// lldpcli's json0 answers, as Debian 12's lldpcli 1.0.16 prints them for
// `show neighbors` (the first one captured from two lldpd instances across
// veth pairs), decoded into neighbours per interface.
#include <catch2/catch.hpp>

#include "probes/lldp.hpp"

using namespace fa::probes;

namespace {

// Two ports of a host, each cabled to a port of switch leaf-07.
const char* kTwoPorts = R"({
  "lldp": [ { "interface": [
    { "name": "vethA", "via": "LLDP", "rid": "1", "age": "0 day, 00:00:46",
      "chassis": [ { "id": [ { "type": "mac", "value": "7a:ac:5d:92:c6:07" } ],
                     "name": [ { "value": "leaf-07" } ],
                     "descr": [ { "value": "Debian GNU/Linux 12 (bookworm) Linux 6.18.44 x86_64" } ],
                     "mgmt-ip": [ { "value": "fe80::78ac:5dff:fe92:c607" } ],
                     "mgmt-iface": [ { "value": "2" } ],
                     "capability": [ { "type": "Bridge", "enabled": false }, { "type": "Router", "enabled": false },
                                     { "type": "Wlan", "enabled": false }, { "type": "Station", "enabled": true } ] } ],
      "port": [ { "id": [ { "type": "ifname", "value": "swp7" } ], "descr": [ { "value": "swp7" } ],
                  "ttl": [ { "value": "4" } ] } ] },
    { "name": "vethB", "via": "LLDP", "rid": "1", "age": "0 day, 00:00:46",
      "chassis": [ { "id": [ { "type": "mac", "value": "7a:ac:5d:92:c6:07" } ],
                     "name": [ { "value": "leaf-07" } ] } ],
      "port": [ { "id": [ { "type": "ifname", "value": "swp8" } ], "descr": [ { "value": "swp8" } ],
                  "ttl": [ { "value": "4" } ] } ] } ] } ]
})";

}  // namespace

TEST_CASE("lldpcli json0: one neighbour per port, chassis and port with their subtypes", "[lldp]") {
  auto r = parse_lldpcli_neighbors(kTwoPorts);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  REQUIRE(r->at("vethA").size() == 1);
  const LldpNeighbor& a = r->at("vethA")[0];
  CHECK(a.chassis_id == "7a:ac:5d:92:c6:07");
  CHECK(a.chassis_id_subtype == "mac");
  CHECK(a.system_name == "leaf-07");
  CHECK(a.port_id == "swp7");
  CHECK(a.port_id_subtype == "ifname");
  CHECK(a.port_descr == "swp7");
  CHECK(r->at("vethB")[0].port_id == "swp8");
}

TEST_CASE("lldpcli json0: no neighbour anywhere, several on one port, a switch that sends no name",
          "[lldp]") {
  auto none = parse_lldpcli_neighbors(R"({ "lldp": [ { } ] })");
  REQUIRE(none.ok());
  CHECK(none->empty());

  // lldpcli prints one interface entry per neighbour: a port behind an
  // unmanaged bridge hears two. The second sends neither a system name nor
  // a port description, and names its port by MAC.
  auto two = parse_lldpcli_neighbors(R"({ "lldp": [ { "interface": [
    { "name": "ens10np0", "via": "LLDP",
      "chassis": [ { "id": [ { "type": "mac", "value": "0c:42:a1:00:00:01" } ], "name": [ { "value": "leaf-01" } ] } ],
      "port": [ { "id": [ { "type": "ifname", "value": "Ethernet1/7" } ], "descr": [ { "value": "to gpu-07 rail 0" } ] } ] },
    { "name": "ens10np0", "via": "LLDP",
      "chassis": [ { "id": [ { "type": "local", "value": "FDO21120U8N" } ] } ],
      "port": [ { "id": [ { "type": "mac", "value": "0c:42:a1:00:00:99" } ] } ] } ] } ] })");
  REQUIRE(two.ok());
  REQUIRE(two->at("ens10np0").size() == 2);
  CHECK(two->at("ens10np0")[0].port_id == "Ethernet1/7");
  CHECK(two->at("ens10np0")[0].port_descr == "to gpu-07 rail 0");
  const LldpNeighbor& b = two->at("ens10np0")[1];
  CHECK(b.chassis_id == "FDO21120U8N");
  CHECK(b.chassis_id_subtype == "local");
  CHECK(b.system_name.empty());
  CHECK(b.port_id == "0c:42:a1:00:00:99");
  CHECK(b.port_id_subtype == "mac");
  CHECK(b.port_descr.empty());
}

TEST_CASE("lldpcli json0: an answer that is not its document is an error, not an empty list", "[lldp]") {
  CHECK_FALSE(parse_lldpcli_neighbors("").ok());
  CHECK_FALSE(parse_lldpcli_neighbors("unable to connect").ok());
  // lldpcli's plain "json" layout (objects keyed by name) is not json0.
  auto plain = parse_lldpcli_neighbors(R"({ "lldp": { "interface": { "vethA": { "via": "LLDP" } } } })");
  REQUIRE_FALSE(plain.ok());
  CHECK(plain.error().message == "lldpcli's answer is not its json0 document (no \"lldp\" list)");
  auto noname = parse_lldpcli_neighbors(R"({ "lldp": [ { "interface": [ { "via": "LLDP" } ] } ] })");
  REQUIRE_FALSE(noname.ok());
  CHECK(noname.error().message == "lldpcli's answer: an interface without a name");
}
