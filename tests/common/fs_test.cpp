// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/fs.hpp"

namespace {
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/fa-fs-test.XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

TEST_CASE("read_text_file strips exactly one newline and reports errno", "[fs]") {
  TempDir d;
  std::ofstream(d.path + "/a") << "4: ACTIVE\n";
  std::ofstream(d.path + "/b") << "x\n\n";
  auto a = fa::read_text_file(d.path + "/a");
  REQUIRE(a.ok());
  CHECK(*a == "4: ACTIVE");
  CHECK(*fa::read_text_file(d.path + "/b") == "x\n");
  auto missing = fa::read_text_file(d.path + "/nope");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().sys_errno == ENOENT);
  CHECK(missing.error().message.find(d.path + "/nope") != std::string::npos);
}

TEST_CASE("read_text_file refuses to truncate", "[fs]") {
  TempDir d;
  std::ofstream(d.path + "/big") << std::string(100, 'x');
  auto r = fa::read_text_file(d.path + "/big", 10);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().sys_errno == EFBIG);
}

TEST_CASE("read_text_file reads files of a page and more whole, and refuses them past the limit", "[fs]") {
  TempDir d;
  // Sizes around the page-sized read of small files and the one-read path
  // of larger regular files.
  for (size_t size : {4095u, 4096u, 4097u, 8192u, 130001u}) {
    std::string body;
    for (size_t i = 0; i < size; ++i) body += static_cast<char>('a' + i % 26);
    std::ofstream(d.path + "/f") << body << "\n";
    auto r = fa::read_text_file(d.path + "/f", 1 << 20);
    REQUIRE(r.ok());
    CHECK(r->size() == size);
    CHECK(*r == body);
    // The limit counts the newline too: size + 1 bytes are on disk.
    auto exact = fa::read_text_file(d.path + "/f", size + 1);
    REQUIRE(exact.ok());
    CHECK(*exact == body);
    auto over = fa::read_text_file(d.path + "/f", size);
    REQUIRE_FALSE(over.ok());
    CHECK(over.error().sys_errno == EFBIG);
    CHECK(over.error().message == "read " + d.path + "/f: larger than " + std::to_string(size) + " bytes");
  }
}

TEST_CASE("write_file_atomic replaces content with the requested mode", "[fs]") {
  TempDir d;
  std::string p = d.path + "/state.json";
  REQUIRE(fa::write_file_atomic(p, "one", 0600).ok());
  REQUIRE(fa::write_file_atomic(p, "two", 0600).ok());
  CHECK(*fa::read_text_file(p) == "two");
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto names = fa::list_dir(d.path);
  REQUIRE(names.ok());
  CHECK(names->size() == 1);  // no temp file left behind
}

TEST_CASE("write_file_atomic: a hidden temporary, and stale temporaries of both kinds removed", "[fs]") {
  TempDir d;
  std::string p = d.path + "/labels";
  // A crash between create and rename leaves one of these.
  std::ofstream(d.path + "/labels.tmp.AbC123") << "x";
  std::ofstream(d.path + "/.labels.tmp.DeF456") << "x";
  std::ofstream(d.path + "/.labels.tmp.toolong1") << "x";  // not one of ours
  fa::remove_stale_temporaries(p);
  CHECK(*fa::list_dir(d.path) == std::vector<std::string>{".labels.tmp.toolong1"});
  ::unlink((d.path + "/.labels.tmp.toolong1").c_str());
  mode_t old = ::umask(077);
  REQUIRE(fa::write_file_atomic(p, "a=b\n", 0644, fa::TempName::hidden).ok());
  ::umask(old);
  CHECK(*fa::read_text_file(p) == "a=b");
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  CHECK(*fa::list_dir(d.path) == std::vector<std::string>{"labels"});
}
