// SPDX-License-Identifier: Apache-2.0
// OpenSSL loaded on first use, not at process start.
//
// libssl and libcrypto cost every process that links them ~150 page faults
// and ~1.1 ms before main() here (their relocations and libcrypto's CPU
// probe), and ~1.8 MiB of resident pages, yet most runs need neither:
// `inspect`, `status`, the OCI hook, and the daemon unless TLS is
// configured. So the binary has no NEEDED entry for them. Instead, this file
// defines each OpenSSL function the agent (and Boost.Asio's TLS stream)
// calls; the first call dlopen()s the library by its soname (the package
// Depends on libssl3 / openssl-libs) and every call forwards to the real
// function. Each definition repeats the prototype of OpenSSL's own header,
// and the compiler rejects one that does not match it; a function missing
// here fails the link. Same pattern as agent/sd_notify.cpp for libsystemd.
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/dl.hpp"

namespace fa {
namespace {

enum Lib { kCrypto, kSsl };

// Each library is loaded once, on the first call of one of its functions
// (libssl needs libcrypto, so that one comes first).
void* symbol(Lib lib, const char* name) {
  static void* const crypto = dl_load_or_die("libcrypto.so.3", "libssl3");
  if (lib == kCrypto) return dl_symbol_or_die(crypto, "libcrypto.so.3", name);
  static void* const ssl = dl_load_or_die("libssl.so.3", "libssl3");
  return dl_symbol_or_die(ssl, "libssl.so.3", name);
}

}  // namespace
}  // namespace fa

