// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "overlay/desired_raw.hpp"
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
  const DesiredMesh& m = *r.mesh;
  CHECK(m.cluster_id == "c-1");
  CHECK(m.address.str() == "10.42.0.1/24");
  CHECK(m.mtu == 1420u);
  REQUIRE(m.peers.size() == 2);
  CHECK(m.peers[0].persistent_keepalive == 25);
  CHECK(m.peers[1].endpoint->str() == "[2001:db8::1]:51820");
  json min = {{"cluster_id", "c"}, {"address", "10.42.0.9"}};
  auto r2 = parse_desired(min);
  REQUIRE(r2.ok());
  CHECK(r2.mesh->interface == "wg0");
  CHECK(r2.mesh->listen_port == 51820);
  CHECK(r2.mesh->address.str() == "10.42.0.9/24");
  // Canonical JSON form round-trips.
  auto again = parse_desired(to_json(m));
  REQUIRE(again.ok());
  CHECK(to_json(*again.mesh) == to_json(m));
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
  auto r = parse_desired_json(
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
  auto r = parse_desired_yaml(y);
  REQUIRE(r.ok());
  CHECK(r.mesh->listen_port == 51821);
  CHECK(r.mesh->peers.at(0).persistent_keepalive == 25);
  auto bad = parse_desired_yaml("cluster_id: c\naddress: 10.42.0.2/24\nlisten_port: \"51821\"\n");
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].field == "listen_port");
  auto syntax = parse_desired_yaml("cluster_id: [\n");
  REQUIRE(syntax.errors.size() == 1);
  CHECK_THAT(syntax.errors[0].message, Catch::Contains("line"));
  ParseOptions wide;
  wide.overlay_cidr = "172.16.0.0/16";
  auto other_cidr = parse_desired_yaml("cluster_id: c\naddress: 172.16.5.1/16\n", wide);
  CHECK(other_cidr.ok());
}

