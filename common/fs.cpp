// SPDX-License-Identifier: Apache-2.0
#include "common/fs.hpp"

#include "common/fault.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "common/fd.hpp"
#include "common/secure.hpp"

namespace fa {

namespace {

Error too_large(const std::string& path, size_t max_bytes) {
  return Error{"read " + path + ": larger than " + std::to_string(max_bytes) + " bytes", EFBIG};
}

// One read(2), retried on EINTR: the bytes read, 0 at the end.
Result<size_t> read_some(int fd, char* buf, size_t len, const std::string& path) {
  for (;;) {
    ssize_t n = ::read(fd, buf, len);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return Error::from_errno("read " + path);
  }
}

}  // namespace

Result<std::string> read_text_file(const std::string& path, size_t max_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno("open " + path);
  std::string out;
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 4096) {
    // A regular file of a page or more (a mesh file: 30 KB for 250 peers):
    // read straight into a string one byte larger than its size, so one
    // read(2) fills it and the next sees the end; no buffer is copied or
    // grown unless the file grew meanwhile.
    size_t len = 0;
    out.resize(std::min(static_cast<size_t>(st.st_size), max_bytes) + 1);
    for (;;) {
      if (len == out.size()) {
        if (len > max_bytes) return too_large(path, max_bytes);
        out.resize(std::min(out.size() * 2, max_bytes + 1));
      }
      auto n = read_some(fd.get(), out.data() + len, out.size() - len, path);
      if (!n) return n.take_error();
      if (*n == 0) break;
      len += *n;
    }
    if (len > max_bytes) return too_large(path, max_bytes);
    out.resize(len);
  } else {
    // sysfs and procfs report a size that says nothing (4096, 0): a page
    // at a time, the usual few bytes in one read. Small files include the
    // token and key files: the stack copy is wiped, whatever the file.
    char buf[4096];
    struct Wipe {
      char (&b)[4096];
      ~Wipe() { secure_wipe(b, sizeof b); }
    } wipe{buf};
    for (;;) {
      auto n = read_some(fd.get(), buf, sizeof buf, path);
      if (!n) return n.take_error();
      if (*n == 0) break;
      if (out.size() + *n > max_bytes) return too_large(path, max_bytes);
      out.append(buf, *n);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

Result<std::vector<std::string>> list_dir(const std::string& path) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(path.c_str()), ::closedir);
  if (!d) return Error::from_errno("opendir " + path);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d.get())) {
    std::string_view n(e->d_name);
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  if (errno != 0) return Error::from_errno("readdir " + path);
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> read_link(const std::string& path) {
  std::string buf(256, '\0');
  for (;;) {
    ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
    if (n < 0) return Error::from_errno("readlink " + path);
    if (static_cast<size_t>(n) < buf.size()) {
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
    buf.resize(buf.size() * 2);
  }
}

Status write_file_atomic(const std::string& path, std::string_view data, unsigned mode, TempName temp) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string tmp = temp == TempName::beside ? path + ".tmp.XXXXXX"
                    : slash == std::string::npos ? "." + path + ".tmp.XXXXXX"
                                                 : path.substr(0, slash + 1) + "." + path.substr(slash + 1) + ".tmp.XXXXXX";
  Fd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno("create temp file for " + path);
  auto fail = [&](const char* what) {
    Error e = Error::from_errno(std::string(what) + " " + tmp);
    ::unlink(tmp.c_str());
    return e;
  };
  fault_point("atomic write: temp file created");
  if (::fchmod(fd.get(), mode) != 0) return fail("fchmod");
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write");
    }
    off += static_cast<size_t>(n);
  }
  fault_point("atomic write: written, not synced");
  if (::fsync(fd.get()) != 0) return fail("fsync");
  fault_point("atomic write: synced, not renamed");
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = Error::from_errno("rename " + tmp + " to " + path);
    ::unlink(tmp.c_str());
    return e;
  }
  fault_point("atomic write: renamed, directory not synced");
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.valid()) ::fsync(dfd.get());
  fault_point("atomic write: done");
  return {};
}

void remove_stale_temporaries(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  auto names = list_dir(dir);
  if (!names) return;
  auto is_temp = [](const std::string& n, const std::string& p) {
    return n.size() == p.size() + 6 && n.compare(0, p.size(), p) == 0;
  };
  for (const auto& n : *names)
    if (is_temp(n, prefix) || is_temp(n, "." + prefix)) ::unlink((dir + "/" + n).c_str());
}

namespace {
// Hands all of data to put (one write(2) or send(2)), retrying short
// transfers and EINTR.
template <class Put>
Status put_all(std::string_view data, const std::string& what, Put put) {
  while (!data.empty()) {
    ssize_t n = put(data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(what);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}
}  // namespace

Status write_all(int fd, std::string_view data, const std::string& what) {
  return put_all(data, what, [fd](const char* p, size_t n) { return ::write(fd, p, n); });
}

Status send_all(int fd, std::string_view data, const std::string& what) {
  return put_all(data, what, [fd](const char* p, size_t n) { return ::send(fd, p, n, MSG_NOSIGNAL); });
}

}  // namespace fa