// NAME's real address is looked up once, on its first call.
#define FA_OPENSSL(lib, ret, name, params, args)                                            \
  extern "C" ret name params {                                                              \
    static const auto real = reinterpret_cast<decltype(&name)>(fa::symbol(fa::lib, #name)); \
    return real args;                                                                       \
  }

// libcrypto: X25519 (overlay/keys.cpp), and what Asio's TLS stream uses.
FA_OPENSSL(kCrypto, int, OPENSSL_init_crypto, (uint64_t opts, const OPENSSL_INIT_SETTINGS* settings),
           (opts, settings))
FA_OPENSSL(kCrypto, EVP_PKEY*, EVP_PKEY_new_raw_private_key,
           (int type, ENGINE* e, const unsigned char* priv, size_t len), (type, e, priv, len))
FA_OPENSSL(kCrypto, EVP_PKEY*, EVP_PKEY_new_raw_public_key,
           (int type, ENGINE* e, const unsigned char* pub, size_t len), (type, e, pub, len))
FA_OPENSSL(kCrypto, int, EVP_PKEY_get_raw_public_key, (const EVP_PKEY* pkey, unsigned char* pub, size_t* len),
           (pkey, pub, len))
FA_OPENSSL(kCrypto, void, EVP_PKEY_free, (EVP_PKEY * pkey), (pkey))
FA_OPENSSL(kCrypto, EVP_PKEY_CTX*, EVP_PKEY_CTX_new, (EVP_PKEY * pkey, ENGINE* e), (pkey, e))
FA_OPENSSL(kCrypto, void, EVP_PKEY_CTX_free, (EVP_PKEY_CTX * ctx), (ctx))
FA_OPENSSL(kCrypto, int, EVP_PKEY_derive_init, (EVP_PKEY_CTX * ctx), (ctx))
FA_OPENSSL(kCrypto, int, EVP_PKEY_derive_set_peer, (EVP_PKEY_CTX * ctx, EVP_PKEY* peer), (ctx, peer))
FA_OPENSSL(kCrypto, int, EVP_PKEY_derive, (EVP_PKEY_CTX * ctx, unsigned char* key, size_t* keylen),
           (ctx, key, keylen))
FA_OPENSSL(kCrypto, long, BIO_ctrl, (BIO * bp, int cmd, long larg, void* parg), (bp, cmd, larg, parg))
FA_OPENSSL(kCrypto, size_t, BIO_ctrl_pending, (BIO * b), (b))
FA_OPENSSL(kCrypto, int, BIO_free, (BIO * a), (a))
FA_OPENSSL(kCrypto, int, BIO_new_bio_pair, (BIO * *bio1, size_t writebuf1, BIO** bio2, size_t writebuf2),
           (bio1, writebuf1, bio2, writebuf2))
FA_OPENSSL(kCrypto, int, BIO_read, (BIO * b, void* data, int dlen), (b, data, dlen))
FA_OPENSSL(kCrypto, int, BIO_write, (BIO * b, const void* data, int dlen), (b, data, dlen))
FA_OPENSSL(kCrypto, void, ERR_clear_error, (void), ())
FA_OPENSSL(kCrypto, unsigned long, ERR_get_error, (void), ())
FA_OPENSSL(kCrypto, const char*, ERR_reason_error_string, (unsigned long e), (e))
FA_OPENSSL(kCrypto, void, X509_free, (X509 * a), (a))

// libssl: the TLS server (agent/server.cpp) and client (agent/client.cpp).
FA_OPENSSL(kSsl, const SSL_METHOD*, TLS_method, (void), ())
FA_OPENSSL(kSsl, const SSL_METHOD*, TLS_client_method, (void), ())
FA_OPENSSL(kSsl, const SSL_METHOD*, TLS_server_method, (void), ())
FA_OPENSSL(kSsl, SSL_CTX*, SSL_CTX_new, (const SSL_METHOD* meth), (meth))
FA_OPENSSL(kSsl, void, SSL_CTX_free, (SSL_CTX * ctx), (ctx))
FA_OPENSSL(kSsl, long, SSL_CTX_ctrl, (SSL_CTX * ctx, int cmd, long larg, void* parg), (ctx, cmd, larg, parg))
FA_OPENSSL(kSsl, uint64_t, SSL_CTX_set_options, (SSL_CTX * ctx, uint64_t op), (ctx, op))
FA_OPENSSL(kSsl, void, SSL_CTX_set_verify, (SSL_CTX * ctx, int mode, SSL_verify_cb callback),
           (ctx, mode, callback))
FA_OPENSSL(kSsl, SSL_verify_cb, SSL_CTX_get_verify_callback, (const SSL_CTX* ctx), (ctx))
FA_OPENSSL(kSsl, int, SSL_CTX_load_verify_locations, (SSL_CTX * ctx, const char* CAfile, const char* CApath),
           (ctx, CAfile, CApath))
FA_OPENSSL(kSsl, int, SSL_CTX_use_PrivateKey_file, (SSL_CTX * ctx, const char* file, int type),
           (ctx, file, type))
FA_OPENSSL(kSsl, int, SSL_CTX_use_certificate_chain_file, (SSL_CTX * ctx, const char* file), (ctx, file))
FA_OPENSSL(kSsl, void*, SSL_CTX_get_default_passwd_cb_userdata, (SSL_CTX * ctx), (ctx))
FA_OPENSSL(kSsl, void, SSL_CTX_set_default_passwd_cb_userdata, (SSL_CTX * ctx, void* u), (ctx, u))
FA_OPENSSL(kSsl, void*, SSL_CTX_get_ex_data, (const SSL_CTX* ctx, int idx), (ctx, idx))
FA_OPENSSL(kSsl, int, SSL_CTX_set_ex_data, (SSL_CTX * ctx, int idx, void* data), (ctx, idx, data))
FA_OPENSSL(kSsl, SSL*, SSL_new, (SSL_CTX * ctx), (ctx))
FA_OPENSSL(kSsl, void, SSL_free, (SSL * ssl), (ssl))
FA_OPENSSL(kSsl, long, SSL_ctrl, (SSL * ssl, int cmd, long larg, void* parg), (ssl, cmd, larg, parg))
FA_OPENSSL(kSsl, void, SSL_set_bio, (SSL * s, BIO* rbio, BIO* wbio), (s, rbio, wbio))
FA_OPENSSL(kSsl, int, SSL_accept, (SSL * ssl), (ssl))
FA_OPENSSL(kSsl, int, SSL_connect, (SSL * ssl), (ssl))
FA_OPENSSL(kSsl, int, SSL_read, (SSL * ssl, void* buf, int num), (ssl, buf, num))
FA_OPENSSL(kSsl, int, SSL_write, (SSL * ssl, const void* buf, int num), (ssl, buf, num))
FA_OPENSSL(kSsl, int, SSL_shutdown, (SSL * s), (s))
FA_OPENSSL(kSsl, int, SSL_get_shutdown, (const SSL* ssl), (ssl))
FA_OPENSSL(kSsl, int, SSL_get_error, (const SSL* s, int ret_code), (s, ret_code))
FA_OPENSSL(kSsl, long, SSL_get_verify_result, (const SSL* ssl), (ssl))
FA_OPENSSL(kSsl, X509*, SSL_get1_peer_certificate, (const SSL* s), (s))
FA_OPENSSL(kSsl, void*, SSL_get_ex_data, (const SSL* ssl, int idx), (ssl, idx))
FA_OPENSSL(kSsl, int, SSL_set_ex_data, (SSL * ssl, int idx, void* data), (ssl, idx, data))
