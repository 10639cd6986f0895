// SPDX-License-Identifier: Apache-2.0
// The state files a start reads (agent/state): the input is state.json, and
// after its first empty line state.journal (no empty line: no journal; the
// snapshot is one line, so a seed reads as the two files one after the
// other). parse_state reads the
// snapshot alone; then StateStore::load() reads both from a directory and
// replays the journal, as Core::start does.
// Checked: a snapshot that parses writes back (dump_state) to the same
// state; load() answers (state, or the files moved aside with a reason)
// without throwing; what it loaded is saved and loaded again unchanged.
#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "agent/state.hpp"
#include "common/fs.hpp"
#include "fuzz/fuzz.hpp"

namespace {

const fa::overlay::ParseOptions kOpt;

// A directory of this process on tmpfs when there is one: the store
// fsyncs each write, which costs nothing there.
const std::string& dir() {
  static const std::string d = [] {
    std::string t = (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/fa-fuzz-state-XXXXXX");
    if (!::mkdtemp(t.data())) std::abort();
    return t;
  }();
  return d;
}

void empty_dir() {
  DIR* d = ::opendir(dir().c_str());
  if (!d) std::abort();
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      ::unlink((dir() + "/" + e->d_name).c_str());
  ::closedir(d);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = fa_fuzz::text(data, size);
  const size_t blank = in.find("\n\n");
  const std::string snapshot(in.substr(0, blank == std::string_view::npos ? blank : blank + 1));

  uint64_t serial = 0;
  if (auto s = fa::agent::parse_state(snapshot, kOpt, &serial)) {
    auto back = fa::agent::parse_state(fa::agent::dump_state(*s, serial), kOpt);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(*back == *s);
  }

  empty_dir();
  FUZZ_CHECK(fa::write_file_atomic(dir() + "/state.json", snapshot, 0600).ok());
  if (blank != std::string_view::npos) {
    auto journal = in.substr(blank + 2);
    FUZZ_CHECK(fa::write_file_atomic(dir() + "/state.journal", journal, 0600).ok());
  }
  fa::agent::StateStore store(dir(), kOpt);
  auto loaded = store.load();
  FUZZ_CHECK(loaded.ok());  // only I/O failures are errors, and tmpfs has none
  FUZZ_CHECK(loaded->moved_aside.empty() == loaded->problem.empty());
  if (!loaded->moved_aside.empty()) {
    FUZZ_CHECK(loaded->state == fa::agent::PersistedState{});
    return 0;
  }
  FUZZ_CHECK(store.save(loaded->state).ok());
  auto again = fa::agent::StateStore(dir(), kOpt).load();
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->problem.empty());
  FUZZ_CHECK(again->state == loaded->state);
  return 0;
}
