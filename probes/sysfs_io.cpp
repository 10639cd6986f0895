// SPDX-License-Identifier: Apache-2.0
#include "probes/sysfs_io.hpp"

#include <limits.h>
#include <stdlib.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "common/fd.hpp"
#include "common/fs.hpp"
#include "probes/logic.hpp"

namespace fa::probes {
namespace {

struct Ctx {
  std::string root;       // as given
  std::string real_devs;  // realpath(root)/devices, for PCI paths
  std::vector<std::string>& warnings;
  void warn(std::string w) { warnings.push_back(std::move(w)); }
};

// A sysfs attribute is at most one page, and the kernel hands it over in one
// read: one openat + one read + close per file (as rdma-core's sysfs.c),
// relative to an open directory so that deep /sys (or fixture) paths are
// resolved once per directory, not once per file. Larger content is an
// error, never silently cut.
Result<std::string> read_attr(int dirfd, const std::string& dirpath, const std::string& name) {
  auto where = [&] { return dirpath.empty() ? name : dirpath + "/" + name; };
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

Result<std::string> read_attr(const std::string& path) { return read_attr(AT_FDCWD, "", path); }

// An open directory to read attributes relative to.
class Dir {
 public:
  explicit Dir(std::string p)
      : fd_(::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)), path_(std::move(p)) {
    if (!fd_.valid()) err_ = errno;
  }
  Result<std::string> read(const std::string& name) const {
    if (!fd_.valid()) return Error::from_errno("open " + path_ + "/" + name, err_);
    return read_attr(fd_.get(), path_, name);
  }

 private:
  Fd fd_;
  std::string path_;
  int err_ = 0;
};

bool is_number(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) return {};
  return buf;
}

// Optional attribute: missing -> "", unreadable -> warning.
std::string read_opt(Ctx& c, const std::string& path) {
  auto r = read_attr(path);
  if (r) return *r;
  if (r.error().sys_errno != ENOENT) c.warn(r.error().message);
  return {};
}

// Required attribute: any failure is a warning.
std::optional<std::string> read_req(Ctx& c, const std::string& path) {
  auto r = read_attr(path);
  if (r) return *r;
  c.warn(r.error().message);
  return std::nullopt;
}

std::optional<int> read_numa(Ctx& c, const std::string& path) {
  auto r = read_attr(path);
  if (!r) {
    if (r.error().sys_errno != ENOENT) c.warn(r.error().message);
    return std::nullopt;
  }
  int v = 0;
  const std::string& s = *r;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < -1) {
    c.warn(path + ": not a NUMA node number: '" + s + "'");
    return std::nullopt;
  }
  if (v < 0) return std::nullopt;  // -1: no NUMA affinity reported
  return v;
}

// PCI function behind a sysfs device link: its address and its path below
// devices/ (the chain of bridges NCCL's topology search walks).
void read_pci(Ctx& c, const std::string& device_link, std::string& pci, std::string& pci_path) {
  std::string rp = real_path(device_link);
  if (rp.empty()) return;
  if (!c.real_devs.empty() && rp.rfind(c.real_devs + "/", 0) == 0)
    pci_path = rp.substr(c.real_devs.size() + 1);
  std::string base = rp.substr(rp.rfind('/') + 1);
  // 0000:03:00.0
  if (base.size() == 12 && base[4] == ':' && base[7] == ':' && base[10] == '.') pci = base;
}

void read_counters(Ctx& c, const std::string& dir, std::map<std::string, uint64_t>& out) {
  auto names = list_dir(dir);
  if (!names) {
    if (names.error().sys_errno != ENOENT) c.warn(names.error().message);
    return;
  }
  std::vector<std::string> bad;
  Dir d(dir);
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
    out[n] = *v;
  }
  if (!bad.empty()) {
    std::string s;
    for (const auto& b : bad) s += (s.empty() ? "" : ", ") + b;
    c.warn(dir + ": counters not read: " + s);
  }
}

