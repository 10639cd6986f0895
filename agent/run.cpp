// SPDX-License-Identifier: Apache-2.0
// `fabric-agent run`: the daemon. Startup order matters to systemd and to the
// renter: config -> TLS files -> token -> state + adoption of the live mesh
// -> first discovery -> listen -> READY=1. SIGTERM stops serving and leaves the mesh
// running (a restart must be invisible to the job using it); SIGHUP reloads
// the config and keeps the running one when the new one is bad.
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "agent/cli.hpp"
#include "agent/core.hpp"
#include "agent/netlink_watch.hpp"
#include "agent/server.hpp"
#include "common/cli.hpp"
#include "common/config.hpp"
#include "common/log.hpp"
#include "pods/runtime.hpp"

namespace fa::agent {

namespace asio = boost::asio;

namespace {

Status make_state_dir(const std::string& dir) {
  // mkdir -p with 0700 for what we create: the token and the WireGuard key live here.
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    cur = dir.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST)
      return Error::from_errno("state_dir: mkdir " + cur);
  }
  return {};
}

// Every connection is a file descriptor; the daemon's own (listener,
// netlink, pods socket, state files, UAPI sockets, log) fit in the rest.
constexpr rlim_t kOwnDescriptors = 128;

// Raises the soft RLIMIT_NOFILE as far as the hard one allows (the event
// loop is epoll, never select(), so descriptors above 1023 are fine) and
// says so when api.max_connections still does not fit: accepts would then
// fail with EMFILE (and pause) before the cap is reached.
void fit_descriptors(const Config& cfg, spdlog::logger& log) {
  const rlim_t need = static_cast<rlim_t>(cfg.api.max_connections) + kOwnDescriptors;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need) return;
  rlimit want = rl;
  want.rlim_cur = rl.rlim_max == RLIM_INFINITY ? need : std::min(need, rl.rlim_max);
  if (::setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  if (rl.rlim_cur < need)
    log.warn("api.max_connections {} needs about {} file descriptors, RLIMIT_NOFILE allows {}: raise LimitNOFILE "
             "or lower api.max_connections",
             cfg.api.max_connections, need, static_cast<unsigned long long>(rl.rlim_cur));
}

