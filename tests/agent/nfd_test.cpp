// SPDX-License-Identifier: Apache-2.0
// Node labels (agent/nfd.hpp): the label values on data, the feature file
// read back by the rules NFD's local source applies to it, every label
// checked by kubectl's own label validation (apimachinery's
// IsQualifiedName and IsValidLabelValue, run offline with `kubectl label
// --local`), and the writer on a real directory.
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "agent/nfd.hpp"
#include "common/fs.hpp"
#include "probes/inspect.hpp"

using namespace fa::agent;
using nlohmann::json;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/fa-nfd-test-XXXXXX";
    REQUIRE(::mkdtemp(t) != nullptr);
    path = t;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// RFC 3339 as NFD's directive takes it (Go's time.RFC3339): date, 'T',
// time, fraction optional, 'Z' or an offset. -1 when it is not one.
long long parse_rfc3339(const std::string& s) {
  std::tm tm{};
  const char* end = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return -1;
  if (*end == '.')
    for (++end; *end >= '0' && *end <= '9';) ++end;
  long long offset = 0;
  if (*end == 'Z') {
    ++end;
  } else if ((*end == '+' || *end == '-') && std::strlen(end) == 6 && end[3] == ':') {
    offset = (std::stoi(std::string(end + 1, 2)) * 60 + std::stoi(std::string(end + 4, 2))) * 60;
    if (*end == '-') offset = -offset;
    end += 6;
  } else {
    return -1;
  }
  if (*end != '\0') return -1;
  return static_cast<long long>(::timegm(&tm)) - offset;
}

// A feature file read by the rules of NFD's local source, as its
// documentation gives them (docs/usage/customization-guide.md, "Feature
// files"; NFD 0.14 and later): each line trimmed, empty lines skipped, `#`
// starts a comment, `# +expiry-time=<RFC 3339>` applies to the lines after
// it (lines after an expiry that has passed are dropped), `name=value` split
// at the first '=', a name alone means "true". A directive NFD does not know,
// or an expiry it cannot parse, goes into `errors` (NFD logs those).
struct Parsed {
  std::map<std::string, std::string> labels;
  std::vector<std::string> errors;
  int expiry_directives = 0;
};

Parsed nfd_read(const std::string& text, long long now) {
  Parsed p;
  long long expiry = now;  // NFD starts with "now", which has not passed
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
    if (line[0] == '#') {
      if (line.rfind("# +", 0) != 0) continue;
      std::string d = line.substr(3);
      if (d.rfind("expiry-time=", 0) == 0) {
        long long t = parse_rfc3339(d.substr(12));
        if (t < 0)
          p.errors.push_back("unparsable expiry: " + line);
        else
          expiry = t;
        ++p.expiry_directives;
      } else if (d != "no-label" && d != "no-feature") {
        p.errors.push_back("unknown directive: " + line);
      }
      continue;
    }
    if (expiry < now) continue;
    auto eq = line.find('=');
    p.labels[line.substr(0, eq)] = eq == std::string::npos ? "true" : line.substr(eq + 1);
  }
  return p;
}

// NFD's master refuses kubernetes.io and its subdomains (but its own
// feature.node / profile.node namespaces), and unprefixed names are
// prefixed now and refused later: ours must have a vendor namespace.
bool nfd_namespace_ok(const std::string& name) {
  auto slash = name.find('/');
  if (slash == std::string::npos || slash == 0) return false;
  std::string ns = name.substr(0, slash);
  auto under = [&ns](const std::string& d) {
    return ns == d || (ns.size() > d.size() && ns.compare(ns.size() - d.size() - 1, d.size() + 1, "." + d) == 0);
  };
  if (under("kubernetes.io")) return under("feature.node.kubernetes.io") || under("profile.node.kubernetes.io");
  return true;
}

struct Run {
  int rc = -1;
  std::string out;
};

