// SPDX-License-Identifier: Apache-2.0
#include "agent/auth.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "common/fd.hpp"
#include "common/fs.hpp"
#include "common/random.hpp"
#include "common/secure.hpp"

namespace fa::agent {

Token Token::from_secret(std::string_view secret) {
  Token t;
  t.secret_.assign(secret);
  return t;
}

void Token::wipe() noexcept {
  if (!secret_.empty()) fa::secure_wipe(secret_.data(), secret_.size());
  secret_.clear();
}

bool Token::matches(std::string_view presented) const {
  if (secret_.empty() || presented.size() != secret_.size()) return false;
  return fa::secure_equal(presented.data(), secret_.data(), secret_.size());
}

namespace {
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}
}  // namespace

Result<std::string> read_token_secret(const std::string& path) {
  auto text = read_text_file(path, 4096);
  if (!text) return Error{"token file " + text.error().message, text.error().sys_errno};
  std::string s = trim(text->substr(0, text->find('\n')));
  if (s.empty()) return Error{"token file " + path + " is empty"};
  return s;
}

Result<LoadedToken> load_or_create_token(const std::string& path, bool create) {
  LoadedToken out;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT || !create) return Error::from_errno("token file " + path);
    auto secret = random_hex(32);
    if (!secret) return Error{"token: " + secret.error().message, secret.error().sys_errno};
    Status w = write_file_atomic(path, *secret + "\n", 0600);
    if (!w) {
      fa::secure_wipe(secret->data(), secret->size());
      return Error{"token file: " + w.error().message, w.error().sys_errno};
    }
    out.token = Token::from_secret(*secret);
    fa::secure_wipe(secret->data(), secret->size());
    out.created = true;
    return out;
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    return Error{"token file " + path + " has mode " + mode + "; accepted: no access for group and others (chmod 0600)"};
  }
  auto secret = read_token_secret(path);
  if (!secret) return secret.take_error();
  out.token = Token::from_secret(*secret);
  fa::secure_wipe(secret->data(), secret->size());
  return out;
}

AuthResult check_bearer(const Token& token, std::string_view h) {
  constexpr std::string_view kScheme = "Bearer ";
  if (h.size() <= kScheme.size()) return AuthResult::Missing;
  // The scheme name is case-insensitive (RFC 9110 11.1).
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(h[i])) != std::tolower(static_cast<unsigned char>(kScheme[i])))
      return AuthResult::Missing;
  std::string_view presented = h.substr(kScheme.size());
  while (!presented.empty() && presented.front() == ' ') presented.remove_prefix(1);
  while (!presented.empty() && presented.back() == ' ') presented.remove_suffix(1);
  if (presented.empty()) return AuthResult::Missing;
  return token.matches(presented) ? AuthResult::Ok : AuthResult::Wrong;
}

}  // namespace fa::agent
