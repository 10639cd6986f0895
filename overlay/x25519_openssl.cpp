// SPDX-License-Identifier: Apache-2.0
// X25519 through OpenSSL (libcrypto, loaded on first use:
// common/openssl_lazy.cpp): the whole agent's and the tests' side of the
// public_key_derive() link seam (overlay.hpp). The static front links
// x25519_child.cpp instead.
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "overlay/internal.hpp"
#include "overlay/overlay.hpp"

namespace fa::overlay {

namespace {
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;

std::atomic<bool> minimal_init{false};
std::once_flag init_once;
// Before the first X25519 of this process: in a short-lived one, only what
// X25519 needs (no openssl.cnf, no legacy cipher/digest name tables, no
// error strings, our messages name the failure; no atexit cleanup: together
// half of OpenSSL's first-use cost).
void ensure_openssl() {
  std::call_once(init_once, [] {
    if (minimal_init.load())
      OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
                              OPENSSL_INIT_NO_ADD_ALL_DIGESTS | OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS |
                              OPENSSL_INIT_NO_ATEXIT,
                          nullptr);
  });
}
}  // namespace

void crypto_minimal_init() { minimal_init.store(true); }

Result<Key> x25519(const Key& scalar, const Key& u) {
  ensure_openssl();
  Pkey priv(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, scalar.data(), scalar.size()));
  Pkey peer(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, u.data(), u.size()));
  if (!priv || !peer) return Error{"OpenSSL rejected an X25519 key"};
  PkeyCtx ctx(EVP_PKEY_CTX_new(priv.get(), nullptr));
  size_t len = kKeyLen;
  Key out;
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 || EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) != 1 ||
      EVP_PKEY_derive(ctx.get(), out.data(), &len) != 1 || len != kKeyLen)
    return Error{"X25519 derivation failed"};
  return out;
}

Result<Key> public_key_in_process(const Key& private_key) {
  ensure_openssl();
  Pkey priv(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, private_key.data(), private_key.size()));
  if (!priv) return Error{"OpenSSL rejected the X25519 private key"};
  Key pub;
  size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(priv.get(), pub.data(), &len) != 1 || len != kKeyLen)
    return Error{"X25519 public key derivation failed"};
  return pub;
}

Result<Key> public_key_derive(const Key& private_key) { return public_key_in_process(private_key); }

}  // namespace fa::overlay