TEST_CASE("JSON text is read without a document when it has the usual shape, with the same result",
          "[desired]") {
  const std::string a = kA, b = kB;
  auto peer = [&](const std::string& key, const std::string& rest) {
    return R"({"public_key": ")" + key + R"(", )" + rest + "}";
  };
  const std::string head = R"({"cluster_id": "c-1", "interface": "wg0", "address": "10.42.0.1/24", )";
  const std::string p0 = peer(a, R"("endpoint": "192.0.2.10:51820", "allowed_ips": ["10.42.0.2/32"])");
  const std::string p1 = peer(b, R"("endpoint": "[2001:db8::1]:51820", "allowed_ips": ["10.42.0.3/32"],
                                     "persistent_keepalive": 25)");
  auto doc = [&](const std::string& fields, const std::string& peers) {
    return head + fields + R"("peers": [)" + peers + "]}";
  };
  // Read by the SAX path: valid documents, and documents whose every value
  // sits where it belongs even when it is wrong.
  const std::vector<std::string> usual = {
      doc("", p0 + "," + p1),
      doc(R"("listen_port": 51821, "mtu": 1420, "netns": "pod1", "private_key_file": null, )", p0),
      R"({"cluster_id": "c", "address": "10.42.0.9"})",
      R"({"cluster_id": "c", "address": "10.42.0.9", "peers": null})",
      doc(R"("listen_port": "51820", "mtu": 99999, )", p0),
      doc(R"("listen_port": 18446744073709551615, "netns": "a/b", )", p0),
      doc("", peer(a, R"("endpoint": "192.0.2.10", "allowed_ips": ["10.42.0.2/32", 5, null, "0.0.0.0/0"],
                        "persistent_keepalive": -1)")),
      doc("", p0 + "," + peer(a, R"("allowed_ips": ["10.42.0.2/32", "10.42.0.1/32"], "endpoint": null)")),
      doc("", peer("short", R"("allowed_ips": null)") + "," + peer(b, R"("allowed_ips": [])")),
      R"({"cluster_id": null, "interface": "this-name-is-too-long", "address": 7, "peers": [{"endpoint": 1}]})",
      // Peers checked as they are read (address before them) and kept
      // (address after them, or none): errors among the peers, one covering
      // this node's address, duplicates, and top-level errors after the list.
      doc("", p0 + "," + peer(b, R"("allowed_ips": ["10.42.0.1/32", "10.42.0.2/32", "10.42.0.4/32"],
                                   "endpoint": "x:1")") +
                  "," + peer(a, R"("allowed_ips": ["10.42.0.5/32"])")),
      R"({"cluster_id": "c", "address": "10.42.0.1/24", "peers": [)" + p0 + "," +
          peer(b, R"("allowed_ips": ["10.42.0.1/32"], "persistent_keepalive": 70000)") +
          R"(], "mtu": 99999, "interface": "a/b"})",
      R"({"cluster_id": "c", "peers": [)" + p0 + "," + peer(b, R"("allowed_ips": ["10.42.0.1/32"])") +
          R"(], "address": "10.42.0.1/24"})",
      R"({"cluster_id": "c", "peers": [)" + p0 + "," + peer(a, R"("allowed_ips": ["10.42.0.2/32"])") + "]}",
      R"({"cluster_id": "c", "address": "10.42.0.0/24", "peers": [)" +
          peer(b, R"("allowed_ips": ["10.42.0.0/24"])") + "]}",
  };
  // Left to the document: anything else.
  const std::vector<std::string> other = {
      doc(R"("colour": "blue", )", p0),
      doc("", peer(a, R"("alowed_ips": ["10.42.0.2/32"], "allowed_ips": ["10.42.0.2/32"])")),
      doc(R"("mtu": 1420.5, )", p0),
      doc(R"("listen_port": true, )", p0),
      doc(R"("interface": {"name": "wg0"}, )", p0),
      doc(R"("cluster_id": "x", )", p0),  // the key is repeated: the document keeps the last value
      doc("", peer(a, R"("endpoint": ["192.0.2.10:51820"], "allowed_ips": ["10.42.0.2/32"])")),
      doc("", peer(a, R"("allowed_ips": "10.42.0.2/32")")),
      doc("", peer(a, R"("allowed_ips": [["10.42.0.2/32"]])")),
      doc("", R"("not a peer", 7)"),
      R"({"cluster_id": "c", "address": "10.42.0.9", "peers": {"a": 1}})",
      R"(["cluster_id"])",
      R"("c")",
  };
  auto same = [](const ParseResult& x, const ParseResult& y) {
    REQUIRE(x.ok() == y.ok());
    REQUIRE(x.errors.size() == y.errors.size());
    for (size_t i = 0; i < x.errors.size(); ++i) CHECK(x.errors[i].str() == y.errors[i].str());
    if (x.ok()) CHECK(to_json(*x.mesh) == to_json(*y.mesh));
  };
  for (const auto& t : usual) {
    INFO(t);
    auto fast = parse_desired_json_sax(t, {});
    REQUIRE(fast.has_value());
    same(*fast, parse_desired(json::parse(t)));
    same(parse_desired_json(t), parse_desired(json::parse(t)));
  }
  CHECK(parse_desired_json(usual[0]).ok());
  CHECK(parse_desired_json(usual[4]).errors.size() == 2);
  // The own-address error stands among the peer's, wherever `address` is.
  for (size_t t : {10u, 11u, 12u}) {
    INFO(usual[t]);
    bool own = false;
    for (const auto& e : parse_desired_json(usual[t]).errors)
      own |= e.message.find("covers this node's own address 10.42.0.1/32") != std::string::npos;
    CHECK(own);
  }
  CHECK(parse_desired_json(usual[10]).errors.size() ==
        4);                                          // own address, duplicate IP, endpoint, duplicate key
  auto late = parse_desired_json(usual[11]).errors;  // top-level errors first, in field order
  REQUIRE(late.size() == 4);
  CHECK(late[0].field == "interface");
  CHECK(late[1].field == "mtu");
  CHECK(late[2].field == "peers[1].allowed_ips[0]");
  CHECK(late[3].field == "peers[1].persistent_keepalive");
  for (const auto& t : other) {
    INFO(t);
    CHECK_FALSE(parse_desired_json_sax(t, {}).has_value());
    same(parse_desired_json(t), parse_desired(json::parse(t)));
  }
  CHECK(parse_desired_json(other[5]).mesh->cluster_id == "x");
  // A syntax error is json::parse's, with its byte offset.
  for (const char* bad : {R"({"cluster_id": "c", )", R"({"cluster_id": "c"} x)", ""}) {
    INFO(bad);
    CHECK_FALSE(parse_desired_json_sax(bad, {}).has_value());
    CHECK_THROWS_AS(parse_desired_json(bad), json::parse_error);
  }
}

TEST_CASE("the SAX reader hands the peers over one at a time when its stream takes them", "[desired]") {
  using namespace fa::overlay::detail;
  struct Recorder final : PeerStream {
    bool take = true;
    std::string address_at_begin;
    std::vector<size_t> index;
    std::vector<std::string> keys, first_ip;
    bool begin(const RawMesh& so_far) override {
      address_at_begin = std::string(so_far.address.s);
      return take;
    }
    void peer(size_t i, const RawPeer& p) override {
      index.push_back(i);
      keys.emplace_back(p.public_key.s);
      first_ip.emplace_back(p.allowed_ips.items.empty() ? "" : p.allowed_ips.items[0].s);
    }
  };
  std::string text = R"({"cluster_id": "c", "address": "10.42.0.1/24", "peers": [)";
  for (int i = 0; i < 40; ++i)
    text += std::string(i ? "," : "") + R"({"public_key": "key-)" + std::to_string(i) +
            R"(", "allowed_ips": ["10.42.0.)" + std::to_string(i + 2) + R"(/32"]})";
  text += R"(], "mtu": 1420})";

  Recorder taken;
  RawMesh m;
  REQUIRE(read_json_sax(text, m, nullptr, &taken, 40));
  CHECK(m.peers_streamed);
  CHECK(m.peers.is_list());
  CHECK(m.peers.items.size() <= 1);  // one entry, reused
  CHECK(taken.address_at_begin == "10.42.0.1/24");
  REQUIRE(taken.index.size() == 40);
  for (size_t i = 0; i < 40; ++i) {
    CHECK(taken.index[i] == i);
    CHECK(taken.keys[i] == "key-" + std::to_string(i));
    CHECK(taken.first_ip[i] == "10.42.0." + std::to_string(i + 2) + "/32");
  }
  CHECK(m.mtu.u == 1420);  // fields after the list are read as usual

  Recorder refused;
  refused.take = false;
  RawMesh kept;
  REQUIRE(read_json_sax(text, kept, nullptr, &refused, 40));
  CHECK_FALSE(kept.peers_streamed);
  CHECK(refused.index.empty());
  REQUIRE(kept.peers.items.size() == 40);
  CHECK(kept.peers.items[39].public_key.s == "key-39");
}

