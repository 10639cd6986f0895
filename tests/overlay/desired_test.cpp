// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "overlay/internal.hpp"
#include "overlay/overlay.hpp"

using namespace fa::overlay;
using nlohmann::json;

namespace {
const char* kA = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=";
const char* kB = "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=";

json good() {
  return json::parse(R"({
    "cluster_id": "c-1", "interface": "wg0", "address": "10.42.0.1/24", "listen_port": 51820, "mtu": 1420,
    "peers": [
      {"public_key": ")" +
                     std::string(kA) + R"(", "endpoint": "192.0.2.10:51820",
       "allowed_ips": ["10.42.0.2/32"], "persistent_keepalive": 25},
      {"public_key": ")" +
                     std::string(kB) +
                     R"(", "endpoint": "[2001:db8::1]:51820", "allowed_ips": ["10.42.0.3/32"]}
    ]})");
}

// The single error of a document with exactly one problem.
ValidationError only_error(const json& doc) {
  auto r = parse_desired(doc);
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.errors.size() == 1);
  return r.errors[0];
}
}  // namespace

TEST_CASE("a valid document parses with defaults", "[desired]") {
  auto r = parse_desired(good());
  REQUIRE(r.ok());
  const DesiredMesh& m = *r.value;
  CHECK(m.cluster_id == "c-1");
  CHECK(m.address.str() == "10.42.0.1/24");
  CHECK(m.mtu == 1420u);
  REQUIRE(m.peers.size() == 2);
  CHECK(m.peers[0].persistent_keepalive == 25);
  CHECK(m.peers[1].endpoint->str() == "[2001:db8::1]:51820");
  json min = {{"cluster_id", "c"}, {"address", "10.42.0.9"}};
  auto r2 = parse_desired(min);
  REQUIRE(r2.ok());
  CHECK(r2.value->interface == "wg0");
  CHECK(r2.value->listen_port == 51820);
  CHECK(r2.value->address.str() == "10.42.0.9/24");
  // Canonical JSON form round-trips.
  auto again = parse_desired(to_json(m));
  REQUIRE(again.ok());
  CHECK(to_json(*again.value) == to_json(m));
}

TEST_CASE("an address with a NUL or a newline inside is refused, and echoed escaped", "[desired]") {
  // JSON's \u0000 ends a C string: "10.42.0.2\u0000junk" once read as 10.42.0.2.
  json d = good();
  d["peers"][0]["allowed_ips"][0] = std::string("10.42.0.2\0junk", 14);
  auto e = only_error(d);
  CHECK(e.field == "peers[0].allowed_ips[0]");
  CHECK(e.value == "10.42.0.2\\u0000junk");
  CHECK(e.str() ==
        "peers[0].allowed_ips[0]: `10.42.0.2\\u0000junk': expected a prefix inside the overlay 10.42.0.0/24, "
        "e.g. "
        "10.42.0.2/32");
  d = good();
  d["peers"][1]["endpoint"] = "[2001:db8::1\n]:51820";
  e = only_error(d);
  CHECK(e.value == "[2001:db8::1\\u000a]:51820");
  // The same through the JSON text reader.
  auto r = parse_desired_text(
      good().dump().replace(good().dump().find("10.42.0.2/32"), 12, "10.42.0.2\\u0000/32"));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].value == "10.42.0.2\\u0000/32");
}

