#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/soak/load.py: the load of one soak phase against one HTTP server.

Started by bench/soak/run inside the benchmark's network namespace. The
steady request rate comes from wrk (C, so that its latencies are the
server's, not this script's), at real-time priority (SCHED_FIFO 10): on
two shared cores this script's bursts (500 long-pollers answered at once
ask again at once) would otherwise delay wrk itself, and that delay would
count as the server's; everything around it is asyncio here:

  idle      kept-alive connections that made one request and then wait,
            reopened when the server closes them
  slow      clients that dribble a request head (one byte a second) and
            come back when they are cut off
  longpoll  clients in GET /v1/status?wait=60 with If-None-Match, again as
            soon as answered
  churn     new connections per second, one request each (Connection:
            close): what a control plane that does not keep connections
            sees
  put       a PUT /v1/mesh every second (two meshes in turn, with curl),
            which wakes every long-poller

Each kind comes from its own 127.x.y.z source addresses (all loopback), as
many clients on many hosts would. Prints one JSON object with the counts,
the latencies and the server's memory at the start and the end.
"""
import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import time

MESH_KEYS = ["gN65BkIKy1eCE9pP1wdc8ROUtkHLF2PfAqYdo8RqYm4=", "WIn1gJkNUhUbHXuUHbDAD2M+ZRWnfjwvxT1QrrV9QF4="]


def mesh(turn):
    # Two meshes that differ in one peer's endpoint. TEST-NET addresses: the
    # namespace has no route to them, and no peer is ever sent anything.
    return json.dumps({
        "cluster_id": "soak",
        "address": "10.42.0.1/24",
        "peers": [{"public_key": k, "endpoint": "192.0.2.%d:%d" % (i + 1, 51820 + turn % 2),
                   "allowed_ips": ["10.42.0.%d/32" % (i + 2)]} for i, k in enumerate(MESH_KEYS)],
    }).encode()


class Http:
    """One HTTP/1.1 connection (Content-Length bodies only, as both servers send)."""

    def __init__(self, reader, writer):
        self.r, self.w = reader, writer

    @classmethod
    async def open(cls, port, src):
        r, w = await asyncio.open_connection("127.0.0.1", port, local_addr=(src, 0))
        return cls(r, w)

    async def request(self, method, target, headers=(), body=b"", close=False):
        head = "%s %s HTTP/1.1\r\nHost: soak\r\n" % (method, target)
        for k, v in headers:
            head += "%s: %s\r\n" % (k, v)
        if body or method in ("PUT", "PATCH"):
            head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        if close:
            head += "Connection: close\r\n"
        self.w.write(head.encode() + b"\r\n" + body)
        await self.w.drain()
        raw = await self.r.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        hdrs = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "0"))
        data = await self.r.readexactly(n) if n else b""
        return status, hdrs, data

    def close(self):
        self.w.close()


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def mem_kib(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon"):
                out[k] = int(v.split()[0])
    return out


WRK_LUA = """
-- one request per connection every SOAK_DELAY_MS milliseconds
local d = tonumber(os.getenv("SOAK_DELAY_MS"))
function delay() return d end
"""


def parse_wrk(out):
    def ms(v):
        m = re.match(r"([\d.]+)(us|ms|s)", v)
        x = float(m.group(1))
        return x / 1000 if m.group(2) == "us" else x * 1000 if m.group(2) == "s" else x
    res = {"requests": 0, "errors": 0, "non2xx": 0}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] in ("50%", "90%", "99%"):
            res["p" + f[0][:-1] + "_ms"] = ms(f[1])
        m = re.search(r"(\d+) requests in", line)
        if m:
            res["requests"] = int(m.group(1))
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", line)
        if m:
            res["errors"] = sum(int(x) for x in m.groups())
        m = re.search(r"Non-2xx or 3xx responses: (\d+)", line)
        if m:
            res["non2xx"] = int(m.group(1))
        m = re.search(r"Requests/sec:\s+([\d.]+)", line)
        if m:
            res["rate"] = float(m.group(1))
    return res


class Soak:
    def __init__(self, a):
        self.a = a
        self.auth = [("Authorization", "Bearer " + a.token)] if a.token else []
        self.stop_at = 0.0
        self.c = {k: 0 for k in ("idle_reopened", "slow_cut_off", "longpoll_answers", "longpoll_errors",
                                 "churn_ok", "churn_failed", "put_failed")}
        self.churn_ms, self.put_ms = [], []
        self.waiting = 0

    def running(self):
        return time.monotonic() < self.stop_at

    async def idle(self, i):
        src = "127.0.1.%d" % (i % 100 + 1)
        while self.running():
            try:
                h = await Http.open(self.a.port, src)
                await h.request("GET", self.a.idle_path, self.auth)
                await h.r.read(1)  # until the server closes it
                h.close()
            except (OSError, asyncio.IncompleteReadError):
                pass
            self.c["idle_reopened"] += 1
            await asyncio.sleep(0.1)

    async def slow(self, i):
        src = "127.0.3.%d" % (i % 10 + 1)
        while self.running():
            try:
                h = await Http.open(self.a.port, src)
                h.w.write(b"GET /v1/status HTTP/1.1\r\nHost: soak\r\nX-Slow: ")
                while self.running():
                    await h.w.drain()
                    try:
                        if await asyncio.wait_for(h.r.read(1), 1.0) == b"":
                            break
                    except asyncio.TimeoutError:
                        h.w.write(b"a")
                h.close()
            except OSError:
                pass
            self.c["slow_cut_off"] += 1
            await asyncio.sleep(0.1)

    async def longpoll(self, i):
        src = "127.0.2.%d" % (i % 50 + 1)
        counted = False
        while self.running():
            try:
                h = await Http.open(self.a.port, src)
                _, hd, _ = await h.request("GET", "/v1/status", self.auth)
                etag = hd.get("etag", "")
                while self.running():
                    if not counted:
                        self.waiting += 1
                        counted = True
                    st, hd, _ = await h.request("GET", "/v1/status?wait=60", self.auth + [("If-None-Match", etag)])
                    etag = hd.get("etag", etag)
                    self.c["longpoll_answers"] += 1
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                self.c["longpoll_errors"] += 1
                await asyncio.sleep(0.1)

    async def churn_one(self):
        t0 = time.monotonic()
        try:
            h = await Http.open(self.a.port, "127.0.0.1")
            st, _, _ = await asyncio.wait_for(h.request("GET", self.a.churn_path, self.auth, close=True), 10)
            h.close()
            if st == 200:
                self.c["churn_ok"] += 1
                self.churn_ms.append((time.monotonic() - t0) * 1000)
                return
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError, IndexError):
            pass
        self.c["churn_failed"] += 1

    async def churn(self):
        tasks = set()
        while self.running():
            t = asyncio.ensure_future(self.churn_one())
            tasks.add(t)
            t.add_done_callback(tasks.discard)
            await asyncio.sleep(1.0 / self.a.churn)
        if tasks:
            await asyncio.wait(tasks)

    async def put_once(self, turn, into=None):
        # curl, a process of its own: its time (connect to last byte) is not
        # held up by this loop answering the long-pollers the PUT wakes.
        path = os.path.join(self.a.workdir, "mesh%d.json" % (turn % 2))
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(mesh(turn))
        cmd = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "-X", "PUT",
               "-H", "Content-Type: application/json", "--data-binary", "@" + path]
        for k, v in self.auth:
            cmd += ["-H", "%s: %s" % (k, v)]
        cmd.append("http://127.0.0.1:%d/v1/mesh" % self.a.port)
        p = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE)
        out, _ = await p.communicate()
        code, secs = out.decode().split()
        if code != "200":
            self.c["put_failed"] += 1
            raise SystemExit("PUT /v1/mesh answered %s" % code)
        if into is not None:
            into.append(float(secs) * 1000)

    async def puts(self):
        turn = 0
        while self.running():
            turn += 1
            await self.put_once(turn, self.put_ms)
            await asyncio.sleep(1.0)

    async def put_series(self, n, turn0):
        # n changes, each once every long-poller is back in its wait.
        out = []
        for k in range(n):
            await asyncio.sleep(0.3)
            await self.put_once(turn0 + k, out)
        return out

    def wrk(self, path, rate, seconds, lua):
        conns = max(1, int(rate // 100))  # each connection: one request every 10 ms
        cmd = ["chrt", "--fifo", "10", "wrk", "-t1", "-c%d" % conns, "-d%ds" % seconds, "--latency", "-s", lua]
        for k, v in self.auth:
            cmd += ["-H", "%s: %s" % (k, v)]
        cmd.append("http://127.0.0.1:%d%s" % (self.a.port, path))
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=dict(os.environ, SOAK_DELAY_MS="10"))

    async def run(self):
        a = self.a
        result = {"server": open("/proc/%d/comm" % a.pid).read().strip(), "longpollers": a.longpoll}
        lua = os.path.join(a.workdir, "delay.lua")
        with open(lua, "w") as f:
            f.write(WRK_LUA)
        far = time.monotonic() + 10 ** 6
        bg = []
        if a.put:
            # The cost of a change alone, then with every long-poller waiting.
            self.stop_at = far
            await self.put_once(0)
            result["put_alone_ms"] = await self.put_series(20, 1)
            bg += [asyncio.ensure_future(self.longpoll(i)) for i in range(a.longpoll)]
            while self.waiting < a.longpoll:
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)
            result["put_with_longpollers_ms"] = await self.put_series(20, 21)
        self.stop_at = far
        bg += [asyncio.ensure_future(self.idle(i)) for i in range(a.idle)]
        bg += [asyncio.ensure_future(self.slow(i)) for i in range(a.slow)]
        await asyncio.sleep(5)  # every idle connection open
        result["mem_start_kib"] = mem_kib(a.pid)
        self.stop_at = time.monotonic() + a.duration
        procs = [("status", self.wrk(a.status_path, a.status_rate, a.duration, lua))]
        if a.metrics_rate:
            procs.append(("metrics", self.wrk("/metrics", a.metrics_rate, a.duration, lua)))
        fg = [asyncio.ensure_future(self.churn())]
        if a.put:
            fg.append(asyncio.ensure_future(self.puts()))
        peak = dict(result["mem_start_kib"])
        while self.running():
            await asyncio.sleep(1)
            m = mem_kib(a.pid)
            for k in m:
                peak[k] = max(peak[k], m[k])
        result["mem_peak_kib"] = peak
        await asyncio.gather(*fg)
        for name, p in procs:
            out, _ = await asyncio.get_running_loop().run_in_executor(None, p.communicate)
            result["wrk_" + name] = parse_wrk(out)
        result["mem_end_kib"] = mem_kib(a.pid)
        for t in bg:
            t.cancel()
        await asyncio.gather(*bg, return_exceptions=True)
        result["counts"] = self.c
        result["churn_p99_ms"] = pct(self.churn_ms, 99)
        for k in ("put_alone_ms", "put_with_longpollers_ms"):
            if k in result:
                xs = result.pop(k)
                result[k.replace("_ms", "_p50_ms")] = pct(xs, 50)
                result[k.replace("_ms", "_max_ms")] = max(xs)
        if self.put_ms:
            result["put_during_soak_p50_ms"] = pct(self.put_ms, 50)
            result["put_during_soak_p99_ms"] = pct(self.put_ms, 99)
            result["puts_during_soak"] = len(self.put_ms)
        return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True, help="the server's pid, for its memory")
    p.add_argument("--token", default="")
    p.add_argument("--workdir", required=True)
    p.add_argument("--duration", type=int, default=600)
    p.add_argument("--status-path", default="/v1/status")
    p.add_argument("--idle-path", default="/healthz")
    p.add_argument("--churn-path", default="/v1/status")
    p.add_argument("--status-rate", type=int, default=800)
    p.add_argument("--metrics-rate", type=int, default=200)
    p.add_argument("--idle", type=int, default=2000)
    p.add_argument("--slow", type=int, default=100)
    p.add_argument("--longpoll", type=int, default=500)
    p.add_argument("--churn", type=float, default=20)
    p.add_argument("--put", action="store_true")
    a = p.parse_args()
    want = a.idle + a.slow + a.longpoll + 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    print(json.dumps(asyncio.run(Soak(a).run())))


if __name__ == "__main__":
    main()
