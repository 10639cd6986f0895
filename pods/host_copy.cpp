// SPDX-License-Identifier: Apache-2.0
// The agent as the host can run it (pods.hook_dir): the CDI spec's hooks are
// run by the node's container runtime, on the host, by path. An agent that
// runs in a container (the Kubernetes DaemonSet) has its binary and the
// libraries it links only in its image; the host may have neither. Here the
// running binary, fabric-agent-runtime beside it, and every shared object
// loaded into this process (the dynamic loader among them) are copied into
// a directory the host sees, each under the name the loader looked it up by
// (libstdc++.so.6, not the file libstdc++.so.6.0.30 it points to), and the
// hooks run the copy through the copied loader:
// `DIR/lib/ld-linux-x86-64.so.2 --library-path DIR/lib DIR/fabric-agent`.
// The loader and the C library come from the same image, so they match
// whatever the host's own are; the kernel is the host's either way.
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "common/fs.hpp"
#include "pods/pods.hpp"

namespace fa::pods {

namespace {

Result<std::string> read_binary(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::from_errno("open " + path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return Error::from_errno("read " + path, e);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Writes `data` to `path` unless the file already holds exactly that: a pod
// restarted from the same image rewrites nothing, and a hook running the
// old copy keeps its inode when it is replaced (rename).
Status put(const std::string& path, const std::string& data) {
  remove_stale_temporaries(path);  // a copy cut short by a kill
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && static_cast<size_t>(st.st_size) == data.size() && (st.st_mode & 07777) == 0755)
    if (auto have = read_binary(path); have && *have == data) return {};
  return write_file_atomic(path, data, 0755);
}

// A directory of root's that only root may write: the runtime runs what is
// in it as root on the host.
Status own_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Error::from_errno("create " + dir);
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return Error::from_errno("stat " + dir);
  if (!S_ISDIR(st.st_mode)) return Error{dir + ": not a directory", ENOTDIR};
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error{dir + ": owned by uid " + std::to_string(st.st_uid) + " with mode " + mode +
                     "; accepted: a directory of this user's that no one else may write (the runtime runs what "
                     "is in it as root)",
                 EPERM};
  }
  return {};
}

std::string base_name(const std::string& p) { return p.substr(p.rfind('/') + 1); }

}  // namespace

Result<std::vector<std::string>> objects_to_copy(const std::vector<std::string>& loaded) {
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (const auto& path : loaded) {
    // The executable has no name here, the vDSO no path: neither is a file.
    if (path.empty() || path[0] != '/' || !seen.insert(path).second) continue;
    for (const auto& o : out)
      if (base_name(o) == base_name(path))
        return Error{"shared objects " + o + " and " + path + " have one name: one directory cannot hold both", EEXIST};
    out.push_back(path);
  }
  return out;
}

Result<HostCopy> copy_for_host(const std::string& dir) {
  if (dir.empty() || dir[0] != '/') return Error{"pods.hook_dir '" + dir + "': not an absolute path", EINVAL};
  auto self = read_link("/proc/self/exe");
  if (!self) return self.take_error();
  // Every object the loader has loaded, by the path it opened: the
  // directory it found it in and the name it looked up. The loader itself
  // is the one loaded at AT_BASE (its PT_INTERP path).
  struct Seen {
    ElfW(Addr) base;
    std::vector<std::string> names;
    std::string loader;
  } seen{static_cast<ElfW(Addr)>(::getauxval(AT_BASE)), {}, {}};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Seen*>(data);
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (s->base != 0 && info->dlpi_addr == s->base) s->loader = name;
        s->names.push_back(std::move(name));
        return 0;
      },
      &seen);
  if (seen.loader.empty() || seen.loader[0] != '/')
    return Error{"no dynamic loader in this process (a static binary needs no copy)", ENOENT};
  auto objects = objects_to_copy(seen.names);
  if (!objects) return objects.take_error();

  if (auto s = own_dir(dir); !s) return s.take_error();
  if (auto s = own_dir(dir + "/lib"); !s) return s.take_error();
  HostCopy c;
  c.library_path = dir + "/lib";
  for (const auto& o : *objects) {
    auto data = read_binary(o);
    if (!data) return data.take_error();
    if (auto s = put(c.library_path + "/" + base_name(o), *data); !s) return s.take_error();
  }
  c.loader = c.library_path + "/" + base_name(seen.loader);
  auto bin = read_binary(*self);
  if (!bin) return bin.take_error();
  c.binary = dir + "/fabric-agent";
  if (auto s = put(c.binary, *bin); !s) return s.take_error();
  // The nested runtime is a static binary: copied as it is, beside the
  // binary, where the spec looks for it (runtime_beside).
  if (std::string rt = runtime_beside(*self); !rt.empty()) {
    auto data = read_binary(rt);
    if (!data) return data.take_error();
    if (auto s = put(dir + "/fabric-agent-runtime", *data); !s) return s.take_error();
  }
  c.objects = objects->size();
  return c;
}

}  // namespace fa::pods
