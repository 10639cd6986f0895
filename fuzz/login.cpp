// SPDX-License-Identifier: Apache-2.0
// A PUT /v1/login body: parse_login for node 10.42.0.1/24. An input that
// starts with '{' is the body as sent; any other input is taken as the bytes
// of an SSH blob, written as the certificate, the public keys and (armoured)
// the private keys of an otherwise valid-looking body, so that the mutations
// reach OpenSSH's wire formats under the base64.
// Checked: an accepted login names the node's address among its principals
// and holds normalised public lines; every error names a field of the
// document or none, and no error's value carries a private key's text.
#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz.hpp"
#include "pods/login.hpp"

namespace {

std::string b64(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fa_fuzz::text(data, size);
  nlohmann::json doc;
  if (!text.empty() && text[0] == '{') {
    doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded()) return 0;
  } else {
    const std::string blob = b64(text);
    const std::string pem = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + blob + "\n-----END OPENSSH PRIVATE KEY-----\n";
    doc = {{"cluster_id", "c-1"},
           {"ca_public_key", "ssh-ed25519 " + blob},
           {"host_key", pem},
           {"host_certificate", "ssh-ed25519-cert-v01@openssh.com " + blob},
           {"user_public_key", "ssh-ed25519 " + blob},
           {"user_key", pem}};
  }
  static const auto address = *fa::overlay::IpPrefix::parse("10.42.0.1/24");
  auto r = fa::pods::parse_login(doc, address, 1'800'000'000);
  if (r.ok()) {
    const auto& l = *r.value;
    FUZZ_CHECK(std::find(l.principals.begin(), l.principals.end(), "10.42.0.1") != l.principals.end());
    FUZZ_CHECK(l.ca_public_key.rfind("ssh-ed25519 ", 0) == 0 && l.ca_public_key.find('\n') == std::string::npos);
    FUZZ_CHECK(l.host_certificate.rfind("ssh-ed25519-cert-v01@openssh.com ", 0) == 0);
    FUZZ_CHECK(!fa::pods::fingerprint(l.host_certificate).empty());
    FUZZ_CHECK(fa::pods::login_from_json(fa::pods::to_json(l)).ok());
    return 0;
  }
  FUZZ_CHECK(!r.errors.empty());
  for (const auto& e : r.errors) {
    FUZZ_CHECK(e.field.empty() || doc.is_object());
    // The message is our own text (it may quote the armour it expects);
    // what an error echoes of the input is its value.
    for (const char* secret : {"host_key", "user_key"}) {
      if (e.field == secret) FUZZ_CHECK(e.value == "(not shown)" || e.value.empty());  // empty: missing
      if (doc.is_object() && doc.contains(secret) && doc[secret].is_string() && doc[secret].get<std::string>().size() > 12) {
        // The error may echo its own field's value, and that public text
        // may hold the key's text too (a key made of a public key's bytes).
        const std::string& key = doc[secret].get_ref<const std::string&>();
        const bool own = doc.contains(e.field) && doc[e.field].is_string() &&
                         doc[e.field].get_ref<const std::string&>().find(key) != std::string::npos;
        if (!own) FUZZ_CHECK(e.value.find(key) == std::string::npos);
      }
    }
    (void)nlohmann::json(e.str()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
