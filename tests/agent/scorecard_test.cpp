// SPDX-License-Identifier: Apache-2.0
// The agent's scorecard file: last result per peer and rail, kept across a
// restart (a new Scorecard on the same file), one entry replaced by the next
// run on the same rail, a file that is not a scorecard refused.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "agent/scorecard.hpp"
#include "common/fs.hpp"

using namespace fa::agent;
using nlohmann::json;

namespace {
struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/fa-scorecard-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};
json result(const char* status, double gbps) {
  return {{"status", status}, {"reason", nullptr}, {"message", ""}, {"gbps", gbps}, {"gid_index", 1}, {"bytes", 9}};
}
}  // namespace

TEST_CASE("scorecard: the last result per peer and rail survives a restart") {
  TempDir d;
  const std::string f = d.path + "/scorecard.json";
  {
    Scorecard s(f);
    REQUIRE(s.load());
    CHECK(s.to_json()["results"].empty());
    REQUIRE(s.record(scorecard_entry("10.0.0.2", "mlx5_0:1", result("ok", 1), 100)));
    REQUIRE(s.record(scorecard_entry("10.0.0.2", "mlx5_1:1", result("ok", 2), 100)));
    REQUIRE(s.record(scorecard_entry("10.0.0.2", "mlx5_0:1", result("degraded", 3), 200)));  // replaces the first
  }
  Scorecard again(f);
  REQUIRE(again.load());
  json r = again.to_json()["results"];
  REQUIRE(r.size() == 2);
  CHECK(r[0]["rail"] == "mlx5_0:1");
  CHECK(r[0]["status"] == "degraded");
  CHECK(r[0]["gbps"] == 3);
  CHECK(r[0]["measured_unix"] == 200);
  CHECK(r[1]["rail"] == "mlx5_1:1");
  // Only what the scorecard keeps: not the byte count.
  CHECK_FALSE(r[0].contains("bytes"));
}

TEST_CASE("scorecard: a file that is not a scorecard is an error, and the next record replaces it") {
  TempDir d;
  const std::string f = d.path + "/scorecard.json";
  std::ofstream(f) << "{\"something\": 1}";
  Scorecard s(f);
  auto st = s.load();
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().message, Catch::Contains("not a scorecard"));
  REQUIRE(s.record(scorecard_entry("h", "r:1", result("ok", 1), 1)));
  CHECK(json::parse(*fa::read_text_file(f))["results"].size() == 1);
  // A missing file is simply empty.
  Scorecard fresh(d.path + "/none.json");
  CHECK(fresh.load());
}