TEST_CASE("errors name the field, echo the value and say what is accepted", "[desired]") {
  json d = good();
  d["peers"][1]["endpoint"] = "192.0.2.10";
  auto e = only_error(d);
  CHECK(e.field == "peers[1].endpoint");
  CHECK(e.value == "192.0.2.10");
  CHECK(e.str() == "peers[1].endpoint: `192.0.2.10': expected IPv4:port or [IPv6]:port with port 1-65535");

  d = good();
  d["peers"][0]["persistent_keepalive"] = 70000;
  e = only_error(d);
  CHECK(e.field == "peers[0].persistent_keepalive");
  CHECK(e.value == "70000");
  CHECK_THAT(e.message, Catch::Contains("0-65535"));

  d = good();
  d["mtu"] = 1000;
  e = only_error(d);
  CHECK(e.field == "mtu");
  CHECK_THAT(e.message, Catch::Contains("1280-9000"));

  d = good();
  d["address"] = "10.43.0.1/24";
  e = only_error(d);
  CHECK(e.field == "address");
  CHECK_THAT(e.message, Catch::Contains("10.42.0.0/24"));

  d = good();
  d["interface"] = "this-name-is-too-long";
  CHECK(only_error(d).field == "interface");
  d["interface"] = "wg/0";
  CHECK(only_error(d).field == "interface");

  d = good();
  d["peers"][1]["public_key"] = kA;
  e = only_error(d);
  CHECK(e.field == "peers[1].public_key");
  CHECK_THAT(e.message, Catch::Contains("peers[0]"));

  d = good();
  d["peers"][1]["allowed_ips"] = {"10.42.0.2/32"};
  e = only_error(d);
  CHECK(e.field == "peers[1].allowed_ips[0]");
  CHECK_THAT(e.message, Catch::Contains("peers[0].allowed_ips[0]"));

  d = good();
  d["peers"][1]["allowed_ips"] = {"10.42.0.1/32"};
  CHECK_THAT(only_error(d).message, Catch::Contains("own address"));

  d = good();
  d["peers"][0]["allowed_ips"] = {"0.0.0.0/0"};
  CHECK(only_error(d).field == "peers[0].allowed_ips[0]");

  d = good();
  d["peers"][0]["public_key"] = "short";
  CHECK(only_error(d).field == "peers[0].public_key");

  d = good();
  d["peers"][0]["alowed_ips"] = d["peers"][0]["allowed_ips"];
  e = only_error(d);
  CHECK(e.field == "peers[0].alowed_ips");
  CHECK_THAT(e.message, Catch::Contains("unknown key"));

  d = good();
  d.erase("cluster_id");
  CHECK(only_error(d).field == "cluster_id");

  d = good();
  d["listen_port"] = "51820";
  CHECK(only_error(d).message == "expected an integer 1-65535");
}

TEST_CASE("the whole document is checked: every error is reported", "[desired]") {
  json d = good();
  d["mtu"] = 99999;
  d["peers"][0]["endpoint"] = "nope";
  d["peers"][1]["persistent_keepalive"] = -1;
  auto r = parse_desired(d);
  REQUIRE(r.errors.size() == 3);
  CHECK(r.errors[0].field == "mtu");
  CHECK(r.errors[1].field == "peers[0].endpoint");
  CHECK(r.errors[2].field == "peers[1].persistent_keepalive");
}

TEST_CASE("YAML entry point keeps types and quoted strings", "[desired]") {
  std::string y = std::string("cluster_id: c-1\naddress: 10.42.0.2/24\nlisten_port: 51821\npeers:\n") +
                  "  - public_key: " + kA +
                  "\n    endpoint: 192.0.2.10:51820\n    allowed_ips: [10.42.0.1/32]\n" +
                  "    persistent_keepalive: 25\n";
  auto r = parse_desired_text(y);
  REQUIRE(r.ok());
  CHECK(r.value->listen_port == 51821);
  CHECK(r.value->peers.at(0).persistent_keepalive == 25);
  auto bad = parse_desired_text("cluster_id: c\naddress: 10.42.0.2/24\nlisten_port: \"51821\"\n");
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].field == "listen_port");
  auto syntax = parse_desired_text("cluster_id: [\n");
  REQUIRE(syntax.errors.size() == 1);
  CHECK_THAT(syntax.errors[0].message, Catch::Contains("line"));
  ParseOptions wide;
  wide.overlay_cidr = "172.16.0.0/16";
  auto other_cidr = parse_desired_text("cluster_id: c\naddress: 172.16.5.1/16\n", wide);
  CHECK(other_cidr.ok());
}

TEST_CASE("a file's syntax errors are errors of the result, naming where", "[desired]") {
  // A number no double can hold stops nlohmann with out_of_range, not a
  // parse_error: it is bad input like any other, not an exception.
  auto big = parse_desired_text(R"({"cluster_id": "c-1", "address": "10.42.0.1/24", "mtu": 9e9999})");
  REQUIRE(big.errors.size() == 1);
  CHECK_THAT(big.errors[0].message, Catch::Contains("9e9999"));
  auto cut = parse_desired_text(R"({"cluster_id": "c-1", "address": )");
  REQUIRE(cut.errors.size() == 1);
  CHECK_THAT(cut.errors[0].message, Catch::StartsWith("JSON syntax error"));
  auto yaml = parse_desired_text("cluster_id: [\n");
  REQUIRE(yaml.errors.size() == 1);
  CHECK_THAT(yaml.errors[0].message, Catch::Contains("line 2"));
  // A large integer that a double still holds is only out of the field's range.
  auto port = parse_desired_text(R"({"cluster_id": "c-1", "address": "10.42.0.1/24", "listen_port": 1e300})");
  REQUIRE(port.errors.size() == 1);
  CHECK(port.errors[0].field == "listen_port");
}

