// SPDX-License-Identifier: Apache-2.0
// `fabric-agent slurm`'s decisions on data: the name of a fabric in Slurm,
// the node names, which agent's status is refused and why, and the two
// files. tests/agent/slurm_netns.sh loads the files into a real slurmctld.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>

#include "agent/slurm_logic.hpp"
#include "common/fs.hpp"

using namespace fa::agent::slurm;
using nlohmann::json;

namespace {

json status(const std::string& host, const json& fabric) {
  return {{"agent", {{"version", "0"}, {"hostname", host}}}, {"inspect", {{"fabric", fabric}, {"warnings", json::array()}}}};
}
json roce(const std::string& provider) {
  return {{"kind", "roce"}, {"id", "roce:" + provider + ":10.20.0.0/16"}, {"provider_id", provider}};
}

const std::vector<Problem>& problems_of(const std::variant<Plan, std::vector<Problem>>& r) {
  REQUIRE(std::holds_alternative<std::vector<Problem>>(r));
  return std::get<std::vector<Problem>>(r);
}

}  // namespace

TEST_CASE("fabric_name: fab_ + readable part + the first 8 hex digits of SHA-256(id), as docs/slurm.md says") {
  // printf %s ID | sha256sum | cut -c1-8
  CHECK(fabric_name("roce:p1:10.20.0.0/16") == "fab_roce_p1_548dbfed");
  CHECK(fabric_name("roce:p2:10.20.0.0/16") == "fab_roce_p2_cf5415d8");
  CHECK(fabric_name("ib:fe80000000000000:0002c90300a1b2c3") == "fab_ib_f78af73f");
  CHECK(fabric_name("roce:Acme DC-1 / Frankfurt (east):10.0.0.0/24") == "fab_roce_acme_dc_1_frankf_361951ba");
  CHECK(fabric_name("x") == "fab_2d711642");
}

TEST_CASE("fabric_name: only [a-z0-9_] whatever the id, and different ids get different names") {
  const std::regex ok("^fab_[a-z0-9_]*[a-z0-9]$");
  std::set<std::string> names;
  const std::vector<std::string> ids = {
      "roce:p1:10.20.0.0/16", "roce:p1:10.21.0.0/16", "roce:p1:10.0.0.0/24,10.0.1.0/24", "roce::10.0.0.0/24",
      "roce:___:10.0.0.0/24", "roce:a|b&c*[d](e),f:10.0.0.0/24", "roce:ÄÖÜ\n#x:1.0.0.0/8", "roce:", "roce:p1",
      "ib:fe80000000000000:0002c90300a1b2c3", "ib:fe80000000000000:0002c90300a1b2c4", "", "IB:x", "weird kind:1"};
  for (const auto& id : ids) {
    const std::string n = fabric_name(id);
    INFO(id << " -> " << n);
    CHECK(std::regex_match(n, ok));
    CHECK(n.find("__") == std::string::npos);
    CHECK(n.size() <= std::string("fab_roce_").size() + 16 + 1 + 8);
    CHECK(fabric_name(id) == n);  // stable
    names.insert(n);
  }
  CHECK(names.size() == ids.size());
  // A provider of operators only: nothing readable is left, only the hash.
  CHECK(fabric_name("roce:___:10.0.0.0/24").rfind("fab_roce_", 0) == 0);
  CHECK(fabric_name("roce:___:10.0.0.0/24").size() == std::string("fab_roce_").size() + 8);
}

TEST_CASE("valid_node_name: what Slurm's NodeName and hostlists take") {
  for (const char* good : {"n1", "gpu-node-017", "node_3", "h1.example.com", "_x", "1a"}) CHECK(valid_node_name(good));
  for (const char* bad : {"", "n[1-2]", "n1,n2", "a b", "n=1", "#n", "-n", ".n", "ALL", "default", "n\xc3\xa4", "n\"1"})
    CHECK_FALSE(valid_node_name(bad));
}

