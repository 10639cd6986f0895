// SPDX-License-Identifier: Apache-2.0
// The rental's SSH login material: checked here (OpenSSH's wire formats,
// OpenSSL's base64 and Ed25519), written into a container's root by the hook.
#include "pods/login.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <functional>
#include <set>
#include <tuple>

#include "common/fd.hpp"
#include "common/fs.hpp"
#include "common/random.hpp"
#include "common/secure.hpp"

namespace fa::pods {

using nlohmann::json;
using overlay::ValidationError;

namespace {

constexpr std::string_view kEd25519 = "ssh-ed25519";
constexpr std::string_view kEd25519Cert = "ssh-ed25519-cert-v01@openssh.com";
constexpr std::string_view kPemBegin = "-----BEGIN OPENSSH PRIVATE KEY-----";
constexpr std::string_view kPemEnd = "-----END OPENSSH PRIVATE KEY-----";
constexpr const char* kNotShown = "(not shown)";
// Our lines in files the image shares with us carry this comment, so a
// container started again replaces them instead of adding more.
constexpr std::string_view kMarker = "fabric-agent:";

// A buffer that is wiped when it goes: decoded private keys live in one.
struct Bytes {
  std::string b;
  ~Bytes() { secure_wipe(b.data(), b.size()); }
};

// RFC 4648 base64 (OpenSSL's decoder, the one PEM is read with); blanks and
// newlines are skipped, anything else that is not base64 fails.
bool base64_decode(std::string_view in, Bytes& out) {
  std::unique_ptr<EVP_ENCODE_CTX, decltype(&EVP_ENCODE_CTX_free)> ctx(EVP_ENCODE_CTX_new(), EVP_ENCODE_CTX_free);
  if (!ctx) return false;
  out.b.assign(in.size() / 4 * 3 + 3, '\0');
  EVP_DecodeInit(ctx.get());
  int n = 0, m = 0;
  auto* o = reinterpret_cast<unsigned char*>(out.b.data());
  if (EVP_DecodeUpdate(ctx.get(), o, &n, reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size())) < 0)
    return false;
  if (EVP_DecodeFinal(ctx.get(), o + n, &m) != 1) return false;
  out.b.resize(static_cast<size_t>(n + m));
  return !out.b.empty();
}

std::string base64_encode(std::string_view in, bool pad) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  if (!pad)
    while (!out.empty() && out.back() == '=') out.pop_back();
  return out;
}

// The SSH wire format (RFC 4251 5): uint32, uint64, length-prefixed strings.
struct Reader {
  std::string_view s;
  size_t pos = 0;
  bool u32(uint32_t& v) {
    if (s.size() - pos < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(s[pos++]);
    return true;
  }
  bool u64(uint64_t& v) {
    uint32_t hi = 0, lo = 0;
    if (!u32(hi) || !u32(lo)) return false;
    v = uint64_t{hi} << 32 | lo;
    return true;
  }
  bool str(std::string_view& v) {
    uint32_t n = 0;
    if (!u32(n) || s.size() - pos < n) return false;
    v = s.substr(pos, n);
    pos += n;
    return true;
  }
  bool done() const { return pos == s.size(); }
};

struct Problem {
  std::string message;
};

// "TYPE BASE64 [comment]" -> the decoded blob, whose first string is TYPE.
std::optional<Problem> public_blob(std::string_view line, std::string_view type, Bytes& blob) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.find('\n') != std::string_view::npos) return Problem{"expected one line"};
  auto sp = line.find(' ');
  std::string_view t = line.substr(0, sp);
  if (t != type) return Problem{"key type `" + std::string(t) + "' is not accepted (accepted: " + std::string(type) + ")"};
  if (sp == std::string_view::npos) return Problem{"expected `" + std::string(type) + " BASE64'"};
  std::string_view b64 = line.substr(sp + 1);
  b64 = b64.substr(0, b64.find(' '));
  if (!base64_decode(b64, blob)) return Problem{"the key is not valid base64"};
  Reader r{blob.b};
  std::string_view inner;
  if (!r.str(inner) || inner != type) return Problem{"the key's blob does not start with its type " + std::string(type)};
  return std::nullopt;
}

