// SPDX-License-Identifier: Apache-2.0
// POST /v1/probes/rdma/serve|run over the RDMA link probe (probes/rdma/): the
// control plane measures a pair of agents on exactly the HCA port and GID
// index NCCL will use (defaults come from a discovery pass, as in the CLI).
// One listener per agent; a probe run is long (seconds) and runs on its own
// lane so mesh operations are not held up behind it. Each run's result is
// kept in the scorecard (agent/scorecard.hpp), per peer and rail.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <mutex>

#include "agent/core.hpp"
#include "agent/scorecard.hpp"
#include "common/config.hpp"

namespace fa::rdma {
class Server;
}

namespace fa::agent {

class RdmaService {
 public:
  // `on_scorecard` runs after a run's result was recorded (the daemon
  // publishes a new status generation there).
  RdmaService(std::function<Config()> config, std::function<void()> on_scorecard = {});
  ~RdmaService();

  ApiResult serve_start(const nlohmann::json& body);  // 409 when already serving
  ApiResult serve_status();
  ApiResult serve_stop();  // idempotent
  ApiResult run(const nlohmann::json& body);
  // {"results": [...]}: the last result per peer and rail, read from
  // <state_dir>/scorecard.json at first use.
  nlohmann::json scorecard();

 private:
  std::function<Config()> config_;
  std::mutex mu_;
  std::unique_ptr<rdma::Server> server_;
  nlohmann::json serving_;  // what the listener was started with
  std::function<void()> on_scorecard_;
  std::mutex sc_mu_;
  std::unique_ptr<Scorecard> scorecard_;  // made at first use, from the config's state_dir
  Scorecard& scorecard_locked();
};

}  // namespace fa::agent
