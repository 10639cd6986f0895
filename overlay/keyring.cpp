// SPDX-License-Identifier: Apache-2.0
// The node's public key, remembered in the kernel key retention service
// (keyrings(7)) for interfaces served by wireguard-go. The kernel reports a
// WireGuard device's public key; wireguard-go's UAPI reports only the private
// key, so every `mesh apply` that adds a peer (the own-key check) or reports
// the key would otherwise run X25519 again: ~1.4 ms, nearly all of it
// loading libcrypto and OpenSSL's provider, for a key that has not changed.
//
// One "user" key per interface in root's user keyring, described by the
// network namespace and the interface name. Its payload is the private key
// followed by the public key: a lookup is a hit only if the interface's
// current private key equals the remembered one (compared in constant
// time), so a key changed behind the agent's back (`wg set ... private-key`)
// is never answered with a stale public key. A hash of the private key would
// do instead, but the only hash at hand is libcrypto's. The private key is
// already held by the kernel or wireguard-go and readable by root (`wg
// showconf`); the entry is readable by root alone (uid 0 of this user
// namespace), held in kernel memory (never on disk), expires an hour after
// its last use (so the entry of an interface that went away with its
// namespace, without `mesh down`, does not outlive it by long) and is
// removed by `mesh down`.
//
// Without keyrings (no CONFIG_KEYS, a seccomp filter refusing add_key as
// Docker's default profile does) every call simply misses and X25519 runs.
#include <linux/keyctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "common/log.hpp"
#include "common/secure.hpp"
#include "overlay/internal.hpp"

namespace fa::overlay {

namespace {

// keyrings(7) permission bits (keyutils.h's KEY_POS_* and KEY_USR_*):
// everything for the possessor and for the owning user (uid 0), nothing for
// group or other.
constexpr uint32_t kPosAll = 0x3f000000;
constexpr uint32_t kUsrAll = 0x003f0000;
constexpr unsigned kExpirySeconds = 3600;
constexpr size_t kPayload = 2 * kKeyLen;

long keyctl(int op, unsigned long a2, unsigned long a3 = 0, unsigned long a4 = 0, unsigned long a5 = 0) {
  return syscall(SYS_keyctl, op, a2, a3, a4, a5);
}

// "fabric-agent:wireguard:<netns dev>:<netns inode>:<interface>": names are
// per network namespace, and this thread may be inside a target namespace.
std::optional<std::string> description(const std::string& ifname) {
  struct stat st {};
  if (stat("/proc/thread-self/ns/net", &st) != 0) return std::nullopt;
  return "fabric-agent:wireguard:" + std::to_string(static_cast<unsigned long>(st.st_dev)) + ":" +
         std::to_string(static_cast<unsigned long>(st.st_ino)) + ":" + ifname;
}

long find(const std::string& desc) {
  return keyctl(KEYCTL_SEARCH, static_cast<unsigned long>(KEY_SPEC_USER_KEYRING),
                reinterpret_cast<unsigned long>("user"), reinterpret_cast<unsigned long>(desc.c_str()), 0);
}

}  // namespace

std::optional<Key> keyring_public_key(const std::string& ifname, const Key& private_key) {
  auto desc = description(ifname);
  if (!desc) return std::nullopt;
  long id = find(*desc);
  if (id < 0) return std::nullopt;
  unsigned char buf[kPayload];
  long n =
      keyctl(KEYCTL_READ, static_cast<unsigned long>(id), reinterpret_cast<unsigned long>(buf), sizeof buf);
  std::optional<Key> pub;
  if (n == static_cast<long>(kPayload) && secure_equal(buf, private_key.data(), kKeyLen)) {
    pub.emplace();
    std::memcpy(pub->data(), buf + kKeyLen, kKeyLen);
    keyctl(KEYCTL_SET_TIMEOUT, static_cast<unsigned long>(id), kExpirySeconds);  // in use: kept
  }
  secure_wipe(buf, sizeof buf);
  fa::logger("overlay")->debug("{}: public key {} the keyring", ifname, pub ? "from" : "not in");
  return pub;
}

void keyring_remember(const std::string& ifname, const Key& private_key, const Key& public_key) {
  auto desc = description(ifname);
  if (!desc) return;
  unsigned char buf[kPayload];
  std::memcpy(buf, private_key.data(), kKeyLen);
  std::memcpy(buf + kKeyLen, public_key.data(), kKeyLen);
  // add_key replaces the payload of an entry with the same description.
  long id = syscall(SYS_add_key, "user", desc->c_str(), buf, sizeof buf, KEY_SPEC_USER_KEYRING);
  secure_wipe(buf, sizeof buf);
  if (id < 0) {
    fa::logger("overlay")->debug("{}: public key not remembered: add_key: {}", ifname, std::strerror(errno));
    return;
  }
  keyctl(KEYCTL_SETPERM, static_cast<unsigned long>(id), kPosAll | kUsrAll);
  keyctl(KEYCTL_SET_TIMEOUT, static_cast<unsigned long>(id), kExpirySeconds);
}

void keyring_forget(const std::string& ifname) {
  auto desc = description(ifname);
  if (!desc) return;
  long id = find(*desc);
  if (id >= 0) keyctl(KEYCTL_INVALIDATE, static_cast<unsigned long>(id));
}

}  // namespace fa::overlay