struct PublicKey {
  std::string key;  // 32 bytes
  std::string line;  // normalised "ssh-ed25519 BASE64"
};

std::optional<Problem> parse_public(std::string_view line, PublicKey& out) {
  Bytes blob;
  if (auto p = public_blob(line, kEd25519, blob)) return p;
  Reader r{blob.b};
  std::string_view t, k;
  if (!r.str(t) || !r.str(k) || !r.done() || k.size() != 32)
    return Problem{"not an Ed25519 public key (a 32-byte key after the type)"};
  out.key = std::string(k);
  out.line = std::string(kEd25519) + " " + base64_encode(blob.b, true);
  return std::nullopt;
}

using PkeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

bool ed25519_verify(std::string_view pub, std::string_view sig, std::string_view data) {
  PkeyPtr k(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(pub.data()),
                                        pub.size()),
            EVP_PKEY_free);
  if (!k) return false;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                          reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
}

// The public key of an Ed25519 seed, computed (not trusted from the file).
std::optional<std::string> ed25519_public_of(std::string_view seed) {
  PkeyPtr k(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed.data()),
                                         seed.size()),
            EVP_PKEY_free);
  if (!k) return std::nullopt;
  std::string pub(32, '\0');
  size_t n = pub.size();
  if (EVP_PKEY_get_raw_public_key(k.get(), reinterpret_cast<unsigned char*>(pub.data()), &n) != 1 || n != 32)
    return std::nullopt;
  return pub;
}

// PROTOCOL.key: an unencrypted "openssh-key-v1" holding one Ed25519 key.
// Returns its public key, computed from the private seed.
std::optional<Problem> parse_private(std::string_view pem, std::string& pub_out) {
  while (!pem.empty() && (pem.back() == '\n' || pem.back() == '\r')) pem.remove_suffix(1);
  if (pem.substr(0, kPemBegin.size()) != kPemBegin || pem.size() < kPemBegin.size() + kPemEnd.size() ||
      pem.substr(pem.size() - kPemEnd.size()) != kPemEnd)
    return Problem{"expected an OpenSSH private key (" + std::string(kPemBegin) + " ... " + std::string(kPemEnd) + ")"};
  Bytes raw;
  if (!base64_decode(pem.substr(kPemBegin.size(), pem.size() - kPemBegin.size() - kPemEnd.size()), raw))
    return Problem{"the private key is not valid base64"};
  constexpr std::string_view magic{"openssh-key-v1\0", 15};
  if (raw.b.compare(0, magic.size(), magic) != 0) return Problem{"not an openssh-key-v1 private key"};
  Reader r{raw.b, magic.size()};
  std::string_view cipher, kdf, kdfopts, pubblob, priv;
  uint32_t nkeys = 0;
  if (!r.str(cipher) || !r.str(kdf) || !r.str(kdfopts) || !r.u32(nkeys))
    return Problem{"the private key is truncated"};
  if (cipher != "none" || kdf != "none")
    return Problem{"the private key is encrypted (cipher " + std::string(cipher) +
                   "); accepted: an unencrypted key (ssh-keygen -N '')"};
  if (nkeys != 1) return Problem{"the file holds " + std::to_string(nkeys) + " keys; accepted: exactly one"};
  if (!r.str(pubblob) || !r.str(priv) || !r.done()) return Problem{"the private key is truncated"};
  Reader p{priv};
  uint32_t c1 = 0, c2 = 0;
  std::string_view type, pub, secret;
  if (!p.u32(c1) || !p.u32(c2) || c1 != c2 || !p.str(type)) return Problem{"the private key section is corrupt"};
  if (type != kEd25519)
    return Problem{"key type `" + std::string(type) + "' is not accepted (accepted: " + std::string(kEd25519) + ")"};
  if (!p.str(pub) || !p.str(secret) || pub.size() != 32 || secret.size() != 64)
    return Problem{"the private key section is corrupt"};
  auto derived = ed25519_public_of(secret.substr(0, 32));
  if (!derived || *derived != pub || secret.substr(32) != pub)
    return Problem{"the private key does not match the public key stored with it"};
  Reader pb{pubblob};
  std::string_view pt, pk;
  if (!pb.str(pt) || !pb.str(pk) || pk != pub) return Problem{"the private key does not match the public key stored with it"};
  pub_out = std::move(*derived);
  return std::nullopt;
}

