# SPDX-License-Identifier: Apache-2.0
# The two commands a newcomer needs:
#   make run    install what building and running need, build, run the agent
#   make test   install the test and lab tools too, build the clang ASan/UBSan
#               tree (tests, fuzz harnesses) and run every test in it: the unit
#               and netns tests and a short run of each fuzz harness under the
#               sanitizers; the release packages, built in their Debian 11 root,
#               and the lab and packaging tests on them
#   make fuzz   a fuzzing campaign: every harness of fuzz/ for FUZZ_SECONDS (600) each,
#               or FUZZ_RUNS executions (docs/reliability.md)
#   make test-tsan  unit, netns and lab tests under ThreadSanitizer (not in CI:
#                   ~10 minutes on 2 cores; run it when threaded code changes)
#   make soak   the daemon for 10 minutes under a control plane's load and abuse,
#               against node_exporter under the same load (bench/soak, docs/reliability.md)
#   make package  build the .deb and the .rpm into $(BUILD)/packages, in a Debian 11 root (docs/packaging.md)
# CI runs `make test` (see .ci/run). -Werror is on when CI is set.

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
WERROR     ?= $(if $(CI),ON,OFF)
CMAKE_ARGS ?=
# `make package PACKAGE_RELEASE=2` builds the next package revision.
PACKAGE_RELEASE ?= 1

.PHONY: killpoints soak all deps deps-test deps-fuzz build build-asan build-tsan build-fuzz run demo bench test test-fast test-tsan fuzz package clean format

all: build

# Building and running (scripts/deps.sh); the tests' and the lab's tools on top.
deps:
	@scripts/deps.sh
deps-test: deps
	@scripts/deps.sh --test --lab
deps-fuzz: deps
	@scripts/deps.sh --fuzz

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DFA_WERROR=$(WERROR) $(CMAKE_ARGS)

# The sanitizer tree: clang, every library and test with ASan + UBSan and
# libFuzzer's coverage, a Debug tree so that library assertions stay on; the
# libFuzzer harnesses (fuzz/) are built in it too.
$(ASAN_BUILD)/build.ninja: | deps-fuzz
	CC=clang CXX=clang++ cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFA_SANITIZE=ON -DFA_WERROR=$(WERROR) $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps-fuzz $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)

$(TSAN_BUILD)/build.ninja:
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DFA_TSAN=ON -DFA_WERROR=$(WERROR) $(CMAKE_ARGS)

build-tsan: deps $(TSAN_BUILD)/build.ninja
	cmake --build $(TSAN_BUILD) -j $(JOBS)

# The libFuzzer harnesses alone, in the sanitizer tree (make fuzz).
build-fuzz: deps-fuzz $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target fuzz

# The daemon: /etc/fabric-agent/agent.yaml if it exists, else the embedded
# defaults (http://127.0.0.1:7471, state and token in /var/lib/fabric-agent;
# docs/operator.md). Ctrl-C stops it; the mesh stays.
run: build
	./$(BUILD)/agent/fabric-agent run

# Three agents in network namespaces with wireguard-go, formed into one
# cluster by `fabric-agent cluster form`, pinging over the overlay (as root).
demo: deps-test build
	FA_DEMO=1 tests/agent/e2e_netns.sh ./$(BUILD)/agent/fabric-agent

# Our GET /v1/status against node_exporter's /metrics under wrk (bench/status).
bench: build
	@scripts/deps.sh --bench
	bench/status ./$(BUILD)/agent/fabric-agent

# The whole suite, in one tree: the unit and netns tests under AddressSanitizer
# + UBSan, with each fuzz harness's smoke run; packaging:build compiles the
# release in its Debian 11 root meanwhile (it starts first), and the lab and
# the packaging tests run on what it made: the package providers install.
test: deps-test build-asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# A campaign: each harness in turn (FUZZ_SECONDS each, 0 for no limit; or
# until FUZZ_RUNS executions), growing the corpus in $(ASAN_BUILD)/fuzz/campaign;
# FUZZ_JOBS=N runs N processes per harness. Prints the table of docs/reliability.md.
FUZZ_SECONDS ?= 600
FUZZ_RUNS ?= -1
FUZZ_JOBS ?= 1
fuzz: build-fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_JOBS=$(FUZZ_JOBS) fuzz/campaign.sh $(ASAN_BUILD) $(FUZZ_HARNESSES)

# The daemon's, the CLI's and the tests' threads under ThreadSanitizer: a
# race report ends the process that made it with an error, and its test
# fails. The netns tests and the lab VM run this tree's fabric-agent (the
# lab copies libtsan in with it; there a report makes the process exit 66,
# TSan's default, at its end), so the kernel backend's threads are covered.
test-tsan: deps-test build-tsan
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --test-dir $(TSAN_BUILD) --output-on-failure -j $(JOBS) -LE packaging

# Unit tests only, for a quick edit-compile-test loop.
test-fast: build
	@scripts/deps.sh --test
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L unit

# fabric-agent_<version>-<release>_amd64.deb and fabric-agent-<version>-<release>.x86_64.rpm,
# built in a Debian 11 root (as root; docs/packaging.md): one .deb for Debian
# 11 to 13 and Ubuntu 22.04/24.04, one .rpm for RHEL 9-class systems.
package:
	@scripts/deps.sh --package
	FA_WERROR=$(WERROR) JOBS=$(JOBS) scripts/package.sh $(BUILD) $(BUILD)/packages $(PACKAGE_RELEASE)

format:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)

# Every crash point of a mesh change, not the sample `make test` runs
# (tests/agent/killpoints.py; docs/reliability.md).
soak: build
	@scripts/deps.sh --bench
	bench/soak/run ./$(BUILD)/agent/fabric-agent

killpoints: build
	python3 tests/agent/killpoints.py ./$(BUILD)/agent/fabric-agent
