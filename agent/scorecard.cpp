// SPDX-License-Identifier: Apache-2.0
#include "agent/scorecard.hpp"

#include <cerrno>

#include "common/fs.hpp"

namespace fa::agent {

using nlohmann::json;

json scorecard_entry(const std::string& peer, const std::string& rail, const json& result, long long measured_unix) {
  json e = {{"peer", peer}, {"rail", rail}, {"measured_unix", measured_unix}};
  for (const char* k : {"status", "reason", "message", "gbps", "latency_us", "gid_index", "gid", "port_rate_gbps"})
    e[k] = result.is_object() && result.contains(k) ? result[k] : json(nullptr);
  return e;
}

Scorecard::Scorecard(std::string path) : path_(std::move(path)) {}

Status Scorecard::load() {
  std::lock_guard lk(mu_);
  if (loaded_) return {};
  loaded_ = true;
  if (path_.empty()) return {};
  remove_stale_temporaries(path_);
  auto text = read_text_file(path_, 16 << 20);
  if (!text) {
    if (text.error().sys_errno == ENOENT) return {};
    return Error{"scorecard: " + text.error().message + "; starting empty"};
  }
  json doc = json::parse(*text, nullptr, false);
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
    return Error{"scorecard: " + path_ + " is not a scorecard (no results array); starting empty"};
  for (auto& e : doc["results"])
    if (e.is_object() && e.contains("peer") && e["peer"].is_string() && e.contains("rail") && e["rail"].is_string())
      entries_[{e["peer"].get<std::string>(), e["rail"].get<std::string>()}] = e;
  return {};
}

Status Scorecard::record(json entry) {
  std::lock_guard lk(mu_);
  std::pair<std::string, std::string> key{entry.value("peer", ""), entry.value("rail", "")};
  entries_[std::move(key)] = std::move(entry);
  while (entries_.size() > kMaxEntries) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.value("measured_unix", 0LL) < oldest->second.value("measured_unix", 0LL)) oldest = it;
    entries_.erase(oldest);
  }
  if (path_.empty()) return {};
  json doc = {{"results", json::array()}};
  for (const auto& [k, e] : entries_) doc["results"].push_back(e);
  return write_file_atomic(path_, doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", 0644);
}

json Scorecard::to_json() const {
  std::lock_guard lk(mu_);
  json out = {{"results", json::array()}};
  for (const auto& [k, e] : entries_) out["results"].push_back(e);
  return out;
}

}  // namespace fa::agent