TEST_CASE("plan: four agents on two fabrics, node names from the host names' short form") {
  std::vector<Input> in = {{"http://a:1", "", status("n3.dc.example", roce("p2"))},
                           {"http://a:2", "", status("n1", roce("p1"))},
                           {"http://a:3", "", status("n4", roce("p2"))},
                           {"http://a:4", "", status("n2.dc.example", roce("p1"))}};
  auto r = plan(in);
  REQUIRE(std::holds_alternative<Plan>(r));
  const Plan& p = std::get<Plan>(r);
  REQUIRE(p.fabrics.size() == 2);
  CHECK(p.fabrics[0].name == "fab_roce_p1_548dbfed");
  CHECK(p.fabrics[0].id == "roce:p1:10.20.0.0/16");
  CHECK(p.fabrics[0].nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(p.fabrics[1].name == "fab_roce_p2_cf5415d8");
  CHECK(p.fabrics[1].nodes == std::vector<std::string>{"n3", "n4"});
  REQUIRE(p.nodes.size() == 4);
  CHECK(p.nodes[0].name == "n3");
  CHECK(p.nodes[0].agent == "http://a:1");
  CHECK(p.nodes[0].feature == "fab_roce_p2_cf5415d8");

  // The agents' order changes nothing in the files.
  std::vector<Input> reversed(in.rbegin(), in.rend());
  const auto rq = plan(reversed);
  const Plan& q = std::get<Plan>(rq);
  CHECK(render_topology(q) == render_topology(p));
  CHECK(render_features(q) == render_features(p));

  // NODE=URL names the node, whatever the host name.
  in[1].node = "gpu001";
  const auto ro = plan(in);
  const Plan& o = std::get<Plan>(ro);
  CHECK(o.fabrics[0].nodes == std::vector<std::string>{"gpu001", "n2"});
}

TEST_CASE("plan: every agent's problem, each naming the agent and the field") {
  json no_id = {{"kind", "infiniband"}, {"id", nullptr}};
  json st_no_id = status("n5", no_id);
  st_no_id["inspect"]["warnings"] = {"fabric.id is null: SMInfo could not be read from the SM at LID 1: timeout"};
  json no_inspect = status("n6", roce("p1"));
  no_inspect["inspect"] = nullptr;
  no_inspect["warnings"] = {"discovery failed: sysfs: /sys/class/infiniband: Permission denied"};
  json no_host = status("x", roce("p1"));
  no_host["agent"].erase("hostname");
  std::vector<Input> in = {{"http://ok:1", "", status("n1", roce("p1"))},
                           {"http://none:1", "", status("n2", {{"kind", "none"}, {"id", nullptr}})},
                           {"http://noid:1", "", st_no_id},
                           {"http://noinspect:1", "", no_inspect},
                           {"http://nohost:1", "", no_host},
                           {"http://badhost:1", "", status("n[7]", roce("p1"))},
                           {"http://dup:1", "", status("n1.other", roce("p1"))},
                           {"http://badnode:1", "all", status("n8", roce("p1"))},
                           {"http://notjson:1", "", json::value_t::discarded}};
  const auto result = plan(in);
  const auto& ps = problems_of(result);
  auto find = [&](const std::string& agent) -> const Problem& {
    for (const auto& p : ps)
      if (p.agent == agent) return p;
    FAIL("no problem for " << agent);
    throw 0;
  };
  CHECK(ps.size() == 8);
  CHECK(find("http://none:1").field == "inspect.fabric.kind");
  CHECK_THAT(find("http://none:1").message, Catch::Contains("\"none\"") && Catch::Contains("no RDMA fabric"));
  CHECK(find("http://noid:1").field == "inspect.fabric.id");
  CHECK_THAT(find("http://noid:1").message, Catch::Contains("infiniband") && Catch::Contains("SMInfo could not be read"));
  CHECK(find("http://noinspect:1").field == "inspect");
  CHECK_THAT(find("http://noinspect:1").message, Catch::Contains("Permission denied"));
  CHECK(find("http://nohost:1").field == "agent.hostname");
  CHECK_THAT(find("http://nohost:1").message, Catch::Contains("--agent NODE=URL"));
  CHECK(find("http://badhost:1").field == "agent.hostname");
  CHECK_THAT(find("http://badhost:1").message, Catch::Contains("`n[7]'") && Catch::Contains("accepted:"));
  CHECK(find("http://dup:1").field == "agent.hostname");
  CHECK_THAT(find("http://dup:1").message, Catch::Contains("`n1'") && Catch::Contains("http://ok:1"));
  CHECK(find("http://badnode:1").field == "--agent NODE=URL");
  CHECK_THAT(find("http://badnode:1").message, Catch::Contains("not ALL or DEFAULT"));
  CHECK(find("http://notjson:1").message == "its status is not a JSON object");
}

TEST_CASE("plan: one daemon (agent.instance) under two URLs is refused, whatever node names it is given") {
  json a = status("n1", roce("p1"));
  a["agent"]["instance"] = "3f2a9c1d0b7e";
  json b = status("n2", roce("p1"));
  b["agent"]["instance"] = "77aa00bb11cc";
  const auto ok = plan({{"http://10.0.0.1:7471", "", a}, {"http://10.0.0.2:7471", "", b}});
  CHECK(std::holds_alternative<Plan>(ok));
  const auto r = plan({{"http://10.0.0.1:7471", "", a}, {"http://h1.example:7471", "gpu001", a}});
  const auto& ps = problems_of(r);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].agent == "http://h1.example:7471");
  CHECK(ps[0].field == "agent.instance");
  CHECK_THAT(ps[0].message, Catch::Contains("http://10.0.0.1:7471") && Catch::Contains("twice"));
}

