// SPDX-License-Identifier: Apache-2.0
#include "agent/state.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>

#include "common/fault.hpp"
#include "common/fs.hpp"
#include "common/json.hpp"

namespace fa::agent {

using nlohmann::json;

namespace {

constexpr int kStateVersion = 1;
// The journal is folded into a new snapshot once it is larger than this and
// than the snapshot itself: the folding's cost is spread over the changes
// that filled it.
constexpr size_t kJournalFloor = 64 * 1024;

json change_json(const overlay::PeerChanges& c) {
  json peers = json::array(), remove = json::array();
  for (const auto& p : c.peers) peers.push_back(overlay::to_json(p));
  for (const auto& k : c.remove) remove.push_back(overlay::key_to_base64(k));
  return {{"cluster_id", c.cluster_id}, {"peers", std::move(peers)}, {"remove", std::move(remove)}};
}

Status fsync_dir(const std::string& dir) {
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.valid() || ::fsync(d.get()) != 0) return Error::from_errno("fsync " + dir);
  return {};
}

// The journal as written (read_text_file would strip its last newline, which
// tells a complete last line from a cut one).
Result<std::string> read_journal(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno("open " + path);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno("read " + path);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (64u << 20)) return Error{path + " is larger than 64 MiB", EFBIG};
  }
}

}  // namespace

Result<PersistedState> parse_state(const std::string& text, const overlay::ParseOptions& opt, uint64_t* serial) {
  json doc = fa::parse_json(text);
  if (doc.is_discarded()) return Error{"not valid JSON"};
  if (!doc.is_object()) return Error{"top level is not an object"};
  auto v = doc.find("version");
  if (v == doc.end() || !v->is_number_integer() || v->get<int64_t>() != kStateVersion)
    return Error{"version is not " + std::to_string(kStateVersion)};
  if (serial) {
    auto s = doc.find("serial");
    *serial = s != doc.end() && s->is_number_unsigned() ? s->get<uint64_t>() : 0;
  }
  PersistedState s;
  if (auto r = doc.find("removing"); r != doc.end() && !r->is_null()) {
    auto ifname = r->is_object() ? r->find("interface") : r->end();
    if (ifname == r->end() || !ifname->is_string() || !overlay::valid_interface_name(ifname->get<std::string>()))
      return Error{"removing: expected {\"interface\": NAME, \"netns\": PATH or null}"};
    Removal rm{ifname->get<std::string>(), std::nullopt};
    if (auto ns = r->find("netns"); ns != r->end() && ns->is_string()) rm.netns = ns->get<std::string>();
    s.removing = std::move(rm);
  }
  if (auto m = doc.find("mesh"); m != doc.end() && !m->is_null()) {
    auto p = overlay::parse_desired(*m, opt);
    if (!p.ok()) return Error{"mesh: " + p.errors.front().str()};
    s.mesh = std::move(*p.value);
  }
  return s;
}

std::string dump_state(const PersistedState& s, uint64_t serial) {
  json doc = {{"version", kStateVersion},
              {"serial", serial},
              {"mesh", s.mesh ? overlay::to_json(*s.mesh) : json(nullptr)}};
  if (s.removing)
    doc["removing"] = {{"interface", s.removing->interface},
                       {"netns", s.removing->netns ? json(*s.removing->netns) : json(nullptr)}};
  return doc.dump() + "\n";
}

StateStore::StateStore(std::string dir, overlay::ParseOptions opt) : dir_(std::move(dir)), opt_(std::move(opt)) {}

// The journal's lines on top of `s`. *good_bytes: where its last complete,
// valid line ends (a cut last line is not an error).
Result<PersistedState> StateStore::replay(PersistedState s, const std::string& journal, size_t* good_bytes) {
  *good_bytes = 0;
  size_t pos = 0;
  bool header = true;
  while (pos < journal.size()) {
    size_t nl = journal.find('\n', pos);
    if (nl == std::string::npos) break;  // cut by a crash: never acknowledged
    json line = fa::parse_json(std::string_view(journal).substr(pos, nl - pos));
    if (line.is_discarded()) return Error{"journal line at byte " + std::to_string(pos) + " is not JSON"};
    if (header) {
      auto sr = line.find("serial");
      if (sr == line.end() || !sr->is_number_unsigned() || sr->get<uint64_t>() != serial_)
        return s;  // another snapshot's journal: nothing of it applies
      header = false;
    } else {
      if (!s.mesh) return Error{"journal holds a change but state.json holds no mesh"};
      auto c = overlay::parse_peer_changes(line, opt_);
      if (!c.ok()) return Error{"journal: " + c.errors.front().str()};
      auto after = overlay::with_changes(*s.mesh, *c.value, opt_);
      if (!after.ok()) return Error{"journal: " + after.errors.front().str()};
      s.mesh = std::move(*after.value);
    }
    pos = nl + 1;
    *good_bytes = pos;
  }
  return s;
}

