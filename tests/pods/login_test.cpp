// SPDX-License-Identifier: Apache-2.0
// The rental's SSH login material: validation (keys and certificates made by
// ssh-keygen, each wrong variant refused with the field named and no private
// key echoed), and what the hook writes into a container's root (merged with
// the image's files, never through the image's symlinks out of its root).
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <ctime>
#include <filesystem>

#include "common/fd.hpp"
#include "pods/login.hpp"
#include "pods/uapi_proxy.hpp"
#include "ssh_keys.hpp"

using namespace fa::pods;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

fa::overlay::IpPrefix addr(const std::string& s) { return *fa::overlay::IpPrefix::parse(s); }

// The one error of parsing `doc` for node 10.42.0.1/24, now.
fa::overlay::ValidationError only_error(const json& doc) {
  auto r = parse_login(doc, addr("10.42.0.1/24"), std::time(nullptr));
  REQUIRE_FALSE(r.ok());
  INFO(r.errors.front().str());
  REQUIRE(r.errors.size() == 1);
  return r.errors.front();
}

}  // namespace

TEST_CASE("ssh login: valid material is accepted and normalised", "[unit]") {
  fa_test::SshKeys k;
  auto r = parse_login(k.doc(), addr("10.42.0.1/24"), std::time(nullptr));
  INFO((r.ok() ? std::string() : r.errors.front().str()));
  REQUIRE(r.ok());
  const Login& l = *r.value;
  CHECK(l.principals == std::vector<std::string>{"10.42.0.1"});
  // The comment ssh-keygen wrote is dropped: ours marks the line instead.
  CHECK(l.ca_public_key + " ca" == k.text("ca.pub"));
  CHECK(l.user_public_key + " user" == k.text("user.pub"));
  CHECK(l.host_key == k.text("host") + "\n");
  // Fingerprints as ssh-keygen -l prints them.
  std::string kl = fa_test::run("ssh-keygen -l -f " + k.dir + "/ca.pub").out;
  CHECK(kl.find(fingerprint(l.ca_public_key)) != std::string::npos);
  json pub = public_view(l);
  CHECK(pub.dump().find("PRIVATE") == std::string::npos);
  CHECK_FALSE(pub.contains("host_key"));
  CHECK_FALSE(pub.contains("user_key"));
  auto back = login_from_json(to_json(l));
  REQUIRE(back.ok());
  CHECK(back->host_key == l.host_key);
}

TEST_CASE("ssh login: each wrong field is refused, naming it, and no private key is echoed", "[unit]") {
  fa_test::SshKeys k;
  struct Case {
    std::string field;
    json value;
    std::string message;  // a part of it
  };
  const std::vector<Case> cases = {
      {"ca_public_key", k.text("rsa.pub"), "key type `ssh-rsa' is not accepted (accepted: ssh-ed25519)"},
      {"ca_public_key", "ssh-ed25519 AAAA!!notbase64", "not valid base64"},
      {"ca_public_key", 7, "expected a non-empty string"},
      {"user_public_key", "ssh-ed25519 " + k.text("rsa.pub").substr(8), "does not start with its type"},
      {"host_certificate", k.cert("otherca"), "is signed by SHA256:"},
      {"host_certificate", k.cert("otherip"), "names the principals [10.42.0.2,node1]; accepted: a certificate naming this node's overlay address 10.42.0.1"},
      {"host_certificate", k.cert("usercert"), "is a user certificate; accepted: a host certificate"},
      {"host_certificate", k.cert("expired"), "is not valid now"},
      {"host_certificate", k.cert("otherkey"), "certifies another key than host_key"},
      {"host_certificate", k.text("host.pub"), "key type `ssh-ed25519' is not accepted (accepted: ssh-ed25519-cert-v01@openssh.com)"},
      {"host_key", k.text("enc"), "the private key is encrypted (cipher aes256-ctr); accepted: an unencrypted key"},
      {"host_key", k.text("rsa"), "key type `ssh-rsa' is not accepted"},
      {"host_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n", "not an openssh-key-v1"},
      {"user_key", k.text("host"), "is not the private key of user_public_key"},
      {"user_key", k.text("ca.pub"), "expected an OpenSSH private key"},
      {"nickname", "x", "unknown field"},
  };
  for (const auto& c : cases) {
    json doc = k.doc();
    doc[c.field] = c.value;
    auto e = only_error(doc);
    INFO(c.field << ": " << e.str());
    CHECK(e.field == c.field);
    CHECK(e.message.find(c.message) != std::string::npos);
    if (c.field == "host_key" || c.field == "user_key") CHECK(e.value == "(not shown)");
  }
  // A certificate tampered with after signing (a byte of its nonce).
  std::string cert = k.cert("good");
  json doc = k.doc();
  const size_t at = cert.find(' ') + 1 + 60;
  cert[at] = cert[at] == 'A' ? 'B' : 'A';
  doc["host_certificate"] = cert;
  CHECK(only_error(doc).message.find("does not verify") != std::string::npos);
  // Missing fields: each named; a private key's value never in any error.
  auto r = parse_login(json::object(), addr("10.42.0.1/24"), std::time(nullptr));
  CHECK(r.errors.size() == 6);
  doc = k.doc();
  const std::string secret = k.text("user");
  doc["host_key"] = secret.substr(0, 200);
  doc["user_key"] = 42;
  r = parse_login(doc, addr("10.42.0.1/24"), std::time(nullptr));
  CHECK(r.errors.size() == 2);
  for (const auto& e : r.errors) CHECK(e.str().find(secret.substr(40, 24)) == std::string::npos);
  CHECK(only_error(json::array()).message == "the login document must be a JSON object");
}

