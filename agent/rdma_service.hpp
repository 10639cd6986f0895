// SPDX-License-Identifier: Apache-2.0
// POST /v1/probes/rdma/serve|run over the RDMA link probe (probes/rdma/): the
// control plane measures a pair of agents on exactly the HCA port and GID
// index NCCL will use (defaults come from a discovery pass, as in the CLI).
// One listener per agent; a probe run is long (seconds) and runs on its own
// lane so mesh operations are not held up behind it.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <mutex>

#include "agent/core.hpp"
#include "common/config.hpp"

namespace fa::rdma {
class Server;
}

namespace fa::agent {

class RdmaService {
 public:
  explicit RdmaService(std::function<Config()> config);
  ~RdmaService();

  ApiResult serve_start(const nlohmann::json& body);  // 409 when already serving
  ApiResult serve_status();
  ApiResult serve_stop();  // idempotent
  ApiResult run(const nlohmann::json& body);

 private:
  std::function<Config()> config_;
  std::mutex mu_;
  std::unique_ptr<rdma::Server> server_;
  nlohmann::json serving_;  // what the listener was started with
};

}  // namespace fa::agent
