// SPDX-License-Identifier: Apache-2.0
// /metrics rendered from a real inspect document: probes::discover over the
// fixture trees (the IBA port counters of fixture a, the hw_counters of the
// rxe0 dump in fixture f), read by the real `promtool check metrics` and
// compared with the fixture's own counter files.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "agent/metrics.hpp"
#include "agent/scorecard.hpp"
#include "probes/inspect.hpp"
#include "probes/health.hpp"

using namespace fa::agent;
using nlohmann::json;

namespace {

std::string fx(const std::string& name) { return std::string(FA_FIXTURES_DIR) + "/" + name; }

json inspect_of(const std::string& fixture) {
  fa::probes::InspectOptions o;
  o.sysfs_root = fx(fixture);
  o.query_sm = false;
  return fa::probes::to_json(fa::probes::discover(o));
}

std::string metrics_of(const json& inspect) {
  MetricsInput in;
  in.inspect = &inspect;
  ApiMetrics api;
  api.observe("/metrics", 200, std::chrono::microseconds(300));
  return render_metrics(in, api);
}

struct Lint {
  int rc = -1;
  std::string out;
};

Lint promtool(const std::string& text) {
  char path[] = "/tmp/fa-metrics-test-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(fd);
  Lint l;
  FILE* p = ::popen(("promtool check metrics < " + std::string(path) + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) l.out.append(buf, n);
  int st = ::pclose(p);
  ::unlink(path);
  l.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return l;
}

// The value of the sample `series` (name{labels} exactly as written).
std::optional<double> sample(const std::string& text, const std::string& series) {
  std::string needle = "\n" + series + " ";
  auto at = text.find(needle);
  if (at == std::string::npos) return std::nullopt;
  at += needle.size();
  return std::stod(text.substr(at, text.find('\n', at) - at));
}

std::string type_of(const std::string& text, const std::string& family) {
  std::string needle = "\n# TYPE " + family + " ";
  auto at = text.find(needle);
  if (at == std::string::npos) return "";
  at += needle.size();
  return text.substr(at, text.find('\n', at) - at);
}

double counter_file(const std::string& fixture, const std::string& dev, const std::string& file) {
  std::ifstream f(fx(fixture) + "/class/infiniband/" + dev + "/ports/1/" + file);
  uint64_t v = 0;
  REQUIRE(f >> v);
  return static_cast<double>(v);
}

std::string port(const std::string& dev) { return "device=\"" + dev + "\",port=\"1\""; }

}  // namespace

TEST_CASE("metrics: every fixture's /metrics passes promtool check metrics") {
  namespace fs = std::filesystem;
  int n = 0;
  for (const auto& e : fs::directory_iterator(FA_FIXTURES_DIR)) {
    if (!e.is_directory()) continue;
    std::string m = metrics_of(inspect_of(e.path().filename().string()));
    Lint l = promtool(m);
    INFO(e.path() << "\n" << l.out << "\n" << m);
    CHECK(l.rc == 0);
    CHECK(l.out.empty());
    ++n;
  }
  CHECK(n >= 6);  // a..f
}

TEST_CASE("metrics: the IBA port counters of fixture a, bytes in bytes") {
  json j = inspect_of("a-ib-8gpu");
  REQUIRE(j["counters"].contains("mlx5_0:1"));
  std::string m = metrics_of(j);
  INFO(m);

  // port_xmit_data / port_rcv_data count 4-octet words.
  for (const char* dev : {"mlx5_0", "mlx5_7"}) {
    CHECK(sample(m, "fabric_agent_port_receive_bytes_total{" + port(dev) + "}") ==
          4 * counter_file("a-ib-8gpu", dev, "counters/port_rcv_data"));
    CHECK(sample(m, "fabric_agent_port_transmit_bytes_total{" + port(dev) + "}") ==
          4 * counter_file("a-ib-8gpu", dev, "counters/port_xmit_data"));
  }
  CHECK(type_of(m, "fabric_agent_port_receive_bytes_total") == "counter");
  CHECK(type_of(m, "fabric_agent_port_transmit_bytes_total") == "counter");

  CHECK(sample(m, "fabric_agent_port_receive_packets_total{" + port("mlx5_0") + "}") ==
        counter_file("a-ib-8gpu", "mlx5_0", "counters/port_rcv_packets"));
  CHECK(sample(m, "fabric_agent_port_symbol_errors_total{" + port("mlx5_5") + "}") ==
        counter_file("a-ib-8gpu", "mlx5_5", "counters/symbol_error"));
  CHECK(sample(m, "fabric_agent_port_symbol_errors_total{" + port("mlx5_5") + "}") > 0);
  CHECK(sample(m, "fabric_agent_port_link_downed_total{" + port("mlx5_3") + "}") ==
        counter_file("a-ib-8gpu", "mlx5_3", "counters/link_downed"));
  CHECK(type_of(m, "fabric_agent_port_symbol_errors_total") == "counter");
  CHECK(sample(m, "fabric_agent_port_hw_events_total{" + port("mlx5_2") + ",counter=\"out_of_sequence\"}") ==
        counter_file("a-ib-8gpu", "mlx5_2", "hw_counters/out_of_sequence"));

  // 400 Gb/sec (4X NDR) is 50e9 bytes per second.
  CHECK(sample(m, "fabric_agent_port_rate_bytes_per_second{" + port("mlx5_0") + "}") == 50e9);
  CHECK(type_of(m, "fabric_agent_port_rate_bytes_per_second") == "gauge");
  CHECK(m.find("bits") == std::string::npos);
}

TEST_CASE("metrics: rxe hw_counters from the real rxe0 dump, without lifespan (a setting, not a counter)") {
  json j = inspect_of("f-rxe");
  REQUIRE(j["counters"]["rxe0:1"]["hw_counters"].contains("sent_pkts"));
  std::string m = metrics_of(j);
  INFO(m);
  for (const char* c : {"sent_pkts", "rcvd_pkts", "retry_exceeded_err"})
    CHECK(sample(m, "fabric_agent_port_hw_events_total{" + port("rxe0") + ",counter=\"" + c + "\"}") ==
          counter_file("f-rxe", "rxe0", std::string("hw_counters/") + c));
  CHECK(type_of(m, "fabric_agent_port_hw_events_total") == "counter");
  CHECK(m.find("lifespan") == std::string::npos);
  CHECK(sample(m, "fabric_agent_port_rate_bytes_per_second{" + port("rxe0") + "}") == 1.25e9);  // 10 Gb/sec
  // rxe has no counters/ directory: no IBA families, and nothing invented.
  CHECK(m.find("fabric_agent_port_receive_bytes_total") == std::string::npos);
}

TEST_CASE("metrics: health conditions as fabric_agent_healthy and one start time per condition, promtool-clean") {
  json inspect = inspect_of("a");
  json health = fa::probes::to_json(
      {{"port_down", "mlx5_0:1", "state DOWN, phys Polling", 1796212800},
       {"peer_down", "peer xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=", "last handshake 200 s ago", 1796212830}});
  MetricsInput in;
  in.inspect = &inspect;
  in.health = &health;
  std::string m = render_metrics(in, ApiMetrics{});
  Lint l = promtool(m);
  INFO(l.out << "\n" << m);
  CHECK(l.rc == 0);
  CHECK(l.out.empty());
  CHECK(type_of(m, "fabric_agent_healthy") == "gauge");
  CHECK(sample(m, "fabric_agent_healthy") == 0);
  CHECK(sample(m, "fabric_agent_health_condition_start_time_seconds{code=\"port_down\",subject=\"mlx5_0:1\"}") ==
        1796212800.0);
  CHECK(sample(m,
               "fabric_agent_health_condition_start_time_seconds{code=\"peer_down\",subject=\"peer "
               "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\"}") == 1796212830.0);
  json none = json::array();
  in.health = &none;
  m = render_metrics(in, ApiMetrics{});
  CHECK(sample(m, "fabric_agent_healthy") == 1);
  CHECK(m.find("fabric_agent_health_condition_start_time_seconds{") == std::string::npos);
}

TEST_CASE("metrics: the scorecard's last probe per peer and rail, promtool-clean") {
  json ok = {{"status", "ok"},           {"reason", nullptr}, {"message", ""}, {"gbps", 384.5},
             {"latency_us", {{"p50", 2.5}, {"p90", 3.0}, {"p99", 4.25}, {"max", 12.0}}},
             {"gid_index", 3},           {"gid", "::ffff:10.0.0.1"}, {"port_rate_gbps", 400.0}};
  json failed = {{"status", "failed"}, {"reason", "qp_rtr_failed"}, {"message", "peer reported: RTR"},
                 {"gbps", nullptr},    {"latency_us", nullptr},     {"gid_index", 5}};
  json card = {{"results", json::array({scorecard_entry("10.0.0.2", "mlx5_0:1", ok, 1796212800),
                                        scorecard_entry("10.0.0.3", "mlx5_1:1", failed, 1796212860)})}};
  json inspect = inspect_of("a");
  MetricsInput in;
  in.inspect = &inspect;
  in.scorecard = &card;
  std::string m = render_metrics(in, ApiMetrics{});
  Lint l = promtool(m);
  INFO(l.out << "\n" << m);
  CHECK(l.rc == 0);
  CHECK(l.out.empty());
  const std::string a = "peer=\"10.0.0.2\",rail=\"mlx5_0:1\"", b = "peer=\"10.0.0.3\",rail=\"mlx5_1:1\"";
  CHECK(type_of(m, "fabric_agent_rail_status") == "gauge");
  CHECK(sample(m, "fabric_agent_rail_status{" + a + "}") == 2);
  CHECK(sample(m, "fabric_agent_rail_status{" + b + "}") == 0);
  CHECK(sample(m, "fabric_agent_rail_bandwidth_bytes_per_second{" + a + "}") == Approx(384.5e9 / 8));
  CHECK(sample(m, "fabric_agent_rail_latency_seconds{" + a + ",stat=\"p99\"}") == Approx(4.25e-6));
  CHECK(sample(m, "fabric_agent_rail_latency_seconds{" + a + ",stat=\"max\"}") == Approx(12e-6));
  CHECK(sample(m, "fabric_agent_rail_measured_time_seconds{" + b + "}") == 1796212860.0);
  // A failed probe has no figures: no bandwidth or latency series.
  CHECK(m.find("fabric_agent_rail_bandwidth_bytes_per_second{" + b) == std::string::npos);
  CHECK(m.find("fabric_agent_rail_latency_seconds{" + b) == std::string::npos);
}
