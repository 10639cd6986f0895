// SPDX-License-Identifier: Apache-2.0
#include "agent/state.hpp"

#include <dirent.h>
#include <unistd.h>

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

Result<PersistedState> parse_state(const std::string& text, const overlay::ParseOptions& opt) {
  nlohmann::json doc = fa::parse_json(text);
  if (doc.is_discarded()) return Error{"not valid JSON"};
  if (!doc.is_object()) return Error{"top level is not an object"};
  auto v = doc.find("version");
  if (v == doc.end() || !v->is_number_integer() || v->get<int64_t>() != kStateVersion)
    return Error{"version is not " + std::to_string(kStateVersion)};
  PersistedState s;
  if (auto m = doc.find("mesh"); m != doc.end() && !m->is_null()) {
    auto p = overlay::parse_desired(*m, opt);
    if (!p.ok()) return Error{"mesh: " + p.errors.front().str()};
    s.mesh = std::move(*p.value);
  }
  return s;
}

std::string dump_state(const PersistedState& s) {
  nlohmann::json doc = {{"version", kStateVersion},
                        {"mesh", s.mesh ? overlay::to_json(*s.mesh) : nlohmann::json(nullptr)}};
  return doc.dump() + "\n";
}

Result<LoadedState> load_state(const std::string& state_dir, const overlay::ParseOptions& opt) {
  LoadedState out;
  const std::string path = state_path(state_dir);
  // A write cut short by a crash leaves its temporary behind: never read,
  // removed here.
  remove_stale_temporaries(path);
  auto text = read_text_file(path, 16 << 20);
  if (!text) {
    if (text.error().sys_errno == ENOENT) return out;
    if (text.error().sys_errno != EFBIG) return text.take_error();
    out.problem = text.error().message;
  } else {
    auto parsed = parse_state(*text, opt);
    if (parsed) {
      out.state = std::move(*parsed);
      return out;
    }
    out.problem = parsed.error().message;
  }
  out.moved_aside = path + ".corrupt-" + std::to_string(std::time(nullptr));
  if (std::rename(path.c_str(), out.moved_aside.c_str()) != 0)
    return Error::from_errno("state file " + path + " is unusable (" + out.problem + ") and cannot be moved aside");
  return out;
}

Status save_state(const std::string& state_dir, const PersistedState& s) {
  return write_file_atomic(state_path(state_dir), dump_state(s), 0600);
}

}  // namespace fa::agent