void read_gids(Ctx& c, const std::string& pdir, Port& port) {
  std::string gdir = pdir + "/gids";
  auto names = list_dir(gdir);
  if (!names) {
    c.warn(names.error().message);
    return;
  }
  std::vector<int> idx;
  for (const auto& n : *names)
    if (is_number(n) && n.size() < 6) idx.push_back(std::stoi(n));
  std::sort(idx.begin(), idx.end());
  Dir gids(gdir), types(pdir + "/gid_attrs/types"), ndevs(pdir + "/gid_attrs/ndevs");
  for (int i : idx) {
    std::string n = std::to_string(i);
    auto g = gids.read(n);
    if (!g) {
      // The kernel answers EINVAL for an empty slot; anything else is news.
      if (g.error().sys_errno != EINVAL) c.warn(g.error().message);
      continue;
    }
    if (!is_valid_gid(*g)) {
      c.warn(gdir + "/" + n + ": not a GID: '" + g->substr(0, 48) + "'");
      continue;
    }
    if (is_zero_gid(*g)) continue;  // empty slot
    Gid gid;
    gid.index = i;
    gid.gid = *g;
    auto t = types.read(n);
    if (t && (*t == "IB/RoCE v1" || *t == "RoCE v2")) {
      gid.type = *t;
    } else if (t) {
      c.warn(pdir + "/gid_attrs/types/" + n + ": unknown GID type '" + t->substr(0, 32) + "'");
    } else {
      c.warn(pdir + "/gid_attrs/types/" + n + ": GID " + n + " is set but its type is unreadable (" +
             std::strerror(t.error().sys_errno) + ")");
    }
    auto nd = ndevs.read(n);
    if (nd) gid.netdev = *nd;
    port.gids.push_back(std::move(gid));
  }
}

std::string port_netdev(Ctx& c, const std::string& hdir, const Port& p) {
  for (const auto& g : p.gids)
    if (g.index == 0 && !g.netdev.empty()) return g.netdev;
  // Soft-RoCE (rxe, siw) names its netdev in `parent`.
  if (auto r = read_attr(hdir + "/parent"); r && !r->empty()) return *r;
  // mlx5 and others: the PCI function's net/ entries, matched by dev_port.
  auto nets = list_dir(hdir + "/device/net");
  if (nets) {
    for (const auto& n : *nets) {
      auto dp = read_attr(hdir + "/device/net/" + n + "/dev_port");
      auto v = dp ? parse_uint(*dp) : std::nullopt;
      if (!dp || (v && static_cast<int>(*v) == p.port - 1)) return n;
    }
  }
  (void)c;
  return {};
}

Port read_port(Ctx& c, const std::string& hdir, const std::string& pname) {
  std::string pd = hdir + "/ports/" + pname;
  Port p;
  p.port = std::stoi(pname);
  if (auto s = read_req(c, pd + "/state")) {
    if (auto v = parse_numbered_state(*s))
      p.state = v->second;
    else
      c.warn(pd + "/state: expected '<n>: <NAME>' like '4: ACTIVE', got '" + s->substr(0, 32) + "'");
  }
  if (auto s = read_req(c, pd + "/phys_state")) {
    if (auto v = parse_numbered_state(*s))
      p.phys_state = v->second;
    else
      c.warn(pd + "/phys_state: expected '<n>: <Name>' like '5: LinkUp', got '" + s->substr(0, 32) + "'");
  }
  if (auto s = read_req(c, pd + "/link_layer")) {
    if (*s == "InfiniBand" || *s == "Ethernet")
      p.link_layer = *s;
    else
      c.warn(pd + "/link_layer: expected InfiniBand or Ethernet, got '" + s->substr(0, 32) + "'");
  }
  if (auto s = read_req(c, pd + "/rate")) {
    p.rate_gbps = parse_rate_gbps(*s);
    if (!p.rate_gbps) c.warn(pd + "/rate: expected '<n> Gb/sec (...)', got '" + s->substr(0, 32) + "'");
  }
  for (auto [file, dst] : {std::pair{"lid", &p.lid}, std::pair{"sm_lid", &p.sm_lid}}) {
    if (auto s = read_req(c, pd + "/" + file)) {
      *dst = parse_uint(*s);
      if (!*dst || **dst > 0xffff) {
        c.warn(pd + "/" + file + ": expected a 16-bit LID like 0x1a, got '" + s->substr(0, 32) + "'");
        *dst = std::nullopt;
      }
    }
  }
  read_gids(c, pd, p);
  if (p.link_layer == "Ethernet") {
    p.netdev = port_netdev(c, hdir, p);
    if (p.netdev.empty()) c.warn(pd + ": RoCE port without a netdev (no GID 0 ndev, parent or device/net)");
  }
  read_counters(c, pd + "/counters", p.counters);
  read_counters(c, pd + "/hw_counters", p.hw_counters);
  return p;
}

}  // namespace

