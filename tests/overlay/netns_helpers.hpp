// SPDX-License-Identifier: Apache-2.0
// Shell helpers for the overlay netns tests: run real commands (ip, wg, ping,
// the fabric-agent binary) inside namespaces these tests create and remove.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace fa_test {

struct Out {
  int rc = -1;
  std::string out;
};

inline Out run(const std::string& cmd) {
  Out o;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) o.out.append(buf.data(), n);
  int st = ::pclose(f);
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return o;
}

inline std::string agent() {
  const char* b = std::getenv("FA_BINARY");
  return b ? b : "fabric-agent";
}

inline std::string read_file(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& p, const std::string& s) { std::ofstream(p) << s; }

// `wg show IF latest-handshakes|endpoints|peers` -> key -> value.
inline std::map<std::string, std::string> wg_map(const std::string& ns, const std::string& ifn,
                                                 const std::string& what) {
  std::map<std::string, std::string> m;
  std::istringstream in(run("ip netns exec " + ns + " wg show " + ifn + " " + what + " 2>&1").out);
  std::string k, v;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    ls >> k;
    std::getline(ls, v);
    auto s = v.find_first_not_of(" \t");
    m[k] = s == std::string::npos ? "" : v.substr(s);
  }
  return m;
}

// A short unique tag for names: namespaces and interfaces of concurrent
// test processes (and other helpers' tests) never collide.
inline std::string tag() { return std::to_string(::getpid() % 100000); }

}  // namespace fa_test
