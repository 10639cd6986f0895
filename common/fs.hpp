// SPDX-License-Identifier: Apache-2.0
// File helpers shaped after rdma-core's libibverbs/sysfs.c: every read is
// openat(O_CLOEXEC), strips one trailing newline and refuses to truncate.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace fa {

// Reads a small text file (sysfs attribute, /proc entry). Fails with the
// path and errno, e.g. EINVAL for an empty GID slot. Files larger than
// max_bytes are an error, never silently cut.
Result<std::string> read_text_file(const std::string& path, size_t max_bytes = 64 * 1024);

// Names in a directory, without "." and "..", sorted. Fails if the
// directory cannot be opened.
Result<std::vector<std::string>> list_dir(const std::string& path);

// Target of a symlink (readlink), as written.
Result<std::string> read_link(const std::string& path);

// Where write_file_atomic makes its temporary: beside the file
// (path.tmp.XXXXXX), or hidden beside it (DIR/.NAME.tmp.XXXXXX) for a
// directory whose reader takes every file that is not a dot file as its
// input (Node Feature Discovery's features.d).
enum class TempName { beside, hidden };

// Writes a file atomically: temp file in the same directory, fsync, rename,
// fsync the directory. mode applies to the new file, whatever the umask.
Status write_file_atomic(const std::string& path, std::string_view data, unsigned mode = 0644,
                         TempName temp = TempName::beside);

// Removes the temporaries write_file_atomic(path) leaves when the process
// dies between creating and renaming one (either TempName). Only for a
// path no other process writes.
void remove_stale_temporaries(const std::string& path);

// Writes all of `data` to fd (a file, a pipe, a terminal), retrying short
// writes and EINTR. The error reads "<what>: <strerror>".
Status write_all(int fd, std::string_view data, const std::string& what);

// Sends all of `data` on a connected socket, retrying short sends and EINTR;
// MSG_NOSIGNAL, so a peer that went away is an EPIPE error, not a SIGPIPE.
// The error reads "<what>: <strerror>".
Status send_all(int fd, std::string_view data, const std::string& what);

}  // namespace fa