TEST_CASE("a number no double can hold is an error of its field, not an exception", "[desired]") {
  // json::parse refuses such a number with out_of_range (not parse_error):
  // mesh apply used to let it escape, exit 1 with no field named.
  const std::string a = kA, b = kB;
  const std::string head = R"({"cluster_id": "c-1", "interface": "wg0", "address": "10.42.0.1/24", )";
  auto peer = [](const std::string& key, const std::string& rest) {
    return R"({"public_key": ")" + key + R"(", "endpoint": "192.0.2.10:51820", )" + rest + "}";
  };
  const std::string p0 = peer(a, R"("allowed_ips": ["10.42.0.2/32"])");
  const struct {
    std::string text, field, value;
  } cases[] = {
      {head + R"("listen_port": 5e820, "peers": []})", "listen_port", "5e820"},
      {head + R"("peers": [)" + p0 + "," +
           peer(b, R"("allowed_ips": ["10.42.0.3/32"], "persistent_keepalive": -1e400)") + "]}",
       "peers[1].persistent_keepalive", "-1e400"},
      {head + R"("peers": [)" + peer(a, R"("allowed_ips": ["10.42.0.2/32", 1E999])") + "]}",
       "peers[0].allowed_ips[1]", "1E999"},
      // After a key the SAX reader leaves to the document, and inside one.
      {head + R"("colour": "blue", "mtu": 9e9999, "peers": []})", "mtu", "9e9999"},
      {head + R"("x": {"y": [1, 2e999]}, "peers": []})", "x.y[1]", "2e999"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    CHECK_THROWS_AS(json::parse(c.text), json::out_of_range);
    ParseResult r;
    REQUIRE_NOTHROW(r = parse_desired_json(c.text));
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].field == c.field);
    CHECK(r.errors[0].value == c.value);
    CHECK(r.errors[0].str() ==
          c.field + ": `" + c.value +
              "': number out of range: JSON numbers are read as 64-bit integers or doubles, "
              "and this one fits neither");
  }
  // A large integer that a double still holds is only out of the field's range.
  auto big = parse_desired_json(head + R"("listen_port": 1e300, "peers": []})");
  REQUIRE(big.errors.size() == 1);
  CHECK(big.errors[0].field == "listen_port");
  CHECK(big.errors[0].message.find("number out of range") == std::string::npos);
}

TEST_CASE("a document nested deeper than 64 levels is an error, not a stack overflow", "[desired]") {
  // mesh apply --file: the text path hands an unusual shape to the document
  // path, whose echo of a misplaced value (dump()) recursed once per level.
  std::string deep = R"({"cluster_id":)";
  for (int i = 0; i < 200000; ++i) deep += "[";
  for (int i = 0; i < 200000; ++i) deep += "]";
  deep += "}";
  ParseResult r;
  REQUIRE_NOTHROW(r = parse_desired_json(deep));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].str() ==
        "the document nests arrays and objects deeper than 64 levels (a desired state has 4)");
  // At the limit it is an ordinary type error of its field.
  std::string at = R"({"cluster_id":)" + std::string(63, '[') + std::string(63, ']') + "}";
  auto t = parse_desired_json(at);
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
  CHECK(ok.mesh->peers.size() == 40);
  doc["peers"][39]["public_key"] = doc["peers"][17]["public_key"];
  doc["peers"][39]["allowed_ips"][99] = "10.42.6.6/32";  // peers[5].allowed_ips[5]
  auto r = parse_desired(doc, wide);
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].field == "peers[39].public_key");
  CHECK(r.errors[0].message == "duplicate: same key as peers[17]; public keys must be unique");
  CHECK(r.errors[1].field == "peers[39].allowed_ips[99]");
  CHECK(r.errors[1].message == "duplicate: already routed to peers[5].allowed_ips[5]; one node per address");
  // The text path (SAX) finds the same.
  auto t = parse_desired_json(doc.dump(), wide);
  REQUIRE(t.errors.size() == 2);
  CHECK(t.errors[0].str() == r.errors[0].str());
  CHECK(t.errors[1].str() == r.errors[1].str());
}
