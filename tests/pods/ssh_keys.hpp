// SPDX-License-Identifier: Apache-2.0
// SSH material made by ssh-keygen (openssh-client) for the login tests: a
// rental's CA, node 0's host key and certificate for 10.42.0.1, the user key
// pair, and wrong variants, each a file in a temporary directory.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "../overlay/netns_helpers.hpp"
#include "common/fs.hpp"

namespace fa_test {

struct SshKeys {
  std::string dir;
  SshKeys() {
    char t[] = "/tmp/fa-ssh-keys-XXXXXX";
    dir = ::mkdtemp(t);
    auto gen = [&](const std::string& name, const std::string& extra = "-t ed25519 -N ''") {
      REQUIRE(run("ssh-keygen -q " + extra + " -C " + name + " -f " + dir + "/" + name + " </dev/null").rc == 0);
    };
    for (auto k : {"ca", "ca2", "host", "user"}) gen(k);
    gen("enc", "-t ed25519 -N sesame");
    gen("rsa", "-t rsa -b 2048 -N ''");
    auto sign = [&](const std::string& ca, const std::string& key, const std::string& as, const std::string& opts) {
      REQUIRE(run("cp " + dir + "/" + key + ".pub " + dir + "/" + as + ".pub && ssh-keygen -q -s " + dir + "/" + ca +
                  " -I " + as + " " + opts + " " + dir + "/" + as + ".pub").rc == 0);
    };
    sign("ca", "host", "good", "-h -n 10.42.0.1");
    sign("ca2", "host", "otherca", "-h -n 10.42.0.1");
    sign("ca", "host", "otherip", "-h -n 10.42.0.2,node1");
    sign("ca", "host", "usercert", "-n 10.42.0.1");
    sign("ca", "host", "expired", "-h -n 10.42.0.1 -V -2d:-1d");
    sign("ca", "user", "otherkey", "-h -n 10.42.0.1");
  }
  ~SshKeys() { std::filesystem::remove_all(dir); }
  std::string text(const std::string& f) const { return *fa::read_text_file(dir + "/" + f); }
  std::string cert(const std::string& name) const { return text(name + "-cert.pub"); }
  // A valid PUT /v1/login body for node 0 of cluster c-1.
  nlohmann::json doc() const {
    return {{"cluster_id", "c-1"},           {"ca_public_key", text("ca.pub")},
            {"host_key", text("host")},      {"host_certificate", cert("good")},
            {"user_public_key", text("user.pub")}, {"user_key", text("user")}};
  }
};

}  // namespace fa_test