Run sh(const std::string& cmd) {
  Run r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// kubectl's label validation on a Node object, without a cluster: the
// labels it would set, or its error.
Run kubectl_label(const std::map<std::string, std::string>& labels) {
  TempDir d;
  std::ofstream(d.path + "/node.yaml") << "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-node-1\n";
  std::string cmd = "kubectl label --local -o json -f " + d.path + "/node.yaml";
  for (const auto& [k, v] : labels) cmd += " '" + k + "=" + v + "'";
  return sh(cmd);
}

json inspect_of(const std::string& fixture) {
  fa::probes::InspectOptions o;
  o.sysfs_root = std::string(FA_FIXTURES_DIR) + "/" + fixture;
  o.proc_root = o.sysfs_root + ".proc";
  o.query_sm = false;
  return fa::probes::to_json(fa::probes::discover(o));
}

// The shapes of docs/inspect.md: an InfiniBand host with 8 rails and a
// RoCE host with 8 rails of 400G (one at 200G).
json ib_doc() {
  json hcas = json::array();
  json ports = json::array();
  for (int i = 0; i < 8; ++i) {
    std::string n = "mlx5_" + std::to_string(i);
    hcas.push_back({{"name", n}, {"ports", {{{"port", 1}, {"state", "ACTIVE"}, {"rate_gbps", 400}}}}});
    ports.push_back(n + ":1");
  }
  return {{"hcas", hcas},
          {"fabric",
           {{"kind", "infiniband"},
            {"id", "ib:fe80000000000000:0002c90300a1b2c3"},
            {"ports", ports},
            {"lossless", "yes"}}},
          {"gpus", {{"vendor", "nvidia"}, {"model", "H100 SXM5 80GB"}, {"count", 8}}},
          {"gpudirect", {{"rdma", true}, {"via", "nvidia_peermem"}}}};
}

json roce_doc() {
  json d = ib_doc();
  d["fabric"]["kind"] = "roce";
  d["fabric"]["id"] = "roce:p1:10.0.0.0/24,10.0.1.0/24,10.0.2.0/24,10.0.3.0/24,10.0.4.0/24,10.0.5.0/24,10.0.6.0/24,10.0.7.0/24";
  d["fabric"]["lossless"] = "unknown";
  d["hcas"][5]["ports"][0]["rate_gbps"] = 200;
  d["gpudirect"]["rdma"] = nullptr;
  return d;
}

std::map<std::string, std::string> as_map(const nfd::Labels& l) { return {l.begin(), l.end()}; }

}  // namespace

TEST_CASE("node labels: an InfiniBand id reads back, RoCE ids, long ids and odd ids are hashed", "[nfd]") {
  CHECK(nfd::fabric_id_value("ib:fe80000000000000:0002c90300a1b2c3") == "ib.fe80000000000000.0002c90300a1b2c3");
  // Hashes as `printf %s ID | sha256sum | cut -c1-40` prints them.
  CHECK(nfd::fabric_id_value("roce:p1:10.20.0.0/16") == "roce-548dbfedbcc26443fb2e8254df7c485c0a5c59ab");
  CHECK(nfd::fabric_id_value(roce_doc()["fabric"]["id"].get<std::string>()) ==
        "roce-7a885996014eda1cde175f7b6442c8adf4364ce8");
  // 63 characters fit, 64 do not.
  const std::string id63 = "ib:" + std::string(60, 'a');
  const std::string id64 = "ib:" + std::string(61, 'a');
  CHECK(nfd::fabric_id_value(id63) == "ib." + std::string(60, 'a'));
  CHECK(nfd::fabric_id_value(id64).rfind("ib-", 0) == 0);
  CHECK(nfd::fabric_id_value(id64).size() == 43);
  // An id that would not begin or end with an alphanumeric, or whose kind
  // is not a word, is hashed under "fabric".
  CHECK(nfd::fabric_id_value("ib:abc:").rfind("ib-", 0) == 0);
  CHECK(nfd::fabric_id_value(":x").rfind("fabric-", 0) == 0);
  CHECK(nfd::fabric_id_value("Weird Kind:x").rfind("fabric-", 0) == 0);
  for (const char* id : {"ib:fe80000000000000:0002c90300a1b2c3", "roce:p1:10.20.0.0/16", ":x", "ib:abc:", "a b c"})
    CHECK(nfd::valid_label_value(nfd::fabric_id_value(id)));
}