TEST_CASE("YAML with bytes that are not UTF-8 is refused with the field named, not a crash", "[desired]") {
  auto r = parse_desired_text("cluster_id: \"c\xff\"\naddress: [1, \"\xfe\"]\n");
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].field == "cluster_id");
  CHECK(r.errors[1].field == "address");
  // The echo itself can be written as JSON (the daemon's error body).
  for (const auto& e : r.errors)
    CHECK_NOTHROW(json{{"field", e.field}, {"value", e.value}}.dump(-1, ' ', false, json::error_handler_t::replace));
}

TEST_CASE("a YAML path with a byte that is not UTF-8 is refused, not kept to throw when written", "[desired]") {
  // Only field checks that limit the characters refused such bytes: a path
  // was kept, and writing the mesh (state.json, --json) threw.
  auto r = parse_desired_text("cluster_id: c-1\naddress: 10.42.0.1/24\n"
                              "private_key_file: /etc/fabric-agent/wg\xf7.key\nnetns: /run/netns/pod\xe9\n");
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].field == "private_key_file");
  CHECK(r.errors[0].message == "expected UTF-8 text");
  CHECK(r.errors[1].field == "netns");
  // UTF-8 text outside ASCII is a path like any other.
  auto ok = parse_desired_text("cluster_id: c-1\naddress: 10.42.0.1/24\nprivate_key_file: /etc/fabric-agent/cl\xc3\xa9.key\n");
  REQUIRE(ok.ok());
  CHECK_NOTHROW(to_json(*ok.value).dump());
}

TEST_CASE("a document nested deeper than 64 levels is an error, not a stack overflow", "[desired]") {
  // mesh apply --file: the text path hands an unusual shape to the document
  // path, whose echo of a misplaced value (dump()) recursed once per level.
  std::string deep = R"({"cluster_id":)";
  for (int i = 0; i < 200000; ++i) deep += "[";
  for (int i = 0; i < 200000; ++i) deep += "]";
  deep += "}";
  ParseResult r;
  REQUIRE_NOTHROW(r = parse_desired_text(deep));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].str() ==
        "the document nests arrays and objects deeper than 64 levels (a desired state has 4)");
  // At the limit it is an ordinary type error of its field.
  std::string at = R"({"cluster_id":)" + std::string(63, '[') + std::string(63, ']') + "}";
  auto t = parse_desired_text(at);
  REQUIRE_FALSE(t.ok());
  CHECK(t.errors[0].field == "cluster_id");
}

TEST_CASE("duplicate keys and allowed IPs are found among thousands, naming the first holder", "[desired]") {
  // 40 peers with 100 allowed IPs each: the duplicate tables outgrow their
  // first size several times; the repeats come last.
  json doc = good();
  doc["address"] = "10.42.0.1/16";
  json peers = json::array();
  for (int i = 0; i < 40; ++i) {
    // The same first 8 bytes (what the key hash reads) for every key: all
    // collide, only the whole key tells them apart.
    Key k{};
    k.fill(0x5a);
    k[8] = static_cast<uint8_t>(i + 1);
    json ips = json::array();
    for (int j = 0; j < 100; ++j)
      ips.push_back("10.42." + std::to_string(i + 1) + "." + std::to_string(j + 1) + "/32");
    peers.push_back(
        {{"public_key", key_to_base64(k)}, {"endpoint", "192.0.2.1:51820"}, {"allowed_ips", ips}});
  }
  doc["peers"] = peers;
  ParseOptions wide;
  wide.overlay_cidr = "10.42.0.0/16";
  auto ok = parse_desired(doc, wide);
  REQUIRE(ok.ok());
  CHECK(ok.value->peers.size() == 40);
  doc["peers"][39]["public_key"] = doc["peers"][17]["public_key"];
  doc["peers"][39]["allowed_ips"][99] = "10.42.6.6/32";  // peers[5].allowed_ips[5]
  auto r = parse_desired(doc, wide);
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].field == "peers[39].public_key");
  CHECK(r.errors[0].message == "duplicate: same key as peers[17]; public keys must be unique");
  CHECK(r.errors[1].field == "peers[39].allowed_ips[99]");
  CHECK(r.errors[1].message == "duplicate: already routed to peers[5].allowed_ips[5]; one node per address");
}