TEST_CASE("ssh login: the known_hosts pattern is the overlay network to a whole octet", "[unit]") {
  CHECK(host_pattern(addr("10.42.0.7/24")) == "10.42.0.*");
  CHECK(host_pattern(addr("10.42.3.7/22")) == "10.42.*");
  CHECK(host_pattern(addr("10.42.3.7/16")) == "10.42.*");
  CHECK(host_pattern(addr("10.42.3.7/32")) == "10.42.3.7");
}

namespace {

struct Root {
  std::string path;
  fa::Fd fd;
  Root() {
    char t[] = "/tmp/fa-login-root-XXXXXX";
    path = ::mkdtemp(t);
    fd = fa::Fd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  }
  ~Root() { fs::remove_all(path); }
  std::string read(const std::string& p) const { return fa_test::read_file(path + p); }
};

}  // namespace

TEST_CASE("ssh login: the hook's files merge with the image's and stay inside its root", "[unit]") {
  fa_test::SshKeys k;
  auto l = parse_login(k.doc(), addr("10.42.0.1/24"), std::time(nullptr));
  REQUIRE(l.ok());
  json j = to_json(*l.value);
  j["hosts"] = "10.42.0.*";

  Root r;
  // The image: its own known host, authorized key, environment, host key;
  // /root/.ssh a symlink pointing (absolutely) at the host's /etc-like dir.
  char o[] = "/tmp/fa-login-outside-XXXXXX";
  const std::string outside = ::mkdtemp(o);
  fs::create_directories(r.path + "/etc/ssh");
  fs::create_directories(r.path + "/root");
  fa_test::write_file(r.path + "/etc/ssh/ssh_known_hosts", "github.com ssh-ed25519 AAAAimage\n");
  fa_test::write_file(r.path + "/etc/ssh/ssh_host_ecdsa_key", "image's key\n");
  fa_test::write_file(r.path + "/etc/environment", "LANG=C.UTF-8\nNCCL_IB_HCA=wrong\nPATH=/x\n");
  fs::create_symlink(outside, r.path + "/root/.ssh");
  fs::create_directories(r.path + outside);  // where that link points inside the image

  REQUIRE(install_login(r.fd.get(), j).ok());
  REQUIRE(install_env(r.fd.get(), {"PATH=/usr/bin", "NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME=wg0"}).ok());
  // The symlink resolved inside the root: nothing was written outside.
  CHECK(fs::is_empty(outside));
  CHECK(fs::exists(r.path + outside + "/authorized_keys"));
  const std::string mark = " fabric-agent:c-1\n";
  CHECK(r.read(outside + "/authorized_keys") == l.value->user_public_key + mark);
  CHECK(r.read("/etc/ssh/ssh_known_hosts") ==
        "github.com ssh-ed25519 AAAAimage\n@cert-authority 10.42.0.* " + l.value->ca_public_key + mark);
  CHECK(r.read("/etc/environment") == "LANG=C.UTF-8\nPATH=/x\nNCCL_IB_HCA==mlx5_0:1\nNCCL_SOCKET_IFNAME=wg0\n");
  CHECK(r.read("/etc/profile.d/fabric-agent.sh").find("export NCCL_IB_HCA='=mlx5_0:1'\n") != std::string::npos);
  const std::string sshd = r.read("/etc/ssh/sshd_config.d/fabric-agent.conf");
  CHECK(sshd.find("HostKey /etc/ssh/fabric-agent/ssh_host_ed25519_key\n"
                  "HostCertificate /etc/ssh/fabric-agent/ssh_host_ed25519_key-cert.pub\n"
                  "HostKey /etc/ssh/ssh_host_ecdsa_key\n") != std::string::npos);
  CHECK(sshd.find("ssh_host_rsa_key") == std::string::npos);  // the image has none
  CHECK(r.read("/etc/ssh/ssh_config.d/fabric-agent.conf").find("Host 10.42.0.*\n    IdentityFile /etc/ssh/fabric-agent/id_ed25519\n") !=
        std::string::npos);
  struct stat st{};
  REQUIRE(::stat((r.path + "/etc/ssh/fabric-agent/id_ed25519").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(r.read("/etc/ssh/fabric-agent/id_ed25519") == k.text("user") + "\n");

  // Again (the container restarted, another rental's lines left): replaced, not repeated.
  j["cluster_id"] = "c-2";
  REQUIRE(install_login(r.fd.get(), j).ok());
  REQUIRE(install_env(r.fd.get(), {"NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME=wg0"}).ok());
  CHECK(r.read("/etc/ssh/ssh_known_hosts") ==
        "github.com ssh-ed25519 AAAAimage\n@cert-authority 10.42.0.* " + l.value->ca_public_key + " fabric-agent:c-2\n");
  CHECK(r.read("/etc/environment") == "LANG=C.UTF-8\nPATH=/x\nNCCL_IB_HCA==mlx5_0:1\nNCCL_SOCKET_IFNAME=wg0\n");

  // A value the files cannot hold is refused, naming it; bad hosts too.
  auto bad = install_env(r.fd.get(), {"NCCL_IB_HCA=a b"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "environment: NCCL_IB_HCA `a b' has characters /etc/environment cannot hold");
  j["hosts"] = "*\nHost *";
  CHECK_FALSE(install_login(r.fd.get(), j).ok());
  fs::remove_all(outside);
}

TEST_CASE("ssh login: rootfs_of reads root.path, relative to the bundle", "[unit]") {
  CHECK(*rootfs_of("/b", R"({"root":{"path":"rootfs"}})") == "/b/rootfs");
  CHECK(*rootfs_of("/b", R"({"root":{"path":"/var/lib/x/merged"}})") == "/var/lib/x/merged");
  CHECK(rootfs_of("/b", R"({"root":{}})").error().message == "config.json: root.path is missing");
}

TEST_CASE("wg show proxy: a get reply loses its private and preshared keys, nothing else", "[unit]") {
  const std::string reply =
      "private_key=a8dac1d8a70a751f0f699fb14ba1cff7b79cf4fbd8f09f44c6e4fe6ba2c8b6b3\nlisten_port=51820\n"
      "public_key=b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33\n"
      "preshared_key=0000000000000000000000000000000000000000000000000000000000000000\n"
      "endpoint=127.0.0.1:51821\nallowed_ip=10.42.0.2/32\nerrno=0\n\n";
  CHECK(filter_uapi_get(reply) ==
        "listen_port=51820\npublic_key=b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33\n"
        "endpoint=127.0.0.1:51821\nallowed_ip=10.42.0.2/32\nerrno=0\n\n");
}
