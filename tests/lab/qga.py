#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Host side of the provider lab's command channel: the QEMU guest agent
(Debian's qemu-guest-agent, in every lab machine) over its virtio-serial
port, which QEMU serves as a unix socket (docs/lab.md, "The provider lab").

  qga.py exec SOCK [--timeout S] [--stdin FILE] -- CMD      run `sh -c CMD`, print its output, exit with its status
  qga.py start SOCK -- CMD                                  start it, print the guest pid
  qga.py collect SOCK PID [--timeout S]                     wait for a started command, as exec
  qga.py ping SOCK [--timeout S]                            until the guest agent answers
  qga.py console SOCK                                       the machine's console (a root shell on hvc0)

Each request opens its own connection (QEMU serves one client at a time on
the socket; the others wait in the listen backlog), so several commands can
run at once on one machine: the guest agent keeps a started process's
output until it is collected. A timed-out command is killed (SIGKILL) and
exec exits 124.
"""
import base64
import json
import os
import select
import socket
import sys
import time

ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "HOME=/root", "LANG=C.UTF-8", "TERM=dumb"]


class Agent:
    def __init__(self, path, connect_timeout=30.0):
        deadline = time.monotonic() + connect_timeout
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.s.connect(path)
                break
            except OSError:
                self.s.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.buf = b""
        # guest-sync-delimited: the agent answers after a 0xFF byte, so
        # whatever an earlier client left half-read in the channel is skipped.
        sync = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
        self.s.sendall(b"\xff" + json.dumps({"execute": "guest-sync-delimited",
                                             "arguments": {"id": sync}}).encode())
        while True:
            self._fill(10.0)
            i = self.buf.find(b"\xff")
            if i >= 0:
                self.buf = self.buf[i + 1:]
                break
            self.buf = b""
        while True:
            r = self._reply(10.0)
            if r.get("return") == sync:
                return

    def _fill(self, timeout):
        r, _, _ = select.select([self.s], [], [], timeout)
        if not r:
            raise TimeoutError("the guest agent did not answer")
        d = self.s.recv(65536)
        if not d:
            raise ConnectionError("the guest agent closed the connection")
        self.buf += d

    def _reply(self, timeout):
        while b"\n" not in self.buf:
            self._fill(timeout)
        line, self.buf = self.buf.split(b"\n", 1)
        line = line.strip(b"\xff \r")
        return json.loads(line) if line else self._reply(timeout)

    def call(self, cmd, args=None, timeout=30.0):
        m = {"execute": cmd}
        if args is not None:
            m["arguments"] = args
        self.s.sendall(json.dumps(m).encode() + b"\n")
        r = self._reply(timeout)
        if "error" in r:
            raise RuntimeError("%s: %s" % (cmd, r["error"].get("desc", r["error"])))
        return r.get("return")

    def close(self):
        self.s.close()


def call(sock, cmd, args=None, timeout=30.0):
    a = Agent(sock)
    try:
        return a.call(cmd, args, timeout)
    finally:
        a.close()


def start(sock, cmd, stdin=None):
    args = {"path": "/bin/sh", "arg": ["-c", cmd], "env": ENV, "capture-output": True}
    if stdin is not None:
        args["input-data"] = base64.b64encode(stdin).decode()
    return call(sock, "guest-exec", args)["pid"]


def collect(sock, pid, timeout):
    deadline = time.monotonic() + timeout if timeout > 0 else None
    delay = 0.05
    while True:
        st = call(sock, "guest-exec-status", {"pid": pid})
        if st.get("exited"):
            break
        if deadline is not None and time.monotonic() > deadline:
            try:
                call(sock, "guest-exec", {"path": "/bin/kill", "arg": ["-9", str(pid)], "env": ENV})
            except Exception:
                pass
            sys.stderr.write("qga: command (guest pid %d) timed out after %.0f s and was killed\n" % (pid, timeout))
            return 124
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    sys.stdout.buffer.write(base64.b64decode(st.get("out-data", "")))
    sys.stdout.buffer.flush()
    sys.stderr.buffer.write(base64.b64decode(st.get("err-data", "")))
    sys.stderr.buffer.flush()
    if st.get("out-truncated") or st.get("err-truncated"):
        sys.stderr.write("qga: output truncated by the guest agent\n")
    if "exitcode" in st:
        return st["exitcode"]
    return 128 + st.get("signal", 0)


def console(sock):
    import termios
    import tty
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    sys.stderr.write("qga: console %s (Ctrl-] quits)\r\n" % sock)
    tty.setraw(fd)
    try:
        s.sendall(b"\r")
        while True:
            r, _, _ = select.select([fd, s], [], [])
            if fd in r:
                d = os.read(fd, 1024)
                if not d or b"\x1d" in d:
                    break
                s.sendall(d)
            if s in r:
                d = s.recv(4096)
                if not d:
                    break
                os.write(sys.stdout.fileno(), d)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)
        sys.stderr.write("\n")
    return 0


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    op, sock, rest = argv[1], argv[2], argv[3:]
    timeout, stdin_file, cmd, pos = 0.0, None, None, []
    i = 0
    while i < len(rest):
        if rest[i] == "--timeout" and i + 1 < len(rest):
            timeout = float(rest[i + 1]); i += 2
        elif rest[i] == "--stdin" and i + 1 < len(rest):
            stdin_file = rest[i + 1]; i += 2
        elif rest[i] == "--":
            cmd = " ".join(rest[i + 1:]); break
        else:
            pos.append(rest[i]); i += 1
    if op in ("exec", "start") and not cmd:
        sys.stderr.write("qga: %s needs -- CMD\n" % op)
        return 2
    try:
        if op == "exec":
            data = open(stdin_file, "rb").read() if stdin_file else None
            return collect(sock, start(sock, cmd, data), timeout)
        if op == "start":
            print(start(sock, cmd))
            return 0
        if op == "collect":
            return collect(sock, int(pos[0]), timeout)
        if op == "ping":
            deadline = time.monotonic() + (timeout or 60)
            while True:
                try:
                    call(sock, "guest-ping", timeout=5)
                    return 0
                except Exception:
                    if time.monotonic() > deadline:
                        sys.stderr.write("qga: no answer from the guest agent on %s\n" % sock)
                        return 1
                    time.sleep(0.5)
        if op == "console":
            return console(sock)
    except (OSError, RuntimeError, TimeoutError, ValueError) as e:
        sys.stderr.write("qga: %s: %s\n" % (op, e))
        return 125
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
