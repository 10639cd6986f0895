// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "probes/rdma/defaults.hpp"

using namespace fa::rdma;

namespace {

fa::probes::Report roce_report() {
  fa::probes::Report r;
  r.fabric.kind = "roce";
  r.fabric.ports = {"mlx5_1:1", "mlx5_2:1"};
  r.nccl.ib_gid_index = "3";
  return r;
}

}  // namespace

TEST_CASE("defaults: discovery's first fabric port and NCCL_IB_GID_INDEX", "[rdma][defaults]") {
  auto t = target_from(roce_report(), std::nullopt, std::nullopt);
  REQUIRE(t.ok());
  CHECK(t->hca == HcaPort{"mlx5_1", 1});
  CHECK(t->gid_index == 3);
}

TEST_CASE("defaults: explicit options win, each on its own", "[rdma][defaults]") {
  auto t = target_from(roce_report(), HcaPort{"mlx5_2", 1}, std::nullopt);
  REQUIRE(t.ok());
  CHECK(t->hca == HcaPort{"mlx5_2", 1});
  CHECK(t->gid_index == 3);
  t = target_from(roce_report(), std::nullopt, 5);
  REQUIRE(t.ok());
  CHECK(t->hca == HcaPort{"mlx5_1", 1});
  CHECK(t->gid_index == 5);
  // Both given: the report is not consulted at all.
  t = target_from(fa::probes::Report{}, HcaPort{"rxe0", 1}, 1);
  REQUIRE(t.ok());
  CHECK(t->gid_index == 1);
}

TEST_CASE("defaults: InfiniBand without a GID index uses 0", "[rdma][defaults]") {
  fa::probes::Report r;
  r.fabric.kind = "infiniband";
  r.fabric.ports = {"mlx5_0:1"};
  auto t = target_from(r, std::nullopt, std::nullopt);
  REQUIRE(t.ok());
  CHECK(t->gid_index == 0);
}

TEST_CASE("defaults: nothing discovered names the option to pass", "[rdma][defaults]") {
  fa::probes::Report none;
  none.warnings = {"no RDMA devices under /sys/class/infiniband"};
  auto t = target_from(none, std::nullopt, std::nullopt);
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.error().message, Catch::Contains("--hca"));
  CHECK_THAT(t.error().message, Catch::Contains("no RDMA devices"));

  auto r = roce_report();
  r.nccl.ib_gid_index.reset();
  t = target_from(r, std::nullopt, std::nullopt);
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.error().message, Catch::Contains("--gid-index"));

  r = roce_report();
  r.nccl.ib_gid_index = "x";
  CHECK_FALSE(target_from(r, std::nullopt, std::nullopt).ok());
}
