// SPDX-License-Identifier: Apache-2.0
// The files the packages ship next to the binary must not drift from it:
// - packaging/agent.yaml (the conffile) parses with the real loader, both as
//   shipped (every key commented out) and with every key uncommented; the
//   values it shows are the built-in defaults; it lists exactly the keys the
//   loader's embedded defaults list, so a key added to the loader fails here
//   until the shipped file documents it.
// - packaging/fabric-agent.8 documents every subcommand of the binary's table
//   and no subcommand the binary does not have, and the same for the
//   actions of `mesh`.
#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/config.hpp"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kShippedConfig = std::string(FA_SOURCE_DIR) + "/packaging/agent.yaml";
const std::string kManPage = std::string(FA_SOURCE_DIR) + "/packaging/fabric-agent.8";

// A commented-out setting is '#' followed directly by the YAML line, keeping
// its indentation ("#overlay:", "#  mtu: 1420"); prose comments never start
// with "lowercase_name:". Returns the document with those lines uncommented.
std::string uncomment_settings(const std::string& text, int* settings) {
  static const std::regex kSetting(R"(^#( *[a-z][a-z_]*:( .*)?)$)");
  std::istringstream in(text);
  std::string line, out;
  *settings = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kSetting)) {
      out += m[1].str() + "\n";
      ++*settings;
    } else {
      out += line + "\n";
    }
  }
  return out;
}

void key_paths(const YAML::Node& n, const std::string& prefix, std::set<std::string>& out) {
  if (!n.IsMap()) return;
  for (const auto& kv : n) {
    std::string path = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
    out.insert(path);
    key_paths(kv.second, path, out);
  }
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  INFO(cmd << " -> " << out);
  REQUIRE(status == 0);
  return out;
}

}  // namespace

TEST_CASE("the shipped agent.yaml parses as shipped and gives the built-in defaults", "[packaging]") {
  auto r = fa::parse_config(slurp(kShippedConfig), kShippedConfig);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  fa::Config want;
  want.source = kShippedConfig;
  CHECK(*r == want);
}

TEST_CASE("the shipped agent.yaml with every key uncommented parses to the built-in defaults", "[packaging]") {
  int settings = 0;
  const std::string active = uncomment_settings(slurp(kShippedConfig), &settings);
  CHECK(settings > 20);
  auto r = fa::parse_config(active, "agent.yaml (uncommented)");
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  fa::Config want;
  want.source = "agent.yaml (uncommented)";
  CHECK(*r == want);
}

TEST_CASE("the shipped agent.yaml lists exactly the loader's keys", "[packaging]") {
  int settings = 0;
  std::set<std::string> shipped, loader;
  key_paths(YAML::Load(uncomment_settings(slurp(kShippedConfig), &settings)), "", shipped);
  key_paths(YAML::Load(std::string(fa::kEmbeddedDefaultsYaml)), "", loader);
  for (const auto& k : loader) {
    INFO("key known to the loader but missing from packaging/agent.yaml: " << k);
    CHECK(shipped.count(k) == 1);
  }
  for (const auto& k : shipped) {
    INFO("key in packaging/agent.yaml that the loader's defaults do not list: " << k);
    CHECK(loader.count(k) == 1);
  }
}

TEST_CASE("the man page documents exactly the binary's subcommands", "[packaging]") {
  const char* bin = std::getenv("FA_BINARY");
  REQUIRE(bin != nullptr);
  // `fabric-agent --help` prints the command table: "  name   summary".
  std::set<std::string> table;
  {
    std::istringstream in(run(std::string("'") + bin + "' --help"));
    static const std::regex kRow(R"(^  ([a-z][a-z-]*) +\S.*$)");
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_match(line, m, kRow)) table.insert(m[1].str());
  }
  REQUIRE(table.count("version") == 1);
  // Each subcommand is one ".SS name ..." heading under .SH COMMANDS.
  std::set<std::string> documented;
  {
    std::istringstream in(slurp(kManPage));
    static const std::regex kHeading(R"(^\.SS "?([a-z][a-z-]*)\b.*$)");
    std::string line;
    std::smatch m;
    bool in_commands = false;
    while (std::getline(in, line)) {
      // roff writes a literal hyphen as "\-" (".SS oci\-hook").
      for (size_t p = line.find("\\-"); p != std::string::npos; p = line.find("\\-", p)) line.erase(p, 1);
      if (line.rfind(".SH ", 0) == 0) in_commands = line == ".SH COMMANDS";
      if (in_commands && std::regex_match(line, m, kHeading)) documented.insert(m[1].str());
    }
  }
  for (const auto& c : table) {
    INFO("subcommand missing from packaging/fabric-agent.8: " << c);
    CHECK(documented.count(c) == 1);
  }
  for (const auto& c : documented) {
    INFO("packaging/fabric-agent.8 documents a subcommand the binary does not have: " << c);
    CHECK(table.count(c) == 1);
  }
}

TEST_CASE("the man page's mesh synopsis lists exactly the actions of `mesh --help`", "[packaging]") {
  const char* bin = std::getenv("FA_BINARY");
  REQUIRE(bin != nullptr);
  // "usage: fabric-agent mesh apply ...", then "       fabric-agent mesh show ...".
  static const std::regex kAction(R"(fabric-agent mesh ([a-z]+)\b)");
  std::set<std::string> actions;
  {
    std::istringstream in(run(std::string("'") + bin + "' mesh --help"));
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, kAction)) actions.insert(m[1].str());
  }
  REQUIRE(actions.count("apply") == 1);
  // The synopsis lines of ".SS mesh": ".B fabric\-agent mesh ACTION ...".
  std::set<std::string> documented;
  {
    std::istringstream in(slurp(kManPage));
    std::string line;
    std::smatch m;
    bool in_mesh = false;
    while (std::getline(in, line)) {
      for (size_t p = line.find("\\-"); p != std::string::npos; p = line.find("\\-", p)) line.erase(p, 1);
      if (line.rfind(".SS ", 0) == 0 || line.rfind(".SH ", 0) == 0) in_mesh = line == ".SS mesh";
      if (in_mesh && line.rfind(".B ", 0) == 0 && std::regex_search(line, m, kAction)) documented.insert(m[1].str());
    }
  }
  CHECK(documented == actions);
}