Result<LoadedState> StateStore::load() {
  LoadedState out;
  journal_.reset();
  serial_ = 0;
  journal_bytes_ = snapshot_bytes_ = 0;
  // A write cut short by a crash leaves its temporary behind: never read.
  remove_stale_temporaries(snapshot_path());
  auto text = read_text_file(snapshot_path(), 64 << 20);
  std::string problem;
  bool have_snapshot = false;
  if (!text) {
    if (text.error().sys_errno != ENOENT && text.error().sys_errno != EFBIG) return text.take_error();
    if (text.error().sys_errno == EFBIG) problem = text.error().message;
  } else {
    auto parsed = parse_state(*text, opt_, &serial_);
    if (parsed) {
      out.state = std::move(*parsed);
      snapshot_bytes_ = text->size();
      have_snapshot = true;
    } else {
      problem = parsed.error().message;
    }
  }
  if (problem.empty()) {
    auto journal = read_journal(journal_path());
    if (journal) {
      size_t good = 0;
      auto replayed = have_snapshot ? replay(out.state, *journal, &good) : Result<PersistedState>(out.state);
      if (!replayed) {
        problem = replayed.error().message;
      } else {
        out.state = std::move(*replayed);
        if (good == 0) {
          ::unlink(journal_path().c_str());  // another snapshot's, or empty
        } else {
          Fd fd(::open(journal_path().c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
          if (!fd.valid()) return Error::from_errno("open " + journal_path());
          if (good < journal->size() && ::ftruncate(fd.get(), static_cast<off_t>(good)) != 0)
            return Error::from_errno("truncate the cut last line of " + journal_path());
          journal_ = std::move(fd);
          journal_bytes_ = good;
        }
      }
    } else if (journal.error().sys_errno != ENOENT) {
      return journal.take_error();
    }
  }
  if (problem.empty()) return out;
  out.state = {};
  out.problem = problem;
  const std::string suffix = ".corrupt-" + std::to_string(std::time(nullptr));
  out.moved_aside = snapshot_path() + suffix;
  if (std::rename(snapshot_path().c_str(), out.moved_aside.c_str()) != 0 && errno != ENOENT)
    return Error::from_errno("state file " + snapshot_path() + " is unusable (" + problem +
                             ") and cannot be moved aside");
  if (std::rename(journal_path().c_str(), (journal_path() + suffix).c_str()) != 0 && errno != ENOENT)
    return Error::from_errno("journal " + journal_path() + " cannot be moved aside");
  serial_ = 0;
  return out;
}

Status StateStore::save(const PersistedState& s) {
  const std::string text = dump_state(s, serial_ + 1);
  if (Status w = write_file_atomic(snapshot_path(), text, 0600); !w) return w;
  ++serial_;
  snapshot_bytes_ = text.size();
  // The old journal belongs to the old serial: were the process to die
  // before this unlink, the next load would ignore it anyway.
  journal_.reset();
  journal_bytes_ = 0;
  if (::unlink(journal_path().c_str()) != 0 && errno != ENOENT) return Error::from_errno("remove " + journal_path());
  return {};
}

Status StateStore::append(const overlay::PeerChanges& change, const overlay::DesiredMesh& after) {
  if (journal_bytes_ > std::max(kJournalFloor, snapshot_bytes_)) return save(PersistedState{after, std::nullopt});
  if (!journal_.valid()) {
    // A new journal starts with the serial of the snapshot it continues.
    Fd fd(::open(journal_path().c_str(), O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd.valid()) return Error::from_errno("create " + journal_path());
    const std::string head = json{{"serial", serial_}}.dump() + "\n";
    if (Status w = write_all(fd.get(), head, "write " + journal_path()); !w) return w;
    fault_point("journal: header written, not synced");
    if (::fsync(fd.get()) != 0) return Error::from_errno("fsync " + journal_path());
    if (Status d = fsync_dir(dir_); !d) return d;
    journal_ = std::move(fd);
    journal_bytes_ = head.size();
  }
  const std::string line = change_json(change).dump() + "\n";
  if (Status w = write_all(journal_.get(), line, "write " + journal_path()); !w) {
    // What was written of it (if anything) is a cut last line: start over
    // from a snapshot rather than append after it.
    journal_.reset();
    return save(PersistedState{after, std::nullopt}).ok() ? Status{} : w;
  }
  fault_point("journal: line written, not synced");
  if (::fdatasync(journal_.get()) != 0) return Error::from_errno("fdatasync " + journal_path());
  fault_point("journal: line synced");
  journal_bytes_ += line.size();
  return {};
}

Result<LoadedState> load_state(const std::string& state_dir, const overlay::ParseOptions& opt) {
  return StateStore(state_dir, opt).load();
}

Status save_state(const std::string& state_dir, const PersistedState& s) {
  return StateStore(state_dir, {}).save(s);
}

}  // namespace fa::agent