std::vector<Hca> read_hcas(const std::string& root, std::vector<std::string>& warnings) {
  Ctx c{root, "", warnings};
  if (auto r = real_path(root); !r.empty()) c.real_devs = r + "/devices";
  std::vector<Hca> out;
  std::string cls = root + "/class/infiniband";
  auto names = list_dir(cls);
  if (!names) {
    if (names.error().sys_errno != ENOENT) c.warn(names.error().message);
    return out;  // no RDMA stack loaded: no HCAs
  }
  for (const auto& name : *names) {
    std::string hd = cls + "/" + name;
    Hca h;
    h.name = name;
    if (auto g = read_req(c, hd + "/node_guid")) {
      if (g->size() == 19 && is_valid_gid(*g + ":0000:0000:0000:0000"))
        h.node_guid = *g;
      else
        c.warn(hd + "/node_guid: expected xxxx:xxxx:xxxx:xxxx, got '" + g->substr(0, 32) + "'");
    }
    h.fw_ver = read_opt(c, hd + "/fw_ver");
    h.board_id = read_opt(c, hd + "/board_id");
    read_pci(c, hd + "/device", h.pci, h.pci_path);
    if (!h.pci.empty()) h.numa_node = read_numa(c, hd + "/device/numa_node");
    auto ports = list_dir(hd + "/ports");
    if (!ports) {
      c.warn(ports.error().message);
    } else {
      std::vector<std::string> pn;
      for (const auto& p : *ports)
        if (is_number(p) && p.size() < 4) pn.push_back(p);
      std::sort(pn.begin(), pn.end(), [](const auto& a, const auto& b) { return natural_less(a, b); });
      for (const auto& p : pn) h.ports.push_back(read_port(c, hd, p));
      if (pn.empty()) c.warn(hd + "/ports: no ports");
    }
    out.push_back(std::move(h));
  }
  std::sort(out.begin(), out.end(), [](const Hca& a, const Hca& b) { return natural_less(a.name, b.name); });
  return out;
}

std::vector<GpuDevice> read_gpus(const std::string& root, std::vector<std::string>& warnings) {
  Ctx c{root, "", warnings};
  if (auto r = real_path(root); !r.empty()) c.real_devs = r + "/devices";
  std::vector<GpuDevice> out;
  std::string dir = root + "/bus/pci/devices";
  auto names = list_dir(dir);
  if (!names) {
    if (names.error().sys_errno != ENOENT) c.warn(names.error().message);
    return out;
  }
  for (const auto& n : *names) {
    std::string d = dir + "/" + n;
    auto vendor = read_attr(d + "/vendor");
    auto cls = read_attr(d + "/class");
    if (!vendor || !cls) continue;  // not every entry is worth a warning; GPUs are checked below
    std::string v = gpu_vendor(*vendor, *cls);
    if (v.empty()) continue;
    GpuDevice g;
    g.vendor = v;
    auto dev = read_req(c, d + "/device");
    g.device_id = dev ? *dev : "unknown";
    g.model = gpu_model(*vendor, g.device_id);
    read_pci(c, d, g.pci, g.pci_path);
    if (g.pci.empty()) g.pci = n;
    g.numa_node = read_numa(c, d + "/numa_node");
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const GpuDevice& a, const GpuDevice& b) { return a.pci < b.pci; });
  return out;
}

}  // namespace fa::probes
