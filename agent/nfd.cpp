// SPDX-License-Identifier: Apache-2.0
#include "agent/nfd.hpp"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include "agent/verify_logic.hpp"
#include "common/fs.hpp"
#include "common/log.hpp"

namespace fa::agent::nfd {

using nlohmann::json;

namespace {

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool value_char(char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; }

std::string sha256_hex(std::string_view s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr) != 1) return {};
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 0xf];
  }
  return out;
}

const json* at(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string text(const json* j) { return j && j->is_string() ? j->get<std::string>() : std::string(); }

}  // namespace

bool valid_label_value(std::string_view v) {
  if (v.empty()) return true;
  if (v.size() > 63 || !alnum(v.front()) || !alnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(), value_char);
}

std::string fabric_id_value(std::string_view id) {
  const bool plain = !id.empty() && id.size() <= 63 && alnum(id.front()) && alnum(id.back()) &&
                     std::all_of(id.begin(), id.end(), [](char c) { return alnum(c) || c == ':'; });
  if (plain) {
    std::string v(id);
    std::replace(v.begin(), v.end(), ':', '.');
    return v;
  }
  std::string kind(id.substr(0, std::min(id.find(':'), id.size())));
  if (kind.empty() || kind.size() > 16 || !std::all_of(kind.begin(), kind.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) != 0;
      }))
    kind = "fabric";
  return kind + "-" + sha256_hex(id).substr(0, 40);
}

std::string descriptive_value(std::string_view s) {
  std::string v;
  for (char c : s) {
    if (value_char(c))
      v += c;
    else if (v.empty() || v.back() != '-')
      v += '-';
  }
  auto trim = [&v] {
    while (!v.empty() && !alnum(v.back())) v.pop_back();
    size_t b = 0;
    while (b < v.size() && !alnum(v[b])) ++b;
    v.erase(0, b);
  };
  trim();
  if (v.size() > 63) v.resize(63);
  trim();
  return v;
}

Labels labels_of(const json& inspect, bool healthy) {
  Labels out;
  auto add = [&out](const char* name, const std::string& value) {
    if (!value.empty() && valid_label_value(value)) out.emplace_back(std::string(kPrefix) + name, value);
  };
  if (inspect.is_object()) {
    static const json kNone = json::object();
    const json* f = at(inspect, "fabric");
    const json& fabric = f ? *f : kNone;
    const std::string kind = text(at(fabric, "kind"));
    add("fabric.kind", descriptive_value(kind));
    if (const std::string id = text(at(fabric, "id")); !id.empty()) add("fabric.id", fabric_id_value(id));
    if (!kind.empty() && kind != "none") {
      const auto rails = verify::rails_of(inspect);
      add("fabric.rails", std::to_string(rails.size()));
      double slowest = 0;
      for (const auto& r : rails)
        if (r.rate_gbps > 0 && (slowest == 0 || r.rate_gbps < slowest)) slowest = r.rate_gbps;
      // Whole Gb/s: nodeAffinity's Gt and Lt compare integers.
      if (slowest >= 1) add("fabric.rail-gbps", std::to_string(static_cast<long long>(std::floor(slowest))));
      add("fabric.lossless", descriptive_value(text(at(fabric, "lossless"))));
    }
    const json* gpus = at(inspect, "gpus");
    if (gpus) {
      add("gpu.vendor", descriptive_value(text(at(*gpus, "vendor"))));
      add("gpu.model", descriptive_value(text(at(*gpus, "model"))));
      if (const json* n = at(*gpus, "count"); n && n->is_number_integer()) add("gpu.count", std::to_string(n->get<long long>()));
    }
    if (const json* gdr = at(inspect, "gpudirect")) {
      const json* rdma = at(*gdr, "rdma");
      add("gpudirect-rdma", rdma && rdma->is_boolean() ? (rdma->get<bool>() ? "true" : "false") : "unknown");
    }
  }
  add("healthy", inspect.is_object() && healthy ? "true" : "false");
  return out;
}

std::string rfc3339_utc(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::chrono::seconds expiry_after(std::chrono::seconds refresh_interval) {
  return std::max(3 * refresh_interval, std::chrono::seconds(60));
}

std::string render(const Labels& labels, int64_t expiry_unix) {
  // No comment line of ours may start with "# +": NFD reads those as
  // directives and logs an error for an unknown one.
  std::string out =
      "# fabric-agent: this node's fabric, GPUs and health as node labels (docs/kubernetes.md).\n"
      "# Rewritten at every discovery pass; NFD drops the labels after the expiry time.\n"
      "# +expiry-time=" +
      rfc3339_utc(expiry_unix) + "\n";
  for (const auto& [name, value] : labels) out += name + "=" + value + "\n";
  return out;
}

std::optional<std::string> FeatureFile::write(const std::string& path, const Labels& labels, int64_t now_unix,
                                              std::chrono::seconds refresh_interval) {
  auto log = fa::logger("agent");
  if (path != path_) {
    path_ = path;
    problem_.clear();
    absent_logged_ = false;
    written_ = false;
  }
  const std::string dir = path.substr(0, path.rfind('/'));
  struct stat st {};
  if (::stat(dir.empty() ? "/" : dir.c_str(), &st) != 0 && errno == ENOENT) {
    if (!absent_logged_)
      log->info("node labels: {} does not exist (no Node Feature Discovery on this host); labels are written once it does",
                dir);
    absent_logged_ = true;
    problem_.clear();
    return std::nullopt;
  }
  absent_logged_ = false;
  if (!written_) remove_stale_temporaries(path);
  const int64_t expiry = now_unix + expiry_after(refresh_interval).count();
  Status s = write_file_atomic(path, render(labels, expiry), 0644, TempName::hidden);
  if (!s) {
    std::string w = "node labels not written to " + path + ": " + s.error().message;
    if (w != problem_) log->warn("{}", w);
    problem_ = w;
    return w;
  }
  if (!problem_.empty() || !written_)
    log->info("node labels: {} written ({} labels, expiring {} unless rewritten)", path, labels.size(),
              rfc3339_utc(expiry));
  problem_.clear();
  written_ = true;
  return std::nullopt;
}

}  // namespace fa::agent::nfd