struct Certificate {
  std::string key;  // the certified public key (32 bytes)
  uint32_t type = 0;
  std::vector<std::string> principals;
  uint64_t valid_after = 0, valid_before = 0;
  std::string ca_key;  // the signing key (32 bytes) when it is Ed25519
  std::string line;
};

// PROTOCOL.certkeys, Ed25519 certificate signed by an Ed25519 CA; the
// signature is checked against the CA key the certificate names.
std::optional<Problem> parse_certificate(std::string_view line, Certificate& c) {
  Bytes blob;
  if (auto p = public_blob(line, kEd25519Cert, blob)) return p;
  Reader r{blob.b};
  std::string_view t, nonce, pk, keyid, principals, crit, ext, reserved, sigkey, sig;
  uint64_t serial = 0;
  if (!r.str(t) || !r.str(nonce) || !r.str(pk) || !r.u64(serial) || !r.u32(c.type) || !r.str(keyid) ||
      !r.str(principals) || !r.u64(c.valid_after) || !r.u64(c.valid_before) || !r.str(crit) || !r.str(ext) ||
      !r.str(reserved) || !r.str(sigkey))
    return Problem{"the certificate is truncated"};
  const size_t signed_len = r.pos;
  if (!r.str(sig) || !r.done() || pk.size() != 32) return Problem{"the certificate is truncated or corrupt"};
  c.key = std::string(pk);
  Reader pr{principals};
  while (!pr.done()) {
    std::string_view one;
    if (!pr.str(one)) return Problem{"the certificate's principals are corrupt"};
    c.principals.emplace_back(one);
  }
  Reader ck{sigkey};
  std::string_view ct, ckey;
  if (!ck.str(ct) || ct != kEd25519 || !ck.str(ckey) || ckey.size() != 32 || !ck.done())
    return Problem{"the certificate is signed by a " + std::string(ct) + " key; accepted: an ssh-ed25519 CA"};
  c.ca_key = std::string(ckey);
  Reader sr{sig};
  std::string_view st, sb;
  if (!sr.str(st) || st != kEd25519 || !sr.str(sb) || sb.size() != 64 || !sr.done())
    return Problem{"the certificate's signature is not an Ed25519 signature"};
  if (!ed25519_verify(c.ca_key, sb, std::string_view(blob.b).substr(0, signed_len)))
    return Problem{"the certificate's signature does not verify"};
  c.line = std::string(kEd25519Cert) + " " + base64_encode(blob.b, true);
  return std::nullopt;
}

