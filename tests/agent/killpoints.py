#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Kill points: the daemon (and `mesh apply`) killed with SIGKILL at each
crash point of a mesh change (common/fault.hpp), then started again: it
must converge. After every kill and restart:

  - the persisted desired mesh is the one before the change or the one asked
    for (never a mix, never unreadable), and no temporary file is left;
  - the live interface holds exactly the persisted mesh (peers, allowed IPs,
    endpoints, address), once: one interface, one wireguard-go;
  - the change sent again is answered 200 and lands.

  tests/agent/killpoints.py FABRIC_AGENT [--sample K]   (root; wireguard-go)

--sample K kills at every K-th point of each scenario (and its first and
last); without it, at every point (`make killpoints`). Prints one line per
scenario and the number of kills it survived.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

AGENT = os.path.abspath(sys.argv[1])
SAMPLE = int(sys.argv[sys.argv.index("--sample") + 1]) if "--sample" in sys.argv else 1
TAG = str(os.getpid() % 100000)
NS = "fa-kp-" + TAG
IF = "fkp" + TAG
PORT = 7600 + os.getpid() % 300
KEYS = [
    "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=",
    "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=",
    "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=",
    "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=",
    "SQlkvhGEIjudJ36k8Ihg2kHMUCgnRZ6ujibaJzXDKkI=",
    "eIY3oE1cFAGl02B1lU0TPkRDBXGdoGRpL6MQSDtqhU0=",
]


