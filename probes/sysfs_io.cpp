// SPDX-License-Identifier: Apache-2.0
#include "probes/sysfs_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "common/fd.hpp"
#include "probes/logic.hpp"

namespace fa::probes {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
// Only to name a file (its canonical path) and to open below it: no
// permission check, and a link that is not a directory behaves as its full
// path would (reads below it fail with ENOTDIR).
constexpr int kPathFlags = O_PATH | O_CLOEXEC;

// A sysfs attribute is at most one page, and the kernel hands it over in one
// read: one openat + one read + close per file (as rdma-core's sysfs.c).
// Larger content is an error, never silently cut.
Result<std::string> read_attr(int dirfd, const std::string& dirpath, const std::string& name) {
  auto where = [&] { return dirpath + "/" + name; };
  Fd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno("open " + where());
  char buf[4097];
  ssize_t n;
  do {
    n = ::read(fd.get(), buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Error::from_errno("read " + where());
  if (static_cast<size_t>(n) == sizeof buf)
    return Error{"read " + where() + ": larger than a sysfs page", EFBIG};
  std::string out(buf, static_cast<size_t>(n));
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// An open directory that attributes are read and listed relative to: a deep
// /sys (or fixture) path is resolved once per directory, not once per file,
// and a directory is opened once to be both listed and read. One that could
// not be opened keeps its errno, and everything below it fails with that
// errno and its full path, as opening the full path would have.
class Dir {
 public:
  static Dir at(const std::string& path, int flags = kDirFlags) { return Dir(AT_FDCWD, path, path, flags); }
  Dir sub(const std::string& rel, int flags = kDirFlags) const {
    std::string p = path_ + "/" + rel;
    if (!fd_.valid()) return Dir(err_, std::move(p));
    return Dir(fd_.get(), rel, std::move(p), flags);
  }

  bool ok() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

  Result<std::string> read(const std::string& name) const {
    if (!fd_.valid()) return Error::from_errno("open " + path_ + "/" + name, err_);
    return read_attr(fd_.get(), path_, name);
  }

  // Names without "." and "..", sorted (what fa::list_dir returns), read
  // with getdents64 on this directory's own descriptor. Once per Dir: the
  // descriptor's offset stays at the end.
  Result<std::vector<std::string>> list() const {
    if (!fd_.valid()) return Error::from_errno("opendir " + path_, err_);
    std::vector<std::string> names;
    alignas(dirent64) char buf[32768];
    for (;;) {
      ssize_t n = ::getdents64(fd_.get(), buf, sizeof buf);
      if (n < 0) return Error::from_errno("readdir " + path_);
      if (n == 0) break;
      for (ssize_t off = 0; off < n;) {
        const auto* e = reinterpret_cast<const dirent64*>(buf + off);
        off += e->d_reclen;
        std::string_view name(e->d_name);
        if (name != "." && name != "..") names.emplace_back(name);
      }
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  Dir(int at, const std::string& rel, std::string path, int flags)
      : fd_(::openat(at, rel.c_str(), flags)), path_(std::move(path)) {
    if (!fd_.valid()) err_ = errno;
  }
  Dir(int err, std::string path) : path_(std::move(path)), err_(err) {}

  Fd fd_;
  std::string path_;
  int err_ = 0;
};

// Canonical path of an open file, what realpath() returns for it, from one
// readlink of /proc/self/fd/N: glibc's realpath() readlinks every component
// of a deep PCI device path. Where /proc is not mounted, realpath().
std::string real_path(const Dir& d) {
  if (!d.ok()) return {};
  char link[32];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", d.fd());
  char buf[PATH_MAX];
  ssize_t n = ::readlink(link, buf, sizeof buf);
  if (n > 0 && static_cast<size_t>(n) < sizeof buf && buf[0] == '/') return std::string(buf, static_cast<size_t>(n));
  if (!::realpath(d.path().c_str(), buf)) return {};
  return buf;
}

// What every read needs: the real path of <root>/devices (to name PCI
// paths below it) and where warnings go.
struct Ctx {
  const std::string& real_devs;
  std::vector<std::string>& warnings;
  void warn(std::string w) { warnings.push_back(std::move(w)); }
};

bool is_number(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Optional attribute: missing -> "", unreadable -> warning.
std::string read_opt(Ctx& c, const Dir& d, const std::string& name) {
  auto r = d.read(name);
  if (r) return *r;
  if (r.error().sys_errno != ENOENT) c.warn(r.error().message);
  return {};
}

// Required attribute: any failure is a warning.
std::optional<std::string> read_req(Ctx& c, const Dir& d, const std::string& name) {
  auto r = d.read(name);
  if (r) return *r;
  c.warn(r.error().message);
  return std::nullopt;
}

std::optional<int> read_numa(Ctx& c, const Dir& d, const std::string& name) {
  auto r = d.read(name);
  if (!r) {
    if (r.error().sys_errno != ENOENT) c.warn(r.error().message);
    return std::nullopt;
  }
  int v = 0;
  const std::string& s = *r;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < -1) {
    c.warn(d.path() + "/" + name + ": not a NUMA node number: '" + s + "'");
    return std::nullopt;
  }
  if (v < 0) return std::nullopt;  // -1: no NUMA affinity reported
  return v;
}

// PCI function behind a sysfs device link (opened with kPathFlags): its
// address and its path below devices/ (the chain of bridges NCCL's topology
// search walks).
void read_pci(Ctx& c, const Dir& device, std::string& pci, std::string& pci_path) {
  std::string rp = real_path(device);
  if (rp.empty()) return;
  if (!c.real_devs.empty() && rp.rfind(c.real_devs + "/", 0) == 0) pci_path = rp.substr(c.real_devs.size() + 1);
  std::string base = rp.substr(rp.rfind('/') + 1);
  // 0000:03:00.0
  if (base.size() == 12 && base[4] == ':' && base[7] == ':' && base[10] == '.') pci = base;
}

void read_counters(Ctx& c, const Dir& port, const char* sub, std::map<std::string, uint64_t>& out) {
  Dir d = port.sub(sub);
  auto names = d.list();
  if (!names) {
    if (names.error().sys_errno != ENOENT) c.warn(names.error().message);
    return;
  }
  std::vector<std::string> bad;
  for (const auto& n : *names) {
    auto r = d.read(n);
    if (!r) {
      if (r.error().sys_errno != EISDIR) bad.push_back(n + " (" + std::strerror(r.error().sys_errno) + ")");
      continue;
    }
    auto v = parse_counter(*r);
    if (!v) {
      bad.push_back(n + " ('" + r->substr(0, 32) + "')");
      continue;
    }
    out.emplace_hint(out.end(), n, *v);  // names come sorted
  }
  if (!bad.empty()) {
    std::string s;
    for (const auto& b : bad) s += (s.empty() ? "" : ", ") + b;
    c.warn(d.path() + ": counters not read: " + s);
  }
}

void read_gids(Ctx& c, const Dir& pd, Port& port) {
  Dir gids = pd.sub("gids");
  auto names = gids.list();
  if (!names) {
    c.warn(names.error().message);
    return;
  }
  std::vector<int> idx;
  for (const auto& n : *names)
    if (is_number(n) && n.size() < 6) idx.push_back(std::stoi(n));
  std::sort(idx.begin(), idx.end());
  Dir types = pd.sub("gid_attrs/types"), ndevs = pd.sub("gid_attrs/ndevs");
  for (int i : idx) {
    std::string n = std::to_string(i);
    auto g = gids.read(n);
    if (!g) {
      // The kernel answers EINVAL for an empty slot; anything else is news.
      if (g.error().sys_errno != EINVAL) c.warn(g.error().message);
      continue;
    }
    if (!is_valid_gid(*g)) {
      c.warn(gids.path() + "/" + n + ": not a GID: '" + g->substr(0, 48) + "'");
      continue;
    }
    if (is_zero_gid(*g)) continue;  // empty slot
    Gid gid;
    gid.index = i;
    gid.gid = std::move(*g);
    auto t = types.read(n);
    if (t && (*t == "IB/RoCE v1" || *t == "RoCE v2")) {
      gid.type = std::move(*t);
    } else if (t) {
      c.warn(types.path() + "/" + n + ": unknown GID type '" + t->substr(0, 32) + "'");
    } else {
      c.warn(types.path() + "/" + n + ": GID " + n + " is set but its type is unreadable (" +
             std::strerror(t.error().sys_errno) + ")");
    }
    auto nd = ndevs.read(n);
    if (nd) gid.netdev = std::move(*nd);
    port.gids.push_back(std::move(gid));
  }
}

std::string port_netdev(const Dir& hd, const Port& p) {
  for (const auto& g : p.gids)
    if (g.index == 0 && !g.netdev.empty()) return g.netdev;
  // Soft-RoCE (rxe, siw) names its netdev in `parent`.
  if (auto r = hd.read("parent"); r && !r->empty()) return *r;
  // mlx5 and others: the PCI function's net/ entries, matched by dev_port.
  Dir net = hd.sub("device/net");
  auto nets = net.list();
  if (nets) {
    for (const auto& n : *nets) {
      auto dp = net.read(n + "/dev_port");
      auto v = dp ? parse_uint(*dp) : std::nullopt;
      if (!dp || (v && static_cast<int>(*v) == p.port - 1)) return n;
    }
  }
  return {};
}

Port read_port(Ctx& c, const Dir& hd, const Dir& ports, const std::string& pname) {
  Dir pd = ports.sub(pname);
  const std::string& pp = pd.path();
  Port p;
  p.port = std::stoi(pname);
  if (auto s = read_req(c, pd, "state")) {
    if (auto v = parse_numbered_state(*s))
      p.state = v->second;
    else
      c.warn(pp + "/state: expected '<n>: <NAME>' like '4: ACTIVE', got '" + s->substr(0, 32) + "'");
  }
  if (auto s = read_req(c, pd, "phys_state")) {
    if (auto v = parse_numbered_state(*s))
      p.phys_state = v->second;
    else
      c.warn(pp + "/phys_state: expected '<n>: <Name>' like '5: LinkUp', got '" + s->substr(0, 32) + "'");
  }
  if (auto s = read_req(c, pd, "link_layer")) {
    if (*s == "InfiniBand" || *s == "Ethernet")
      p.link_layer = *s;
    else
      c.warn(pp + "/link_layer: expected InfiniBand or Ethernet, got '" + s->substr(0, 32) + "'");
  }
  if (auto s = read_req(c, pd, "rate")) {
    p.rate_gbps = parse_rate_gbps(*s);
    if (!p.rate_gbps) c.warn(pp + "/rate: expected '<n> Gb/sec (...)', got '" + s->substr(0, 32) + "'");
  }
  for (auto [file, dst] : {std::pair{"lid", &p.lid}, std::pair{"sm_lid", &p.sm_lid}}) {
    if (auto s = read_req(c, pd, file)) {
      *dst = parse_uint(*s);
      if (!*dst || **dst > 0xffff) {
        c.warn(pp + "/" + file + ": expected a 16-bit LID like 0x1a, got '" + s->substr(0, 32) + "'");
        *dst = std::nullopt;
      }
    }
  }
  read_gids(c, pd, p);
  if (p.link_layer == "Ethernet") {
    p.netdev = port_netdev(hd, p);
    if (p.netdev.empty()) c.warn(pp + ": RoCE port without a netdev (no GID 0 ndev, parent or device/net)");
  }
  read_counters(c, pd, "counters", p.counters);
  read_counters(c, pd, "hw_counters", p.hw_counters);
  return p;
}

Hca read_hca(Ctx& c, const Dir& cls, const std::string& name) {
  Dir hd = cls.sub(name);
  Hca h;
  h.name = name;
  if (auto g = read_req(c, hd, "node_guid")) {
    if (g->size() == 19 && is_valid_gid(*g + ":0000:0000:0000:0000"))
      h.node_guid = *g;
    else
      c.warn(hd.path() + "/node_guid: expected xxxx:xxxx:xxxx:xxxx, got '" + g->substr(0, 32) + "'");
  }
  h.fw_ver = read_opt(c, hd, "fw_ver");
  h.board_id = read_opt(c, hd, "board_id");
  Dir dev = hd.sub("device", kPathFlags);
  read_pci(c, dev, h.pci, h.pci_path);
  if (!h.pci.empty()) h.numa_node = read_numa(c, dev, "numa_node");
  Dir ports = hd.sub("ports");
  auto pl = ports.list();
  if (!pl) {
    c.warn(pl.error().message);
  } else {
    std::vector<std::string> pn;
    for (const auto& p : *pl)
      if (is_number(p) && p.size() < 4) pn.push_back(p);
    std::sort(pn.begin(), pn.end(), [](const auto& a, const auto& b) { return natural_less(a, b); });
    for (const auto& p : pn) h.ports.push_back(read_port(c, hd, ports, p));
    if (pn.empty()) c.warn(hd.path() + "/ports: no ports");
  }
  return h;
}

std::vector<GpuDevice> scan_gpus(Ctx& c, const std::string& root) {
  std::vector<GpuDevice> out;
  Dir dir = Dir::at(root + "/bus/pci/devices");
  auto names = dir.list();
  if (!names) {
    if (names.error().sys_errno != ENOENT) c.warn(names.error().message);
    return out;
  }
  for (const auto& n : *names) {
    // Two attributes of every PCI function: read through the bus/pci link
    // rather than opening each function's directory for them.
    auto vendor = dir.read(n + "/vendor");
    auto cls = dir.read(n + "/class");
    if (!vendor || !cls) continue;  // not every entry is worth a warning; GPUs are checked below
    std::string v = gpu_vendor(*vendor, *cls);
    if (v.empty()) continue;
    GpuDevice g;
    g.vendor = v;
    auto dev = read_req(c, dir, n + "/device");
    g.device_id = dev ? *dev : "unknown";
    g.model = gpu_model(*vendor, g.device_id);
    Dir d = dir.sub(n, kPathFlags);
    read_pci(c, d, g.pci, g.pci_path);
    if (g.pci.empty()) g.pci = n;
    g.numa_node = read_numa(c, d, "numa_node");
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const GpuDevice& a, const GpuDevice& b) { return a.pci < b.pci; });
  return out;
}

SysfsScan scan(const std::string& root, std::vector<std::string>& warnings, bool want_hcas, bool want_gpus) {
  SysfsScan out;
  const std::string real_devs = [&] {
    std::string r = real_path(Dir::at(root, kPathFlags));
    return r.empty() ? r : r + "/devices";
  }();
  Ctx c{real_devs, warnings};
  if (want_hcas) {
    Dir cls = Dir::at(root + "/class/infiniband");
    auto names = cls.list();
    if (names) {
      for (const auto& n : *names) out.hcas.push_back(read_hca(c, cls, n));
    } else if (names.error().sys_errno != ENOENT) {
      c.warn(names.error().message);  // else: no RDMA stack loaded, no HCAs
    }
    std::sort(out.hcas.begin(), out.hcas.end(),
              [](const Hca& a, const Hca& b) { return natural_less(a.name, b.name); });
  }
  if (want_gpus) out.gpus = scan_gpus(c, root);
  return out;
}

}  // namespace

SysfsScan read_sysfs(const std::string& root, std::vector<std::string>& warnings) {
  return scan(root, warnings, true, true);
}

std::vector<Hca> read_hcas(const std::string& root, std::vector<std::string>& warnings) {
  return scan(root, warnings, true, false).hcas;
}

std::vector<GpuDevice> read_gpus(const std::string& root, std::vector<std::string>& warnings) {
  return scan(root, warnings, false, true).gpus;
}

std::optional<Ecn> read_ecn(const std::string& sysfs_root, const std::string& netdev) {
  Dir ecn = Dir::at(sysfs_root + "/class/net/" + netdev + "/ecn");
  if (!ecn.ok()) return std::nullopt;
  Ecn e;
  auto side = [&](const char* name, uint8_t& mask) {
    Dir d = ecn.sub(std::string(name) + "/enable");
    for (int p = 0; p < 8; ++p) {
      auto v = d.read(std::to_string(p));
      if (v && parse_counter(*v).value_or(0) != 0) mask |= static_cast<uint8_t>(1u << p);
    }
  };
  side("roce_np", e.np);
  side("roce_rp", e.rp);
  return e;
}

}  // namespace fa::probes
