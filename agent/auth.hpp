// SPDX-License-Identifier: Apache-2.0
// Bearer-token authentication. The token lives in a file of mode 0600; on the
// first run the agent creates one in state_dir and logs the file's path,
// never the token. Comparison is constant-time (CRYPTO_memcmp) for a guess of
// the token's length; a guess of another length is refused at once, which
// tells only the length (64 hex digits for a generated token), never content.
// No digest on purpose: the first EVP call initialises OpenSSL's provider
// machinery, ~2 MiB of resident pages the daemon otherwise never touches.
#pragma once

#include <string>
#include <string_view>

#include "common/result.hpp"

namespace fa::agent {

class Token {
 public:
  Token() = default;
  Token(const Token& o) : secret_(o.secret_) {}
  Token(Token&& o) noexcept : secret_(std::move(o.secret_)) { o.wipe(); }
  Token& operator=(Token o) noexcept {
    wipe();
    secret_.swap(o.secret_);
    return *this;
  }
  ~Token() { wipe(); }
  static Token from_secret(std::string_view secret);
  bool empty() const { return secret_.empty(); }
  // True when `presented` is the token.
  bool matches(std::string_view presented) const;

 private:
  void wipe() noexcept;
  std::string secret_;
};

struct LoadedToken {
  Token token;
  bool created = false;  // a new token file was written
};

// Reads the token file. Refuses a file readable or writable by group/other
// (the check names the mode). When the file is missing and `create` is set,
// writes 32 random bytes, hex encoded, with mode 0600.
Result<LoadedToken> load_or_create_token(const std::string& path, bool create);

// Reads a token file for a client (`status`, `cluster form`): the first line, trimmed.
Result<std::string> read_token_secret(const std::string& path);

enum class AuthResult { Ok, Missing, Wrong };

// Checks an Authorization header value: "Bearer <token>". Anything else
// (another scheme, no value) is Missing; a bearer token that is not ours is Wrong.
AuthResult check_bearer(const Token& token, std::string_view authorization_header);

}  // namespace fa::agent
