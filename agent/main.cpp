// SPDX-License-Identifier: Apache-2.0
// fabric-agent: one subcommand per job. Each module exposes its subcommands
// as `int cmd_xxx(const std::vector<std::string>& args)`; this file only
// dispatches and turns escaped exceptions into one line on stderr.
//
// It is built twice (agent/CMakeLists.txt; docs/packaging.md, "Two
// executables"): as the whole agent (libexec/fabric-agent/fabric-agent),
// and with FA_FRONT as the static front (bin/fabric-agent), whose table has
// the same commands but runs only `mesh` and `version` itself: for the others
// it execs the whole agent with the same arguments (same process, same pid).
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "overlay/cli.hpp"
#ifdef FA_FRONT
#include "common/child.hpp"
#else
#include "agent/cli.hpp"
#include "pods/cli.hpp"
#include "probes/cli.hpp"
#include "probes/rdma/cli.hpp"
#endif

// The process constructs no standard stream. yaml-cpp's sources include
// <iostream>, so each of its objects linked here would run
// std::ios_base::Init at startup: eight streams (cin, cout, ... wcerr) and
// the classic locale with its ~60 facets, ~50,000 instructions and a dozen
// page faults in every `fabric-agent` process (~0.6 ms of each `mesh apply`
// in the lab's emulated VM), for streams nothing here uses (output goes
// through stdio and spdlog; yaml-cpp reads from string streams, which set
// their locale up when first used). agent/CMakeLists.txt points the
// constructor and destructor of ios_base::Init at these two for this binary
// only; tests/agent/no_iostream.sh fails the build's tests if a standard
// stream object is ever linked in (it would then be used unconstructed).
extern "C" void fa_ios_base_init_skipped(void*) {}
extern "C" void fa_ios_base_fini_skipped(void*) {}

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*fn)(const std::vector<std::string>&);
};

int cmd_version(const std::vector<std::string>&) {
  std::printf("fabric-agent %s\n", FA_VERSION);
  return 0;
}

// In the front, a command of the whole agent only: no function (exec'd).
#ifdef FA_FRONT
#define FA_WHOLE(fn) nullptr
#else
#define FA_WHOLE(fn) fn
#endif

const Command kCommands[] = {
    {"run", "the daemon: HTTP API for the control plane (see docs/api.md)", FA_WHOLE(fa::agent::cmd_run)},
    {"status", "the local daemon's view: fabric, NCCL env, mesh, pods", FA_WHOLE(fa::agent::cmd_status)},
    {"cluster", "cluster form --agent URL...: check a set of agents and form their mesh",
     FA_WHOLE(fa::agent::cmd_cluster)},
    {"cdi", "CDI spec for fabric-agent.io/rdma=all: cdi generate [--output DIR]",
     FA_WHOLE(fa::pods::cmd_cdi)},
    {"inspect", "one discovery pass: HCAs, GIDs, GPUs, fabric identity, NCCL env",
     FA_WHOLE(fa::probes::cmd_inspect)},
    {"mesh", "WireGuard overlay: mesh apply --file F | show [--json] | down", fa::overlay::cmd_mesh},
    {"oci-hook", "run by the container runtime: oci-hook create-runtime|poststop",
     FA_WHOLE(fa::pods::cmd_oci_hook)},
    {"probe", "RDMA link probe between two agents: probe rdma serve|run", FA_WHOLE(fa::rdma::cmd_probe)},
    {"version", "print the version", cmd_version},
};

#ifdef FA_FRONT
// The front's way to every command it does not run: the whole agent in its
// place, with the same arguments, environment and open files.
[[noreturn]] void exec_whole(char** argv) {
  auto whole = fa::whole_agent_path();
  if (whole) {
    ::execv(whole->c_str(), argv);
    std::fprintf(stderr, "fabric-agent: cannot run the agent at %s: %s (the package installs it there)\n",
                 whole->c_str(), std::strerror(errno));
  } else {
    std::fprintf(stderr, "fabric-agent: cannot find the agent: %s\n", whole.error().message.c_str());
  }
  std::exit(127);
}
#endif

// Every command but the daemon ends here once its work is done and its output
// written: what would run after main are the destructors of static objects
// (libstdc++'s streams and locale, Boost.Asio's service ids, spdlog's
// registry, libnl's caches, OpenSSL's atexit cleanup), which only free memory
// that the kernel takes back whole, faulting in code pages to do it (~0.15 ms
// of a 250-peer `mesh apply` in the lab's VM). Under AddressSanitizer the
// normal exit stays: LeakSanitizer runs from it.
[[noreturn, maybe_unused]] void end_command(int rc) {
  std::fflush(nullptr);  // stdout, when it is a pipe or a file
  std::_Exit(rc);
}

int finish(const std::string& name, int rc) {
#ifndef __SANITIZE_ADDRESS__
  if (name != "run") end_command(rc);
#endif
  (void)name;
  return rc;
}

void usage(FILE* out) {
  std::fprintf(out, "usage: fabric-agent <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    usage(stdout);
    return 0;
  }
  if (name == "--version") name = "version";
  // Every command but the daemon lives for milliseconds: memory it frees is
  // worth more to its own next allocation than to the kernel, which would
  // hand it back page fault by page fault. So no large block gets its own
  // mapping (unmapped when freed) and the heap is never trimmed (a
  // 1000-peer `mesh apply`: ~433 -> ~363 page faults; 32 MiB is glibc's
  // ceiling for the threshold).
  // A thread of such a command (`mesh apply` reads the kernel's device on
  // one while it parses the file) shares the main heap: an arena of its own
  // would cost a 64 MiB reservation trimmed by munmap, whose TLB shootdown
  // stalls both threads (~0.7 ms in the lab's emulated VM). The heap
  // grows by 1 MiB at a time (pages are still touched only when used):
  // one brk(2) instead of one per 128 KiB, each of which takes the
  // address space's lock that the other thread's page faults wait on.
  if (name != "run") {
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
    mallopt(M_TOP_PAD, 1024 * 1024);
    mallopt(M_ARENA_MAX, 1);
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
#ifdef FA_FRONT
    if (!c.fn) exec_whole(argv);
#endif
    try {
      return finish(name, c.fn(args));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fabric-agent %s: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "fabric-agent: unknown command '%s'\n", name.c_str());
  usage(stderr);
  return 2;
}