Result<LoadedToken> load_token(const Config& cfg) {
  // Only the default location is created on demand: a token_file the
  // operator named must exist, or a typo would mint a token nobody knows.
  return load_or_create_token(cfg.effective_token_file(), cfg.token_file.empty());
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  // The daemon holds the bearer token, the node's WireGuard key and the TLS
  // key in memory: no core dump of it, and no ptrace by a process of the
  // same user without CAP_SYS_PTRACE. Before anything is read.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  auto args = Args::parse(argv, {{"config", true}, {"help", false}});
  if (!args) {
    std::fprintf(stderr, "fabric-agent run: %s\n", args.error().message.c_str());
    return 2;
  }
  if (args->has("help")) {
    std::printf(
        "usage: fabric-agent run [--config FILE]\n"
        "  the daemon: the HTTP API for the control plane (docs/api.md); without --config it reads\n"
        "  /etc/fabric-agent/agent.yaml when that exists, else the embedded defaults\n");
    return 0;
  }
  if (!args->positional().empty()) {
    std::fprintf(stderr, "fabric-agent run: unexpected argument '%s'\n", args->positional()[0].c_str());
    return 2;
  }
  const std::string config_path = args->get_or("config", "");
  auto cfg = load_config(config_path);
  if (!cfg) {
    std::fprintf(stderr, "fabric-agent run: %s\n", cfg.error().message.c_str());
    return 2;
  }
  set_log_level(cfg->log_level);
  auto log = fa::logger("agent");
  log->info("fabric-agent {} starting (config: {})", FA_VERSION, cfg->sources());

  // TLS files first: a bad one stops the start before anything is touched.
  std::shared_ptr<asio::ssl::context> tls;
  if (cfg->tls.enabled()) {
    auto t = load_tls_context(cfg->tls);
    if (!t) {
      log->critical("{}", t.error().message);
      return 1;
    }
    tls = std::move(*t);
  }
  fit_descriptors(*cfg, *log);

  if (Status s = make_state_dir(cfg->state_dir); !s) {
    log->critical("{}", s.error().message);
    return 1;
  }
  auto tok = load_token(*cfg);
  if (!tok) {
    log->critical("{}", tok.error().message);
    return 1;
  }
  if (tok->created)
    log->info("created a bearer token in {} (mode 0600); clients read it from there",
              cfg->effective_token_file());
  else
    log->info("bearer token read from {}", cfg->effective_token_file());

  // Declared before the io_context and the worker: the handlers still
  // pending when the loop stops (a long-poll's session) unsubscribe from
  // core as the io_context destroys them.
  Core core(*cfg, make_discovery(*cfg), make_mesh_ops(*cfg));
  asio::thread_pool worker(1);
  // Two threads run the event loop: while one writes the answers of
  // hundreds of long-polls a change woke (and reads their next requests),
  // the other serves the requests that arrive meanwhile (docs/reliability.md,
  // "Soak"). Each connection runs on its own strand; the loop's timers and
  // signals below on one strand of their own.
  constexpr int kIoThreads = 2;
  asio::io_context ioc(kIoThreads);
  auto main_strand = asio::make_strand(ioc);
  core.set_token(std::move(tok->token));
  auto refresh = [&core, &worker] { asio::post(worker, [&core] { core.refresh(); }); };

  // Pods (OCI hooks register containers on a unix socket). Registrations run
  // under Core's operation lock; `changed` only queues a refresh, because it
  // is called with that lock (and the registry's) held. Started inside
  // core.start(), after the state is loaded and before the persisted mesh is
  // applied: pods registered before a restart are reconciled first (alive:
  // adopted, so the mesh is applied inside the pod; gone: wg0 recreated on
  // the host), and the first generation has the CDI spec.
  // Declared after core and worker: destroyed first.
  std::unique_ptr<pods::PodsRuntime> pods_rt;
  auto start_pods = [&] {
    pods::PodsRuntimeOptions po;
    po.state_dir = cfg->state_dir;
    po.socket = cfg->pods.socket;
    po.cdi_dir = cfg->pods.cdi_dir;
    po.dev_root = cfg->pods.dev_root;
    po.hook_dir = cfg->pods.hook_dir;
    po.sysfs_root = cfg->sysfs_root;
    po.inspect = [&core] { return *core.inspect_document(); };
    po.desired_mesh = [&core] { return core.desired_held(); };
    po.login = [&core] { return core.login_held(); };
    po.changed = refresh;
    po.serialize = [&core](const std::function<nlohmann::json()>& fn) { return core.run_serialized(fn); };
    // Fails only when the registry cannot be read (nothing reconciled yet):
    // the host still serves the mesh and status, containers just cannot
    // register (their hook fails with "daemon unreachable"). A socket it
    // cannot serve is a status warning instead, retried at each discovery
    // pass, and the pods it adopted stay where the mesh is configured.
    auto started = pods::PodsRuntime::start(std::move(po));
    if (!started) {
      log->error("pods: containers cannot register: {}", started.error().message);
      return;
    }
    pods_rt = std::move(*started);
    pods::PodsRuntime* pr = pods_rt.get();
    core.set_pods(PodsHooks{
        .list = [pr] { return pr->list(); },
        .interface_netns = [pr] { return pr->interface_netns(); },
        .on_discovery = [pr](const nlohmann::json& inspect) { return pr->on_discovery(inspect); },
    });
  };
  if (Status s = core.start(start_pods); !s) {
    log->critical("startup failed: {}", s.error().message);
    return 1;
  }

  ServerOptions sopt = ServerOptions::from(*cfg);
  sopt.tls_context = std::move(tls);
  Server server(ioc, worker, core, std::move(sopt));
  auto port = server.start();
  if (!port) {
    log->critical("{}", port.error().message);
    return 1;
  }
  auto hp = parse_host_port(cfg->listen);
  std::string host = hp->host.find(':') != std::string::npos ? "[" + hp->host + "]" : hp->host;
  log->info("listening on {}://{}:{}{}", cfg->tls.enabled() ? "https" : "http", host, *port,
            cfg->tls.mutual() ? " (client certificates from tls.client_ca accepted)" : "");

  // Refresh: on a timer and on rtnetlink events; both run on the worker so
  // they queue behind (never interleave with) mesh operations.

  asio::steady_timer refresh_timer(main_strand);
  std::function<void()> arm_refresh = [&] {
    refresh_timer.expires_after(core.config().refresh_interval);
    refresh_timer.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      refresh();
      arm_refresh();
    });
  };
  arm_refresh();
  auto watch = NetlinkWatch::start(ioc, refresh);
  if (!watch)
    log->warn("{}; status follows changes on the {} s timer only", watch.error().message,
              cfg->refresh_interval.count());

  // Watchdog: ping at half of WatchdogSec from the I/O thread, so a wedged
  // event loop stops the pings and systemd restarts us.
  asio::steady_timer wd_timer(main_strand);
  uint64_t wd_usec = 0;
  std::function<void()> arm_watchdog = [&] {
    wd_timer.expires_after(std::chrono::microseconds(wd_usec / 2));
    wd_timer.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      sd_notify(0, "WATCHDOG=1");
      arm_watchdog();
    });
  };
  if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0) {
    log->info("systemd watchdog every {} ms (pinging at half)", wd_usec / 1000);
    arm_watchdog();
  }

  asio::signal_set signals(main_strand, SIGINT, SIGTERM, SIGHUP);
  std::function<void()> on_signal = [&] {
    signals.async_wait([&](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        sd_notify(0, "RELOADING=1");
        auto next = load_config(config_path);
        if (!next) {
          log->error("reload failed, keeping the running config: {}", next.error().message);
        } else {
          const Config old = core.config();
          if (next->listen != old.listen || next->tls != old.tls || next->api != old.api ||
              next->allow_plain_http_on_non_loopback != old.allow_plain_http_on_non_loopback)
            log->warn("reload: listen, tls and api settings take effect on restart");
          auto t = load_token(*next);
          if (!t) {
            log->error("reload failed, keeping the running config: {}", t.error().message);
          } else {
            set_log_level(next->log_level);
            core.set_token(std::move(t->token));
            Config applied = *next;
            asio::post(worker, [&core, applied] {
              core.reconfigure(applied, make_discovery(applied));
              core.refresh();
            });
            log->info("reloaded config from {}", next->sources());
          }
        }
        sd_notify(0, "READY=1");
        on_signal();
        return;
      }
      log->info("{}: stopping; the mesh stays up", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      sd_notify(0, "STOPPING=1");
      refresh_timer.cancel();
      wd_timer.cancel();
      watch = Error{"stopped"};
      // Long-polls waiting now get their answer (and Connection: close)
      // before the loop stops, so a control plane sees the stop as an
      // answer, not as a dropped connection.
      server.stop(std::chrono::seconds(2), [&ioc] { ioc.stop(); });
    });
  };
  on_signal();

  sd_notify(0, "READY=1\nSTATUS=serving");
  log->info("ready (generation {})", core.snapshot()->generation);
  std::vector<std::thread> more;
  for (int i = 1; i < kIoThreads; ++i) more.emplace_back([&ioc] { ioc.run(); });
  ioc.run();
  for (auto& t : more) t.join();
  worker.join();
  log->info("stopped");
  return 0;
}

}  // namespace fa::agent
