// SPDX-License-Identifier: Apache-2.0
// The rental's SSH login material (PUT /v1/login) and what the OCI hook
// writes of it into a whole-machine container, so that `ssh 10.42.0.N` from
// any node of the rental lands on that node as root with no prompt.
//
// Trust is one SSH CA per rental, held by the control plane: each node gets
// a host key and a host certificate for its overlay address, every node a
// known_hosts line trusting that CA for the overlay's addresses only, and
// the rental's user key pair. The formats are OpenSSH's (PROTOCOL.certkeys,
// PROTOCOL.key); base64, Ed25519 and SHA-256 are OpenSSL's. Only Ed25519
// keys are accepted: OpenSSH's default, one fixed size, no parameters.
// See docs/api.md ("PUT /v1/login") and docs/pods.md ("SSH between the nodes").
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fd.hpp"
#include "common/result.hpp"
#include "overlay/overlay.hpp"

namespace fa::pods {

struct Login {
  std::string cluster_id;
  std::string ca_public_key;     // "ssh-ed25519 BASE64", normalised (no comment)
  std::string host_key;          // OpenSSH private key (PEM armour), unencrypted: secret
  std::string host_certificate;  // "ssh-ed25519-cert-v01@openssh.com BASE64"
  std::string user_public_key;   // "ssh-ed25519 BASE64"
  std::string user_key;          // OpenSSH private key of user_public_key: secret
  std::vector<std::string> principals;  // of the host certificate
};

// Validates the whole document: the fields above (and nothing else), each
// key well-formed, the private keys unencrypted and matching their public
// halves, the host certificate a host certificate signed by the CA, for the
// host key, naming `address` (this node's overlay address) among its
// principals and valid now (`now_unix`). Errors name the field; the value of
// a private key is never echoed ("(not shown)").
overlay::Parsed<Login> parse_login(const nlohmann::json& doc, const overlay::IpPrefix& address, int64_t now_unix);

// Persisted form and what the daemon hands the hook: every field.
nlohmann::json to_json(const Login& l);
Result<Login> login_from_json(const nlohmann::json& j);
// GET /v1/login: the public parts and fingerprints, no private key.
nlohmann::json public_view(const Login& l);

// "SHA256:..." as ssh-keygen -l prints it, of a public key or certificate line.
std::string fingerprint(std::string_view public_line);

// The known_hosts pattern for the overlay: the mesh's network rounded to a
// whole octet (10.42.0.0/24 -> "10.42.0.*"), since known_hosts matches
// globs, not prefixes. The CA signs only the rental's nodes, so a wider
// pattern trusts nothing more.
std::string host_pattern(const overlay::IpPrefix& address);

// What the hook writes into the container's root filesystem (resolved inside
// it, symlinks included, with openat2 RESOLVE_IN_ROOT: the image cannot
// point a write outside its root). Merges with what the image has:
//   /etc/ssh/fabric-agent/{ssh_host_ed25519_key,-cert.pub,id_ed25519,.pub}  ours (keys 0600)
//   /etc/ssh/sshd_config.d/fabric-agent.conf   ours: HostKey + HostCertificate, then the image's host keys
//   /etc/ssh/ssh_config.d/fabric-agent.conf    ours: IdentityFile for `Host <pattern>`
//   /etc/ssh/ssh_known_hosts                   our @cert-authority line replaced or appended
//   /root/.ssh/authorized_keys                 our key line replaced or appended
//   /etc/environment, /etc/profile.d/fabric-agent.sh   the NCCL variables (see install_env)
// `login` is what the daemon replied (to_json + "hosts": the pattern).
Status install_login(int root_fd, const nlohmann::json& login);
// NCCL_* entries of `env` ("NAME=VALUE", the container's process.env as the
// CDI spec left it) into /etc/environment (our names replaced, the rest
// kept: pam_env reads it for sshd and login sessions) and
// /etc/profile.d/fabric-agent.sh (login shells without PAM).
Status install_env(int root_fd, const std::vector<std::string>& env);
// mkdir -p of `path` inside the root at `root_fd` (resolved as above); an
// existing directory keeps its mode. Returns the directory, open.
Result<Fd> dir_in_root(int root_fd, const std::string& path, unsigned mode);
// root.path of an OCI config.json, absolute or relative to the bundle.
Result<std::string> rootfs_of(const std::string& bundle, std::string_view config_text);
// What the hook does once the daemon registered the pod: install_env with
// the container's env, and install_login when the reply carries "login".
Status furnish_rootfs(const std::string& bundle, std::string_view config_text, const std::vector<std::string>& env,
                      const nlohmann::json& reply);

}  // namespace fa::pods
