// SPDX-License-Identifier: Apache-2.0
// Node labels for Kubernetes without cluster credentials: the daemon writes a
// Node Feature Discovery local feature file (features.d), which NFD's worker
// on the same node turns into labels of the Node (docs/kubernetes.md).
//
// The file, as NFD's local source reads it: one `name=value` per line, `#`
// comments, and the directive `# +expiry-time=<RFC 3339>`, which applies to
// the lines after it: once the time has passed NFD drops them. The daemon
// rewrites the file at every discovery pass with the expiry a few passes
// ahead, so labels go by themselves when the agent stops refreshing them.
//
// Pure parts (the labels of an inspect document, the file's text) take data;
// FeatureFile is the daemon's writer.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fa::agent::nfd {

// A vendor namespace: NFD publishes it as given (not kubernetes.io, which NFD
// refuses; not the unprefixed form, which NFD prefixes today and will stop
// accepting).
inline constexpr const char* kPrefix = "fabric-agent.io/";

// Kubernetes' rule for a label value (apimachinery IsValidLabelValue): at
// most 63 characters of [A-Za-z0-9._-], beginning and ending with a letter
// or a digit; or empty.
bool valid_label_value(std::string_view v);

// The label value of a fabric id. Equal ids give equal values and different
// ids different values, so a scheduler can keep a gang on one fabric by it:
// - an id of letters, digits and ':' only, at most 63 characters (the
//   InfiniBand ids, `ib:<prefix>:<SM GUID>`): ':' becomes '.', which the id
//   never holds, so the value reads back as the id;
// - any other id (RoCE ids hold '.', '/' and ','; any id too long):
//   `<kind>-<the first 40 hex digits of SHA-256 of the id>`, kind being the
//   id's text before its first ':' (e.g. `roce-3f1c...`). Such a value has
//   no '.', so it never equals a readable one.
std::string fabric_id_value(std::string_view id);

// A descriptive value (a GPU model): each run of characters a label value
// cannot hold becomes one '-', leading and trailing non-alphanumerics go, and
// the result is cut to 63 characters. "" when nothing is left.
std::string descriptive_value(std::string_view s);

using Labels = std::vector<std::pair<std::string, std::string>>;  // full name, value

// The labels of one discovery pass: `inspect` is the inspect document (null
// when discovery failed: only `healthy=false` then), `healthy` the
// /v1/status health. Every value passes valid_label_value; a value that
// would be empty is left out with its label.
Labels labels_of(const nlohmann::json& inspect, bool healthy);

// "2026-12-03T10:04:05Z" (RFC 3339, UTC).
std::string rfc3339_utc(int64_t unix_seconds);

// How far ahead of a pass its labels expire: three refresh intervals, at
// least 60 s, so two late passes do not drop labels of a node that is fine.
std::chrono::seconds expiry_after(std::chrono::seconds refresh_interval);

// The file's text: a comment, the expiry directive, the labels.
std::string render(const Labels& labels, int64_t expiry_unix);

// The daemon's writer. write() is called at each discovery pass: while the
// file's directory exists (NFD's worker makes it on Kubernetes nodes), the
// file is replaced atomically (a hidden temporary, which NFD skips, renamed
// over it), mode 0644 whatever the daemon's umask (NFD's worker runs as an
// unprivileged user). A missing directory is not an error (a host without
// Kubernetes): logged once. Returns the status warning when the file could
// not be written; each change of that problem is logged once.
class FeatureFile {
 public:
  std::optional<std::string> write(const std::string& path, const Labels& labels, int64_t now_unix,
                                   std::chrono::seconds refresh_interval);

 private:
  std::string path_;     // the path the state below is about
  std::string problem_;  // the last failure ("" when the last write worked)
  bool absent_logged_ = false;
  bool written_ = false;
};

}  // namespace fa::agent::nfd