// "ssh-ed25519 BASE64" of a raw 32-byte key.
std::string ed25519_line(std::string_view key) {
  std::string blob;
  auto put = [&blob](std::string_view x) {
    for (int sh : {24, 16, 8, 0}) blob += static_cast<char>(x.size() >> sh & 0xff);
    blob += x;
  };
  put(kEd25519);
  put(key);
  return std::string(kEd25519) + " " + base64_encode(blob, true);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

std::string fingerprint(std::string_view line) {
  auto sp = line.find(' ');
  if (sp == std::string_view::npos) return "";
  std::string_view b64 = line.substr(sp + 1);
  Bytes blob;
  if (!base64_decode(b64.substr(0, b64.find(' ')), blob)) return "";
  unsigned char md[32];
  unsigned n = 0;
  if (EVP_Digest(blob.b.data(), blob.b.size(), md, &n, EVP_sha256(), nullptr) != 1) return "";
  return "SHA256:" + base64_encode(std::string_view(reinterpret_cast<char*>(md), n), false);
}

overlay::Parsed<Login> parse_login(const json& doc, const overlay::IpPrefix& address, int64_t now_unix) {
  overlay::Parsed<Login> out;
  auto err = [&](const std::string& f, const std::string& v, const std::string& m) { out.errors.push_back({f, v, m}); };
  if (!doc.is_object()) {
    err("", "", "the login document must be a JSON object");
    return out;
  }
  static const std::set<std::string> known = {"cluster_id", "ca_public_key", "host_key", "host_certificate",
                                              "user_public_key", "user_key"};
  static const std::set<std::string> secret = {"host_key", "user_key"};
  for (const auto& [k, v] : doc.items())
    if (!known.count(k))
      err(k, "", "unknown field (accepted: cluster_id, ca_public_key, host_key, host_certificate, user_public_key, user_key)");
  Login l;
  auto text = [&](const char* f, std::string& dst) {
    if (!doc.contains(f)) return err(f, "", "required"), false;
    if (!doc[f].is_string() || doc[f].get<std::string>().empty())
      return err(f, secret.count(f) ? kNotShown : doc[f].dump(), "expected a non-empty string"), false;
    dst = doc[f].get<std::string>();
    return true;
  };
  // A public value is echoed only up to a line's worth: it is the caller's, but an error is for a person.
  auto shown = [](const std::string& s) { return s.size() > 120 ? s.substr(0, 117) + "..." : s; };
  text("cluster_id", l.cluster_id);
  PublicKey ca, user;
  if (text("ca_public_key", l.ca_public_key))
    if (auto p = parse_public(l.ca_public_key, ca)) err("ca_public_key", shown(l.ca_public_key), p->message);
  if (text("user_public_key", l.user_public_key))
    if (auto p = parse_public(l.user_public_key, user)) err("user_public_key", shown(l.user_public_key), p->message);
  std::string host_pub, user_pub;
  const bool host_key_ok = text("host_key", l.host_key) && [&] {
    if (auto p = parse_private(l.host_key, host_pub)) return err("host_key", kNotShown, p->message), false;
    return true;
  }();
  if (text("user_key", l.user_key)) {
    if (auto p = parse_private(l.user_key, user_pub))
      err("user_key", kNotShown, p->message);
    else if (!user.key.empty() && user_pub != user.key)
      err("user_key", kNotShown, "is not the private key of user_public_key");
  }
  Certificate c;
  if (text("host_certificate", l.host_certificate)) {
    const std::string f = "host_certificate", v = shown(l.host_certificate);
    const std::string ip = address.str().substr(0, address.str().find('/'));
    if (auto p = parse_certificate(l.host_certificate, c)) {
      err(f, v, p->message);
    } else if (c.type != 2) {
      err(f, v, "is a user certificate; accepted: a host certificate (ssh-keygen -h)");
    } else if (!ca.key.empty() && c.ca_key != ca.key) {
      err(f, v, "is signed by " + fingerprint(ed25519_line(c.ca_key)) + ", not by ca_public_key " +
                    fingerprint(ca.line));
    } else if (host_key_ok && c.key != host_pub) {
      err(f, v, "certifies another key than host_key");
    } else if (std::find(c.principals.begin(), c.principals.end(), ip) == c.principals.end()) {
      err(f, v, "names the principals [" + join(c.principals) + "]; accepted: a certificate naming this node's overlay address " +
                    ip + " (ssh-keygen -h -n " + ip + ")");
    } else if (static_cast<uint64_t>(now_unix) < c.valid_after || static_cast<uint64_t>(now_unix) >= c.valid_before) {
      err(f, v, "is not valid now (valid from " + std::to_string(c.valid_after) + " to " + std::to_string(c.valid_before) +
                    ", unix seconds)");
    }
  }
  if (!out.errors.empty()) return out;
  l.ca_public_key = ca.line;
  l.user_public_key = user.line;
  l.host_certificate = c.line;
  l.principals = c.principals;
  if (l.host_key.back() != '\n') l.host_key += '\n';
  if (l.user_key.back() != '\n') l.user_key += '\n';
  out.value = std::move(l);
  return out;
}

json to_json(const Login& l) {
  return {{"cluster_id", l.cluster_id}, {"ca_public_key", l.ca_public_key}, {"host_key", l.host_key},
          {"host_certificate", l.host_certificate}, {"user_public_key", l.user_public_key}, {"user_key", l.user_key},
          {"principals", l.principals}};
}

Result<Login> login_from_json(const json& j) {
  Login l;
  try {
    l.cluster_id = j.at("cluster_id").get<std::string>();
    l.ca_public_key = j.at("ca_public_key").get<std::string>();
    l.host_key = j.at("host_key").get<std::string>();
    l.host_certificate = j.at("host_certificate").get<std::string>();
    l.user_public_key = j.at("user_public_key").get<std::string>();
    l.user_key = j.at("user_key").get<std::string>();
    l.principals = j.value("principals", std::vector<std::string>{});
  } catch (const json::exception& e) {
    return Error{std::string("login material: ") + e.what()};
  }
  return l;
}

json public_view(const Login& l) {
  return {{"cluster_id", l.cluster_id},
          {"ca_public_key", l.ca_public_key},
          {"ca_fingerprint", fingerprint(l.ca_public_key)},
          {"host_certificate", l.host_certificate},
          {"host_fingerprint", fingerprint(l.host_certificate)},
          {"principals", l.principals},
          {"user_public_key", l.user_public_key},
          {"user_fingerprint", fingerprint(l.user_public_key)}};
}

std::string host_pattern(const overlay::IpPrefix& address) {
  const overlay::IpPrefix net = address.network();
  const int octets = std::clamp(net.len / 8, 1, 4);
  std::string s;
  for (int i = 0; i < octets; ++i) s += (i ? "." : "") + std::to_string(net.addr[i]);
  return octets == 4 ? s : s + ".*";
}

// ------------------------------------------------------ into the rootfs ---

namespace {

// Every path below is resolved as if `root` were `/`: an absolute symlink in
// the image points into the image, ".." stops at its root.
// The path is also made relative, so that it names a file under `root` even
// where RESOLVE_IN_ROOT would not apply, never the host's file of that name.
Fd open_in_root(int root, const std::string& path, uint64_t flags, uint64_t mode = 0) {
  const size_t start = path.find_first_not_of('/');
  const std::string rel = start == std::string::npos ? "." : path.substr(start);
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  // The kernel headers' __NR_openat2: glibc 2.31's SYS_ names predate openat2.
  return Fd(static_cast<int>(::syscall(__NR_openat2, root, rel.c_str(), &how, sizeof how)));
}

}  // namespace

// Directories that exist keep their mode and owner.
Result<Fd> dir_in_root(int root, const std::string& path, unsigned mode) {
  std::string at;
  size_t pos = 1;
  while (true) {
    size_t next = path.find('/', pos);
    at = path.substr(0, next);
    Fd d = open_in_root(root, at, O_DIRECTORY | O_RDONLY);
    if (!d.valid()) {
      if (errno != ENOENT) return Error::from_errno("open " + at + " in the container");
      const size_t slash = at.rfind('/');
      Fd parent = open_in_root(root, slash == 0 ? "/" : at.substr(0, slash), O_DIRECTORY | O_RDONLY);
      if (!parent.valid()) return Error::from_errno("open " + at.substr(0, slash) + " in the container");
      std::string name = at.substr(slash + 1);
      if (::mkdirat(parent.get(), name.c_str(), mode) != 0 && errno != EEXIST)
        return Error::from_errno("mkdir " + at + " in the container");
      d = open_in_root(root, at, O_DIRECTORY | O_RDONLY);
      if (!d.valid()) return Error::from_errno("open " + at + " in the container");
      if (::fchmod(d.get(), mode) != 0 || ::fchown(d.get(), 0, 0) != 0)
        return Error::from_errno("chmod " + at + " in the container");
    }
    if (next == std::string::npos) return d;
    pos = next + 1;
  }
}

namespace {

// The file's content, "" when it does not exist.
Result<std::string> read_in_root(int root, const std::string& path) {
  Fd f = open_in_root(root, path, O_RDONLY | O_NOFOLLOW);
  if (!f.valid()) {
    if (errno == ENOENT) return std::string();
    return Error::from_errno("open " + path + " in the container");
  }
  struct stat st{};
  if (::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Error{path + " in the container is not a regular file"};
  if (st.st_size > (1 << 20)) return Error{path + " in the container is larger than 1 MiB"};
  std::string s(static_cast<size_t>(st.st_size), '\0');
  ssize_t n = ::pread(f.get(), s.data(), s.size(), 0);
  if (n < 0) return Error::from_errno("read " + path + " in the container");
  s.resize(static_cast<size_t>(n));
  return s;
}

// Temp file beside it, then rename: the image's file (or a symlink in its
// place) is replaced, never written through.
Status write_in_root(int root, const std::string& path, std::string_view data, mode_t mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = path.substr(0, slash), name = path.substr(slash + 1);
  auto d = dir_in_root(root, dir, 0755);
  if (!d) return d.take_error();
  auto suffix = random_hex(6);
  if (!suffix) return suffix.take_error();
  const std::string tmp = "." + name + ".fabric-agent." + *suffix;
  Fd f(::openat(d->get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!f.valid()) return Error::from_errno("create " + dir + "/" + tmp + " in the container");
  Status s = write_all(f.get(), data, "write " + path + " in the container");
  if (s && (::fchmod(f.get(), mode) != 0 || ::fchown(f.get(), 0, 0) != 0 || ::fsync(f.get()) != 0))
    s = Error::from_errno("write " + path + " in the container");
  if (s && ::renameat(d->get(), tmp.c_str(), d->get(), name.c_str()) != 0)
    s = Error::from_errno("rename " + path + " in the container");
  if (!s) ::unlinkat(d->get(), tmp.c_str(), 0);
  return s;
}

// The lines of `text` that are not ours (the image's), then `ours`.
std::string merged(const std::string& text, const std::string& ours, const std::function<bool(std::string_view)>& is_ours) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = std::string_view(text).substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (!is_ours(line)) (out += line) += '\n';
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out + ours;
}

bool marked(std::string_view line) {
  auto sp = line.rfind(' ');
  return sp != std::string_view::npos && line.substr(sp + 1, kMarker.size()) == kMarker;
}

bool exists_in_root(int root, const std::string& path) {
  Fd f = open_in_root(root, path, O_PATH | O_NOFOLLOW);
  return f.valid();
}

}  // namespace

Status install_login(int root, const json& j) {
  auto l = login_from_json(j);
  if (!l) return l.take_error();
  const std::string pattern = j.value("hosts", "");
  if (pattern.empty() || pattern.find_first_not_of("0123456789.*") != std::string::npos)
    return Error{"login material: hosts `" + pattern + "' is not a pattern of IPv4 octets"};
  const std::string mark = std::string(kMarker) + l->cluster_id;
  const std::string d = "/etc/ssh/fabric-agent";
  if (auto s = dir_in_root(root, d, 0755); !s) return s.take_error();
  // The image's own host keys stay offered, after ours (sshd uses
  // /etc/ssh/ssh_host_*_key only while no HostKey is configured).
  std::string sshd = "# Written by fabric-agent's OCI hook at container start: the rental's host key\n"
                     "# and its certificate from the rental's SSH CA (peers trust the CA, no prompt).\n"
                     "HostKey " + d + "/ssh_host_ed25519_key\nHostCertificate " + d + "/ssh_host_ed25519_key-cert.pub\n";
  for (const char* k : {"ed25519", "ecdsa", "rsa"}) {
    std::string p = std::string("/etc/ssh/ssh_host_") + k + "_key";
    if (exists_in_root(root, p)) sshd += "HostKey " + p + "\n";
  }
  const std::string ssh = "# Written by fabric-agent's OCI hook: the rental's key for the rental's nodes.\nHost " +
                          pattern + "\n    IdentityFile " + d + "/id_ed25519\n";
  for (auto [path, data, mode] : std::initializer_list<std::tuple<std::string, std::string, mode_t>>{
           {d + "/ssh_host_ed25519_key", l->host_key, 0600},
           {d + "/ssh_host_ed25519_key-cert.pub", l->host_certificate + " " + mark + "\n", 0644},
           {d + "/id_ed25519", l->user_key, 0600},
           {d + "/id_ed25519.pub", l->user_public_key + " " + mark + "\n", 0644},
           {"/etc/ssh/sshd_config.d/fabric-agent.conf", sshd, 0644},
           {"/etc/ssh/ssh_config.d/fabric-agent.conf", ssh, 0644}})
    if (auto s = write_in_root(root, path, data, mode); !s) return s;
  auto add_line = [&](const std::string& path, const std::string& line, mode_t mode) -> Status {
    auto have = read_in_root(root, path);
    if (!have) return have.take_error();
    return write_in_root(root, path, merged(*have, line + " " + mark + "\n", marked), mode);
  };
  if (auto s = add_line("/etc/ssh/ssh_known_hosts", "@cert-authority " + pattern + " " + l->ca_public_key, 0644); !s)
    return s;
  if (auto s = dir_in_root(root, "/root/.ssh", 0700); !s) return s.take_error();
  return add_line("/root/.ssh/authorized_keys", l->user_public_key, 0600);
}

Status install_env(int root, const std::vector<std::string>& env) {
  std::vector<std::pair<std::string, std::string>> vars;
  for (const auto& e : env) {
    auto eq = e.find('=');
    if (e.rfind("NCCL_", 0) != 0 || eq == std::string::npos) continue;
    std::string value = e.substr(eq + 1);
    // pam_env and the shell read these files: a value that needs quoting is
    // not one discovery makes (device names, ports, indices, interface names).
    if (value.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=:,.+-/^") !=
        std::string::npos)
      return Error{"environment: " + e.substr(0, eq) + " `" + value + "' has characters /etc/environment cannot hold"};
    vars.emplace_back(e.substr(0, eq), value);
  }
  if (vars.empty()) return {};
  std::string envfile, profile = "# Written by fabric-agent's OCI hook: what NCCL must use on this host.\n";
  for (const auto& [k, v] : vars) {
    envfile += k + "=" + v + "\n";
    profile += "export " + k + "='" + v + "'\n";
  }
  auto have = read_in_root(root, "/etc/environment");
  if (!have) return have.take_error();
  auto ours = [&vars](std::string_view line) {
    return std::any_of(vars.begin(), vars.end(), [&](const auto& kv) {
      return line.substr(0, kv.first.size() + 1) == kv.first + "=";
    });
  };
  if (auto s = write_in_root(root, "/etc/environment", merged(*have, envfile, ours), 0644); !s) return s;
  return write_in_root(root, "/etc/profile.d/fabric-agent.sh", profile, 0644);
}

Result<std::string> rootfs_of(const std::string& bundle, std::string_view config_text) {
  json c = json::parse(config_text, nullptr, false);
  if (!c.is_object() || !c.contains("root") || !c["root"].is_object() || !c["root"].contains("path") ||
      !c["root"]["path"].is_string() || c["root"]["path"].get<std::string>().empty())
    return Error{"config.json: root.path is missing"};
  std::string p = c["root"]["path"].get<std::string>();
  return p[0] == '/' ? p : bundle + "/" + p;
}

Status furnish_rootfs(const std::string& bundle, std::string_view config_text, const std::vector<std::string>& env,
                      const json& reply) {
  const bool login = reply.contains("login") && reply["login"].is_object();
  auto rootfs = rootfs_of(bundle, config_text);
  if (!rootfs && !login) return {};  // no root to write into, nothing that needs one
  if (!rootfs) return Error{"SSH login: " + rootfs.error().message};
  Fd root(::open(rootfs->c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return Error::from_errno("open the container's root " + *rootfs);
  if (auto s = install_env(root.get(), env); !s) return s;
  if (login)
    if (auto s = install_login(root.get(), reply["login"]); !s) return Error{"SSH login: " + s.error().message};
  return {};
}

}  // namespace fa::pods