TEST_CASE("node labels: different fabric ids never share a label value", "[nfd]") {
  // Providers made of the characters a provider_id may hold (the ones the
  // readable form and the hashed form use among them), segments, rails,
  // InfiniBand prefixes and SMs.
  std::set<std::string> ids;
  for (const char* prov : {"p1", "p.1", "p-1", "p_1", "p", "1", "a.b", "a-b", "a_b", "roce", "ib", "x.10.0"})
    for (const char* seg : {"10.0.0.0/24", "10.0.0.0/16", "10.0.1.0/24", "0.0.0.0/8"}) {
      ids.insert(std::string("roce:") + prov + ":" + seg);
      ids.insert(std::string("roce:") + prov + ":" + seg + ",10.9.0.0/24");
    }
  for (const char* pfx : {"fe80000000000000", "fe80000000000001"})
    for (const char* sm : {"0002c90300a1b2c3", "0002c90300a1b2c4"}) ids.insert(std::string("ib:") + pfx + ":" + sm);
  std::map<std::string, std::string> by_value;
  for (const auto& id : ids) {
    const std::string v = nfd::fabric_id_value(id);
    INFO(id << " -> " << v);
    CHECK(nfd::valid_label_value(v));
    auto [it, fresh] = by_value.emplace(v, id);
    CHECK(fresh);
  }
  CHECK(by_value.size() == ids.size());
}

TEST_CASE("node labels: descriptive values keep what a label can hold", "[nfd]") {
  CHECK(nfd::descriptive_value("H100 SXM5 80GB") == "H100-SXM5-80GB");
  CHECK(nfd::descriptive_value("  AMD Instinct MI300X (OAM) ") == "AMD-Instinct-MI300X-OAM");
  CHECK(nfd::descriptive_value("A100-SXM4-80GB") == "A100-SXM4-80GB");
  CHECK(nfd::descriptive_value("--") == "");
  CHECK(nfd::descriptive_value("") == "");
  // Cut to 63, and a cut that ends on a separator drops it.
  const std::string longish = std::string(62, 'x') + " y";
  CHECK(nfd::descriptive_value(longish) == std::string(62, 'x'));
  CHECK(nfd::valid_label_value(nfd::descriptive_value(std::string(200, 'z'))));
  CHECK(nfd::descriptive_value(std::string(200, 'z')).size() == 63);
  // The rule itself.
  CHECK(nfd::valid_label_value(""));
  CHECK(nfd::valid_label_value(std::string(63, 'a')));
  CHECK_FALSE(nfd::valid_label_value(std::string(64, 'a')));
  CHECK_FALSE(nfd::valid_label_value("-a"));
  CHECK_FALSE(nfd::valid_label_value("a."));
  CHECK_FALSE(nfd::valid_label_value("a:b"));
  CHECK_FALSE(nfd::valid_label_value("a b"));
}