def fail(msg):
    print("killpoints: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def sh(cmd, check=True, env=None):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        fail(f"{cmd}: exit {r.returncode}: {r.stdout}{r.stderr}")
    return r


def peer(i, endpoint_host=None):
    return {"public_key": KEYS[i], "endpoint": f"192.0.2.{endpoint_host or i + 1}:51820",
            "allowed_ips": [f"10.42.0.{i + 2}/32"]}


def mesh(peers, address="10.42.0.1/24", mtu=None):
    m = {"cluster_id": "kp", "interface": IF, "address": address, "peers": peers}
    if mtu:
        m["mtu"] = mtu
    return m


A = mesh([peer(0), peer(1), peer(2)])
B = mesh([peer(0, 77), peer(3), peer(4)], mtu=1380)  # one kept (moved), two gone, two new
PATCH = {"cluster_id": "kp", "peers": [peer(0, 88), peer(5)], "remove": [KEYS[2]]}
A_PATCHED = mesh([peer(0, 88), peer(1), peer(5)])
EMPTY = mesh([])  # no current peer stays: the list replaced in one step
RENUMBERED = mesh([peer(1), peer(2)], address="10.42.0.9/24")
POD = "fa-kpp-" + TAG  # a pod's namespace: created on the host, moved there
IN_POD = dict(mesh([peer(0), peer(1)]), netns=POD)


class Node:
    """One daemon in its own network namespace, on loopback."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="fa-killpoints-")
        self.proc = None
        with open(self.dir + "/agent.yaml", "w") as f:
            f.write(f"listen: 127.0.0.1:{PORT}\nstate_dir: {self.dir}/state\nlog_level: info\n"
                    f"refresh_interval: 3600\noverlay: {{backend: userspace, interface: {IF}}}\n"
                    f"pods: {{socket: {self.dir}/pods.sock, cdi_dir: \"\"}}\n")

    def start(self, fault_at=0, log=None):
        env = dict(os.environ)
        env.pop("FA_FAULT_AT", None)
        env.pop("FA_FAULT_LOG", None)
        if fault_at:
            env["FA_FAULT_AT"] = str(fault_at)
        if log:
            env["FA_FAULT_LOG"] = log
        out = open(self.dir + "/agent.log", "a")
        self.proc = subprocess.Popen(["ip", "netns", "exec", NS, AGENT, "run", "--config", self.dir + "/agent.yaml"],
                                     stdout=out, stderr=out, env=env)
        for _ in range(300):
            if self.proc.poll() is not None:
                fail("the daemon exited at start:\n" + open(self.dir + "/agent.log").read()[-3000:])
            r = sh(f"ip netns exec {NS} curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{PORT}/healthz",
                   check=False)
            if r.stdout == "200":
                return
            time.sleep(0.05)
        fail("the daemon did not answer /healthz")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        self.proc = None

    def request(self, method, body=None):
        token = open(self.dir + "/state/token").read().strip()
        data = ""
        if body is not None:
            with open(self.dir + "/body.json", "w") as f:
                json.dump(body, f)
            data = f"-H 'Content-Type: application/json' --data-binary @{self.dir}/body.json"
        r = sh(f"ip netns exec {NS} curl -s -m 20 -w '\\n%{{http_code}}' -X {method} "
               f"-H 'Authorization: Bearer {token}' {data} http://127.0.0.1:{PORT}/v1/mesh", check=False)
        lines = r.stdout.rsplit("\n", 1)
        code = lines[-1] if r.returncode == 0 else "none"
        return code, lines[0] if len(lines) > 1 else ""

    def wait_exit(self):
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            fail("the daemon armed to die did not")
        rc = self.proc.returncode
        self.proc = None
        return rc


def live(ns=None):
    """The interface as wg and ip show it (in `ns`, else the daemon's
    namespace): peers {key: (endpoint, ips)} and address."""
    ns = ns or NS
    r = sh(f"ip netns exec {ns} wg show {IF} dump", check=False)
    if r.returncode != 0:
        return None
    peers = {}
    for line in r.stdout.splitlines()[1:]:
        f = line.split("\t")
        peers[f[0]] = (f[2], tuple(sorted(f[3].split(","))) if f[3] != "(none)" else ())
    addr = sh(f"ip -n {ns} -4 -o addr show dev {IF}", check=False).stdout.split()
    return {"peers": peers, "address": addr[3] if len(addr) > 3 else None}


def live_of(m):
    return live(m.get("netns") if m else None)


def down_everywhere():
    sh(f"ip netns exec {NS} {AGENT} mesh down --interface {IF}", check=False)
    sh(f"ip netns exec {NS} {AGENT} mesh down --interface {IF} --netns {POD}", check=False)


def desired_view(m):
    return {"peers": {p["public_key"]: (p.get("endpoint", "(none)"), tuple(sorted(p["allowed_ips"])))
                      for p in m["peers"]},
            "address": m["address"]}


def wireguard_go_count():
    return int(sh(f"pgrep -c -x -f 'wireguard-go -f {IF}'", check=False).stdout.strip() or 0)


def reset(node, start):
    """Nothing but `start` applied (None: no mesh, no interface)."""
    node.stop()
    down_everywhere()
    shutil.rmtree(node.dir + "/state", ignore_errors=True)
    node.start()  # the token and the node's key, made once
    if start is not None:
        code, out = node.request("PUT", start)
        if code != "200":
            fail(f"setting up the starting mesh: {code} {out}")
    node.stop()


def check_converged(node, before, target, what):
    node.start()
    left = [n for n in os.listdir(node.dir + "/state") if ".tmp." in n or ".corrupt-" in n]
    if left:
        fail(f"{what}: after the restart, files left in the state directory: {left}")
    code, out = node.request("GET")
    if code != "200":
        fail(f"{what}: GET /v1/mesh after the restart: {code} {out}")
    desired = json.loads(out)["desired"]
    views = [None if m is None else desired_view(m) for m in (before, target)]
    got = None if desired is None else desired_view(desired)
    if got not in views:
        fail(f"{what}: persisted mesh is neither the one before nor the one asked for: {desired}")
    lv = live_of(desired)
    if got is None:
        if live() is not None or live(POD) is not None:
            fail(f"{what}: no mesh persisted, yet {IF} exists")
    else:
        if lv != got:
            fail(f"{what}: the interface holds {lv}, the persisted mesh says {got}")
    if wireguard_go_count() > 1:
        fail(f"{what}: {wireguard_go_count()} wireguard-go serve {IF}")


def points_of(node, start, op):
    reset(node, start)
    log = node.dir + "/points.log"
    if os.path.exists(log):
        os.unlink(log)
    node.start(log=log)
    code, out = op(node)
    node.stop()
    if code != "200":
        fail(f"the operation without a fault: {code} {out}")
    return [line.split(" ", 1)[1] for line in open(log).read().splitlines()] if os.path.exists(log) else []


def chosen(n):
    return sorted({i for i in range(1, n + 1) if i % SAMPLE == 0} | {1, n}) if n else []


def daemon_scenario(node, name, start, op, target):
    points = points_of(node, start, op)
    kills = 0
    for n in chosen(len(points)):
        what = f"{name}, killed at point {n} ({points[n - 1]})"
        reset(node, start)
        node.start(fault_at=n)
        op(node)
        rc = node.wait_exit()
        if rc != -signal.SIGKILL:
            fail(f"{what}: the daemon ended with {rc}, not at the point")
        check_converged(node, start, target, what)
        code, out = op(node)  # the control plane sends it again
        if code != "200":
            fail(f"{what}: the change sent again after the restart: {code} {out}")
        if live_of(target) != (None if target is None else desired_view(target)):
            fail(f"{what}: after the retry the interface holds {live_of(target)}")
        node.stop()
        kills += 1
    print(f"killpoints: {name}: {len(points)} points, {kills} kills survived")
    return kills


def cli_scenario(node, name, start, target):
    """`mesh apply --file` killed at each point, then run again."""
    node.stop()
    path = node.dir + "/cli.json"
    with open(path, "w") as f:
        json.dump(target, f)

    def setup():
        down_everywhere()
        if start is not None:
            with open(node.dir + "/start.json", "w") as f:
                json.dump(start, f)
            sh(f"ip netns exec {NS} {AGENT} mesh apply --backend userspace --file {node.dir}/start.json")

    setup()
    log = node.dir + "/cli-points.log"
    if os.path.exists(log):
        os.unlink(log)
    env = dict(os.environ, FA_FAULT_LOG=log)
    sh(f"ip netns exec {NS} {AGENT} mesh apply --backend userspace --file {path}", env=env)
    points = open(log).read().splitlines() if os.path.exists(log) else []
    kills = 0
    for n in chosen(len(points)):
        what = f"{name}, killed at point {n} ({points[n - 1].split(' ', 1)[1]})"
        setup()
        env = dict(os.environ, FA_FAULT_AT=str(n))
        r = sh(f"ip netns exec {NS} {AGENT} mesh apply --backend userspace --file {path}", check=False, env=env)
        if r.returncode != 128 + signal.SIGKILL and r.returncode != -signal.SIGKILL:
            fail(f"{what}: mesh apply ended with {r.returncode}: {r.stderr[-2000:]}")
        sh(f"ip netns exec {NS} {AGENT} mesh apply --backend userspace --file {path}")
        if live_of(target) != desired_view(target):
            fail(f"{what}: after the second apply the interface holds {live_of(target)}")
        if wireguard_go_count() != 1:
            fail(f"{what}: {wireguard_go_count()} wireguard-go serve {IF}")
        kills += 1
    print(f"killpoints: {name}: {len(points)} points, {kills} kills survived")
    return kills


def main():
    if os.geteuid() != 0:
        fail("needs root (a network namespace)")
    sh(f"ip netns add {NS}")
    sh(f"ip -n {NS} link set lo up")
    sh(f"ip netns add {POD}")
    sh(f"ip -n {POD} link set lo up")
    node = Node()
    total = 0
    try:
        total += daemon_scenario(node, "PUT creating the mesh", None, lambda n: n.request("PUT", A), A)
        total += daemon_scenario(node, "PUT changing peers, MTU", A, lambda n: n.request("PUT", B), B)
        total += daemon_scenario(node, "PATCH of three peers", A, lambda n: n.request("PATCH", PATCH), A_PATCHED)
        total += daemon_scenario(node, "PUT emptying the peer list", A, lambda n: n.request("PUT", EMPTY), EMPTY)
        total += daemon_scenario(node, "PUT renumbering the node", A, lambda n: n.request("PUT", RENUMBERED),
                                 RENUMBERED)
        total += daemon_scenario(node, "PUT into a pod's namespace", None, lambda n: n.request("PUT", IN_POD), IN_POD)
        total += daemon_scenario(node, "DELETE", A, lambda n: n.request("DELETE"), None)
        total += cli_scenario(node, "mesh apply creating the mesh", None, A)
        total += cli_scenario(node, "mesh apply changing peers, MTU", A, B)
        total += cli_scenario(node, "mesh apply into a pod's namespace", None, IN_POD)
        print(f"killpoints: {total} kills, every one converged")
    finally:
        node.stop()
        down_everywhere()
        sh(f"ip netns del {NS}", check=False)
        sh(f"ip netns del {POD}", check=False)
        shutil.rmtree(node.dir, ignore_errors=True)


main()