TEST_CASE("render_topology: one switch per fabric, nothing above them, ids only in comments") {
  json evil = roce("p1\nSwitchName=root Switches=fab_x");
  std::vector<Input> in = {{"u1", "", status("n1", roce("p1"))},
                           {"u2", "", status("n2", roce("p1"))},
                           {"u3", "", status("n3", evil)}};
  const auto rp = plan(in);
  const Plan& p = std::get<Plan>(rp);
  const std::string t = render_topology(p);
  std::vector<std::string> config;  // the lines Slurm's parser reads, comments stripped
  size_t from = 0;
  while (from < t.size()) {
    size_t nl = t.find('\n', from);
    std::string line = t.substr(from, nl - from);
    from = nl == std::string::npos ? t.size() : nl + 1;
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(' ') != std::string::npos) config.push_back(line);
  }
  REQUIRE(config.size() == 2);
  CHECK(config[0] == "SwitchName=fab_roce_p1_548dbfed Nodes=n1,n2");
  CHECK(config[1] == "SwitchName=" + fabric_name(evil["id"]) + " Nodes=n3");
  CHECK(t.find("Switches=") == t.find("Switches=fab_x"));  // only inside the (sanitised) comment
  CHECK(t.find("# roce:p1?SwitchName=root Switches=fab_x:10.20.0.0/16 (1 node(s))") != std::string::npos);
}

TEST_CASE("render_features: a script sh parses, one fabric line per fabric, the constraint spelled out") {
  std::vector<Input> in = {{"u1", "", status("n1", roce("p1"))},
                           {"u2", "", status("n2", roce("p1"))},
                           {"u3", "", status("n3", roce("p2"))}};
  const auto rp = plan(in);
  const Plan& p = std::get<Plan>(rp);
  const std::string s = render_features(p);
  CHECK(s.rfind("#!/bin/sh\n", 0) == 0);
  CHECK(s.find("\nfabric fab_roce_p1_548dbfed n1 n2\n") != std::string::npos);
  CHECK(s.find("\nfabric fab_roce_p2_cf5415d8 n3\n") != std::string::npos);
  CHECK(s.find("--constraint='[fab_roce_p1_548dbfed|fab_roce_p2_cf5415d8]'") != std::string::npos);
  CHECK(s.find("set -eu\n") != std::string::npos);
  // The real shell parses it (the netns test runs it against scontrol).
  auto dir = std::filesystem::temp_directory_path() / ("fa-slurm-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "features.sh").string();
  REQUIRE(fa::write_file_atomic(path, s, 0755));
  const std::string cmd = "sh -n " + path;
  CHECK(std::system(cmd.c_str()) == 0);
  std::filesystem::remove_all(dir);

  json j = to_json(p);
  CHECK(j["fabrics"].size() == 2);
  CHECK(j["fabrics"][0]["nodes"] == json({"n1", "n2"}));
  CHECK(j["nodes"][2]["feature"] == "fab_roce_p2_cf5415d8");
  CHECK(j["nodes"][2]["agent"] == "u3");
}