TEST_CASE("node labels: what an InfiniBand host, a RoCE host and a failed discovery publish", "[nfd]") {
  CHECK(as_map(nfd::labels_of(ib_doc(), true)) == std::map<std::string, std::string>{
                                                       {"fabric-agent.io/fabric.kind", "infiniband"},
                                                       {"fabric-agent.io/fabric.id", "ib.fe80000000000000.0002c90300a1b2c3"},
                                                       {"fabric-agent.io/fabric.rails", "8"},
                                                       {"fabric-agent.io/fabric.rail-gbps", "400"},
                                                       {"fabric-agent.io/fabric.lossless", "yes"},
                                                       {"fabric-agent.io/gpu.vendor", "nvidia"},
                                                       {"fabric-agent.io/gpu.model", "H100-SXM5-80GB"},
                                                       {"fabric-agent.io/gpu.count", "8"},
                                                       {"fabric-agent.io/gpudirect-rdma", "true"},
                                                       {"fabric-agent.io/healthy", "true"},
                                                   });
  auto roce = as_map(nfd::labels_of(roce_doc(), false));
  CHECK(roce["fabric-agent.io/fabric.kind"] == "roce");
  CHECK(roce["fabric-agent.io/fabric.id"] == "roce-7a885996014eda1cde175f7b6442c8adf4364ce8");
  CHECK(roce["fabric-agent.io/fabric.rail-gbps"] == "200");  // the slowest rail
  CHECK(roce["fabric-agent.io/fabric.lossless"] == "unknown");
  CHECK(roce["fabric-agent.io/gpudirect-rdma"] == "unknown");
  CHECK(roce["fabric-agent.io/healthy"] == "false");
  // A fabric without an id (no provider_id, no SA): no fabric.id label, so
  // no gang that requires one lands here.
  json noid = roce_doc();
  noid["fabric"]["id"] = nullptr;
  CHECK(as_map(nfd::labels_of(noid, true)).count("fabric-agent.io/fabric.id") == 0);
  // Discovery failed: nothing is vouched for.
  CHECK(nfd::labels_of(nullptr, true) == nfd::Labels{{"fabric-agent.io/healthy", "false"}});
  // A host without a fabric.
  auto none = as_map(nfd::labels_of(inspect_of("d-none"), true));
  CHECK(none["fabric-agent.io/fabric.kind"] == "none");
  CHECK(none.count("fabric-agent.io/fabric.rails") == 0);
  // A discovered document (fixture a: 8 InfiniBand rails, 8 GPUs; no SM
  // asked, so no id).
  auto a = as_map(nfd::labels_of(inspect_of("a-ib-8gpu"), true));
  CHECK(a["fabric-agent.io/fabric.kind"] == "infiniband");
  CHECK(a.count("fabric-agent.io/fabric.id") == 0);
  CHECK(a["fabric-agent.io/gpu.count"] == "8");
  CHECK(nfd::valid_label_value(a["fabric-agent.io/gpu.model"]));
}

TEST_CASE("node labels: the feature file read by NFD's rules gives the labels until the expiry", "[nfd]") {
  const long long now = 1796000000;  // 2026-11-29T...
  const auto labels = nfd::labels_of(roce_doc(), true);
  const std::string text = nfd::render(labels, now + 90);
  INFO(text);
  CHECK(text.find("# +expiry-time=" + nfd::rfc3339_utc(now + 90) + "\n") != std::string::npos);
  CHECK(nfd::rfc3339_utc(0) == "1970-01-01T00:00:00Z");
  CHECK(parse_rfc3339(nfd::rfc3339_utc(now + 90)) == now + 90);
  // Read now: every label, nothing NFD would complain about, one directive.
  Parsed p = nfd_read(text, now);
  CHECK(p.errors.empty());
  CHECK(p.expiry_directives == 1);
  CHECK(p.labels == as_map(labels));
  for (const auto& [name, value] : p.labels) CHECK(nfd_namespace_ok(name));
  CHECK(text.size() < 65536);  // NFD ignores a larger file
  // Read after the expiry: nothing.
  CHECK(nfd_read(text, now + 91).labels.empty());
  // The reader itself: an expiry before the lines is what drops them, and
  // a comment of ours starting with "# +" would be an unknown directive.
  CHECK(nfd_read("a/b=1\n# +expiry-time=2000-01-01T00:00:00Z\nc/d=2\n", now).labels ==
        std::map<std::string, std::string>{{"a/b", "1"}});
  CHECK(nfd_read("# +labels for k8s\n", now).errors.size() == 1);
  CHECK(nfd::expiry_after(std::chrono::seconds(30)) == std::chrono::seconds(90));
  CHECK(nfd::expiry_after(std::chrono::seconds(1)) == std::chrono::seconds(60));
}

