// SPDX-License-Identifier: Apache-2.0
#include "agent/state.hpp"

#include <cerrno>
#include <cstdio>
#include <ctime>

#include "common/fs.hpp"
#include "common/json.hpp"

namespace fa::agent {

namespace {
constexpr int kStateVersion = 1;
std::string state_path(const std::string& dir) { return dir + "/state.json"; }
}  // namespace

Result<PersistedState> parse_state(const std::string& text) {
  nlohmann::json doc = fa::parse_json(text);
  if (doc.is_discarded()) return Error{"not valid JSON"};
  if (!doc.is_object()) return Error{"top level is not an object"};
  if (!doc.contains("version") || !doc["version"].is_number_integer() || doc["version"].get<int>() != kStateVersion)
    return Error{"version is not " + std::to_string(kStateVersion)};
  PersistedState s;
  if (doc.contains("mesh")) {
    if (!doc["mesh"].is_null() && !doc["mesh"].is_object()) return Error{"mesh is neither null nor an object"};
    s.mesh = doc["mesh"];
  }
  if (doc.contains("pods")) {
    if (!doc["pods"].is_array()) return Error{"pods is not a list"};
    s.pods = doc["pods"];
  }
  return s;
}

std::string dump_state(const nlohmann::json& mesh, const nlohmann::json& pods) {
  nlohmann::json doc = {{"version", kStateVersion}, {"mesh", mesh}, {"pods", pods}};
  return doc.dump(2) + "\n";
}

Result<LoadedState> load_state(const std::string& state_dir) {
  LoadedState out;
  const std::string path = state_path(state_dir);
  auto text = read_text_file(path, 16 << 20);
  if (!text) {
    if (text.error().sys_errno == ENOENT) return out;
    if (text.error().sys_errno != EFBIG) return text.take_error();
    out.problem = text.error().message;
  } else {
    auto parsed = parse_state(*text);
    if (parsed) {
      out.state = std::move(*parsed);
      return out;
    }
    out.problem = parsed.error().message;
  }
  out.moved_aside = path + ".corrupt-" + std::to_string(std::time(nullptr));
  if (std::rename(path.c_str(), out.moved_aside.c_str()) != 0)
    return Error::from_errno("state file " + path + " is corrupt (" + out.problem + ") and cannot be moved aside");
  return out;
}

Status save_state(const std::string& state_dir, const PersistedState& s) {
  return save_state(state_dir, s.mesh, s.pods);
}

Status save_state(const std::string& state_dir, const nlohmann::json& mesh, const nlohmann::json& pods) {
  return write_file_atomic(state_path(state_dir), dump_state(mesh, pods), 0600);
}

}  // namespace fa::agent