TEST_CASE("node labels: kubectl's label validation takes every label of the file", "[nfd][kubectl]") {
  // The control: kubectl refuses what the Kubernetes API would refuse.
  Run bad = kubectl_label({{"fabric-agent.io/fabric.id", "roce:p1:10.20.0.0/16"}});
  CHECK(bad.rc != 0);
  CHECK(bad.out.find("invalid label value") != std::string::npos);
  for (const json& doc : {ib_doc(), roce_doc(), inspect_of("a-ib-8gpu"), inspect_of("d-none"), inspect_of("f-rxe"),
                          inspect_of("g-roce-rails"), json(nullptr)}) {
    const auto labels = nfd::labels_of(doc, true);
    Parsed p = nfd_read(nfd::render(labels, 4102444800), 1796000000);
    Run r = kubectl_label(p.labels);
    INFO(r.out);
    REQUIRE(r.rc == 0);
    json node = json::parse(r.out);
    std::map<std::string, std::string> got = node["metadata"]["labels"];
    CHECK(got == as_map(labels));
  }
}

TEST_CASE("node labels: the writer replaces the file through a hidden temporary, mode 0644 under umask 077", "[nfd]") {
  TempDir d;
  const std::string dir = d.path + "/features.d";
  const std::string path = dir + "/fabric-agent";
  nfd::FeatureFile f;
  const auto labels = nfd::labels_of(ib_doc(), true);
  // No directory (a host without NFD): nothing written, not a warning.
  CHECK_FALSE(f.write(path, labels, 1796000000, std::chrono::seconds(30)).has_value());
  CHECK_FALSE(std::filesystem::exists(dir));
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  // A temporary a crash left behind goes with the first write.
  std::ofstream(dir + "/.fabric-agent.tmp.AbC123") << "half";
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO) >= 0);
  mode_t old = ::umask(077);
  auto w = f.write(path, labels, 1796000000, std::chrono::seconds(30));
  ::umask(old);
  CHECK_FALSE(w.has_value());
  // What NFD's watcher (inotify) sees: only dot files created and written,
  // the file itself only as the rename's target.
  std::vector<std::string> touched, arrived;
  alignas(inotify_event) char buf[8192];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    for (char* p = buf; p < buf + n;) {
      auto* e = reinterpret_cast<inotify_event*>(p);
      std::string name = e->len ? e->name : "";
      (e->mask & IN_MOVED_TO ? arrived : touched).push_back(name);
      p += sizeof(inotify_event) + e->len;
    }
  ::close(fd);
  CHECK_FALSE(touched.empty());
  for (const auto& n : touched) CHECK(n.rfind(".fabric-agent.tmp.", 0) == 0);
  CHECK(arrived == std::vector<std::string>{"fabric-agent"});
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  CHECK(nfd_read(slurp(path), 1796000000).labels == as_map(labels));
  CHECK(nfd_read(slurp(path), 1796000000 + 91).labels.empty());
  CHECK(*fa::list_dir(dir) == std::vector<std::string>{"fabric-agent"});
  // A directory that is not one: the warning names the file and the error.
  std::ofstream(d.path + "/plainfile") << "";
  auto bad = f.write(d.path + "/plainfile/fabric-agent", labels, 1796000000, std::chrono::seconds(30));
  REQUIRE(bad.has_value());
  CHECK(*bad == "node labels not written to " + d.path + "/plainfile/fabric-agent: create temp file for " + d.path +
                    "/plainfile/fabric-agent: Not a directory");
}
