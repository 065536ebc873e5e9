"""Benchmark the real `mcpwrap serve` against floors measured in the same run.

Run it with the interpreter mcpwrap is installed in; servers are spawned as
`sys.executable -m mcpwrap serve ...`:

    .venv/bin/python bench/bench.py            # full run (a few minutes)
    .venv/bin/python bench/bench.py --quick    # smoke check (~45-60 s)
    .venv/bin/python bench/bench.py --runs 40 --json-only
    .venv/bin/python bench/bench.py --only stuck-reader,shutdown

Every figure is a median / p95 over several samples and is printed next to a
floor measured in the same run (a ratio: lower is better for times, higher
for rates), with the target it must meet. The last line of output is one JSON
object. Exit status: 0 when every target passes, 1 when one fails, 2 when the
benchmark itself could not run. Only the standard library is used.

The hardening scenarios (stuck-reader, pathological-progress, stderr-unread, shutdown) attack the
server: a client that never reads stdout or stderr, tools whose output makes a regex backtrack,
EOF with children that ignore SIGTERM. A server that dies or hangs there fails the figure (each
wait is bounded and a hung server is killed); the other scenarios still run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import random
import select
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN,
               "io.modelcontextprotocol/clientCapabilities": {}}
MiB = 1024 * 1024

SPAWN_TIMEOUT_S = 20.0        # spawn -> first response
REQUEST_TIMEOUT_S = 10.0      # one request -> its response
BURST_TIMEOUT_S = 120.0       # 1,000 pipelined calls -> the last response
EXIT_TIMEOUT_S = 10.0         # EOF on stdin -> the server has exited

TOOLS_TOML = """\
[server]
name = "bench"
version = "1.0.0"
instructions = "Benchmark tools."

[tools.echo]
description = "Print a message"
command = ["echo", "{msg}"]
args.msg = { type = "string", description = "what to print" }

[tools.sleep_half]
description = "Sleep half a second"
command = ["sleep", "0.5"]
timeout = "30s"

[tools.sleep_five]
description = "Sleep five seconds"
command = ["sleep", "5"]
timeout = "30s"

[tools.task_echo]
description = "Print a message, as a task when asked"
command = ["echo", "{msg}"]
task = "optional"
args.msg = { type = "string", description = "what to print" }
"""


class BenchError(Exception):
    pass


class Stalled(BenchError):
    """A bounded wait for the server's answer ran out."""


# --- statistics ------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of at least one value."""
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summary(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "p95": pct(values, 95), "n": len(values)}


# --- progress --------------------------------------------------------------------------------
QUIET = False


def say(text: str) -> None:
    if not QUIET:
        print(f"[bench] {text}", file=sys.stderr, flush=True)


# --- processes -------------------------------------------------------------------------------
SPAWNED: list[subprocess.Popen[bytes]] = []
# Python children start in the temporary directory, so `-m mcpwrap` finds the installed package
# even when the benchmark is run from a source checkout.
WORKDIR: str | None = None


def server_env() -> dict[str, str]:
    """The caller's environment without MCPWRAP_* settings (the flags say everything) and without
    PYTHONDONTWRITEBYTECODE: an installed package has its bytecode cached (pip compiles it), so the
    warm-up spawns may write .pyc files and start-up is not charged for compiling sources."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("MCPWRAP_") and k != "PYTHONDONTWRITEBYTECODE"}


def loadavg() -> list[float]:
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """Children, grandchildren... of pid, read from /proc (empty when it is gone)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def proc_status(pid: int) -> dict[str, int]:
    """VmHWM / VmRSS of a live process, in bytes."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    out[key] = int(value.split()[0]) * 1024
    except OSError as exc:
        raise BenchError(f"process {pid} is gone: {exc}") from None
    if len(out) != 2:
        raise BenchError(f"/proc/{pid}/status has no VmHWM/VmRSS")
    return out


def proc_identity(pid: int) -> tuple[int, int] | None:
    """(start time, process group) of a live process, to be sure a pid still names the same one."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19]), int(fields[2])


def kill_checked(found: list[tuple[int, tuple[int, int] | None]]) -> None:
    """SIGKILL processes seen earlier, each only if its pid still names the same process."""
    for pid, identity in found:
        now = proc_identity(pid)
        if identity is None or now is None or now[0] != identity[0]:
            continue                                   # gone, or the pid was reused
        try:
            if now[1] == pid:
                os.killpg(pid, signal.SIGKILL)         # a tool process leads its own group
            else:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def reap(proc: subprocess.Popen[bytes], timeout: float = EXIT_TIMEOUT_S, force: bool = False) -> None:
    """Close stdin and wait (bounded) for the exit: on EOF the server ends its own tool processes.

    When it does not exit in time (or `force`), it is killed, and so are the tool processes it
    had started, found by pid and start time before the kill."""
    leftovers: list[tuple[int, tuple[int, int] | None]] = []
    if force and proc.poll() is None:
        leftovers = [(pid, proc_identity(pid)) for pid in descendants(proc.pid)]
        proc.kill()
    try:
        if proc.stdin and not proc.stdin.closed:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        leftovers = [(pid, proc_identity(pid)) for pid in descendants(proc.pid)]
        proc.kill()
        proc.wait(5)
    kill_checked(leftovers)
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()
    if proc in SPAWNED:
        SPAWNED.remove(proc)


def supervisors_under(path: str) -> list[int]:
    """Detached task supervisors (reparented away from their server) whose command line names path."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if path.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def end_supervisors(path: str, timeout: float = 10.0) -> None:
    """Wait (bounded) for the task supervisors this run caused, then kill what is left."""
    deadline = time.perf_counter() + timeout
    while (left := supervisors_under(path)) and time.perf_counter() < deadline:
        time.sleep(0.05)
    kill_checked([(pid, proc_identity(pid)) for pid in left])


def kill_all() -> None:
    """At the end (or on an error): every server this run started and is still running is killed."""
    for proc in SPAWNED:
        reap(proc, timeout=5, force=True)


class Server:
    """One real `python -m mcpwrap serve` over pipes, driven from this thread without helper threads."""

    def __init__(self, tools: Path, tmp: Path, name: str, extra: tuple[str, ...] = (),
                 stderr_pipe: bool = False, env: dict[str, str] | None = None) -> None:
        """stderr goes to a file (its tail is quoted in errors), or with stderr_pipe to a pipe
        that is the caller's to read or, as a client may, never to read."""
        self.err_path = tmp / f"{name}.stderr"
        self.argv = [sys.executable, "-m", "mcpwrap", "serve", str(tools),
                     "--secret-file", str(tmp / "secret"), "--state-dir", str(tmp / "state"), *extra]
        with contextlib.ExitStack() as files:
            err = subprocess.PIPE if stderr_pipe else files.enter_context(open(self.err_path, "wb"))
            self.t_spawn = time.perf_counter()
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         env={**server_env(), **(env or {})}, bufsize=0, cwd=WORKDIR)
        SPAWNED.append(self.proc)
        assert self.proc.stdin and self.proc.stdout
        self.wfd, self.rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self.wfd, False)
        os.set_blocking(self.rfd, False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.rfd, selectors.EVENT_READ)
        self.buf = bytearray()
        self.next_id = 0
        self.eof = False
        self.others: dict[int, tuple[float, dict[str, Any]]] = {}   # responses nobody was waiting for
        self.notified: dict[str, int] = {}                          # notifications seen, by method

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_tail(self) -> str:
        try:
            return self.err_path.read_text(errors="replace")[-2000:].strip()
        except OSError:
            return ""

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    @staticmethod
    def encode(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"

    def request_bytes(self, method: str, params: dict[str, Any] | None = None) -> tuple[int, bytes]:
        rid = self.new_id()
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        return rid, self.encode(msg)

    def exchange(self, out: bytes, want: set[int], timeout: float) -> dict[int, tuple[float, dict[str, Any]]]:
        """Write out (interleaved with reading), return {id: (arrival perf_counter, message)} for want."""
        got: dict[int, tuple[float, dict[str, Any]]] = {}
        view = memoryview(out)
        deadline = time.perf_counter() + timeout
        writing = len(view) > 0
        if writing:
            try:
                n = os.write(self.wfd, view)
                view = view[n:]
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise BenchError("the server closed its stdin:\n" + self.stderr_tail()) from None
            writing = len(view) > 0
            if writing:
                self.sel.register(self.wfd, selectors.EVENT_WRITE)
        try:
            while len(got) < len(want) or writing:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    raise Stalled(f"timed out after {timeout:g}s with {len(got)}/{len(want)} responses"
                                     + (f"; stderr:\n{self.stderr_tail()}" if self.stderr_tail() else ""))
                for key, _ in self.sel.select(remaining):
                    if key.fd == self.wfd:
                        try:
                            n = os.write(self.wfd, view)
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:
                            raise BenchError("the server closed its stdin:\n" + self.stderr_tail()) from None
                        view = view[n:]
                        if not view:
                            writing = False
                            self.sel.unregister(self.wfd)
                    else:
                        self._read_into(got, want)
        finally:
            if writing:
                self.sel.unregister(self.wfd)
        return got

    def _read_into(self, got: dict[int, tuple[float, dict[str, Any]]], want: set[int]) -> None:
        try:
            chunk = os.read(self.rfd, 1 << 20)
        except BlockingIOError:
            return
        now = time.perf_counter()
        if not chunk:
            self.eof = True
            raise BenchError("the server exited (stdout closed); stderr:\n" + self.stderr_tail())
        self.buf += chunk
        while (nl := self.buf.find(b"\n")) >= 0:
            line = bytes(self.buf[:nl])
            del self.buf[:nl + 1]
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                raise BenchError(f"the server wrote a line that is not JSON: {line[:200]!r}") from None
            if isinstance(msg, list):          # a batch answer: not sent by this benchmark
                continue
            rid = msg.get("id")
            if "method" in msg:
                self.notified[msg["method"]] = self.notified.get(msg["method"], 0) + 1
            elif rid in want:
                got[rid] = (now, msg)
            else:
                self.others[rid] = (now, msg)

    def read_some(self, timeout: float) -> None:
        """Read what arrives within timeout (responses go to self.others)."""
        if self.sel.select(timeout):
            self._read_into({}, set())

    def collect(self, ids: set[int], timeout: float) -> None:
        """Wait (bounded) until every response in ids has arrived; they end up in self.others."""
        self.others.update(self.exchange(b"", ids - self.others.keys(), timeout))

    def call(self, method: str, params: dict[str, Any] | None = None,
             timeout: float = REQUEST_TIMEOUT_S) -> tuple[float, dict[str, Any]]:
        """One request; returns (seconds from just before the write to the response, message)."""
        rid, data = self.request_bytes(method, params)
        t0 = time.perf_counter()
        arrived, msg = self.exchange(data, {rid}, timeout)[rid]
        return arrived - t0, msg

    def result(self, method: str, params: dict[str, Any] | None = None) -> tuple[float, dict[str, Any]]:
        seconds, msg = self.call(method, params)
        if "result" not in msg:
            raise BenchError(f"{method} failed: {msg.get('error')}")
        return seconds, msg["result"]

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.exchange(self.encode(msg), set(), REQUEST_TIMEOUT_S)

    def initialize(self) -> dict[str, Any]:
        _, result = self.result("initialize", {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "mcpwrap-bench", "version": "1"}})
        self.notify("notifications/initialized")
        return result

    def close(self, force: bool = False) -> None:
        self.sel.close()
        reap(self.proc, force=force)


def init_params() -> dict[str, Any]:
    return {"protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "mcpwrap-bench", "version": "1"}}


def echo_params(msg: str = "x", **extra: Any) -> dict[str, Any]:
    return {"name": "echo", "arguments": {"msg": msg}, **extra}


def check_call_result(msg: dict[str, Any]) -> None:
    result = msg.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        raise BenchError(f"a tools/call did not succeed: {msg.get('error') or result}")


# --- measurements ----------------------------------------------------------------------------
def run_bounded(argv: list[str], timeout: float, capture: bool = False, **popen: Any) -> None:
    """subprocess.run(argv) with a bounded wait that does not distort the timing.

    Popen.wait(timeout) (and so subprocess.run(timeout=...)) polls with growing sleeps, which
    adds up to tens of milliseconds to a floor; here the exit is awaited on a pidfd and output
    is drained with a selector, so the floor ends when the process does.
    """
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE if capture else None,
                            stderr=subprocess.PIPE if capture else None, **popen)
    deadline = time.perf_counter() + timeout
    try:
        if capture:
            assert proc.stdout and proc.stderr
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                sel.register(proc.stderr, selectors.EVENT_READ)
                while sel.get_map():
                    ready = sel.select(deadline - time.perf_counter())
                    if not ready:
                        raise BenchError(f"{argv[0]} did not finish within {timeout:g}s")
                    for key, _ in ready:
                        if not os.read(key.fd, 65536):
                            sel.unregister(key.fileobj)
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            proc.wait(max(0.0, deadline - time.perf_counter()))            # no pidfd: polling wait
        else:
            try:
                if not select.select([pidfd], [], [], max(0.0, deadline - time.perf_counter()))[0]:
                    raise BenchError(f"{argv[0]} did not exit within {timeout:g}s")
            finally:
                os.close(pidfd)
            proc.wait()                                                   # exited: returns at once
    except BaseException:
        proc.kill()
        proc.wait(5)
        raise
    finally:
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited with status {proc.returncode}")


def floor_import_trio() -> float:
    t0 = time.perf_counter()
    run_bounded([sys.executable, "-c", "import trio"], SPAWN_TIMEOUT_S, env=server_env(), cwd=WORKDIR)
    return time.perf_counter() - t0


def cold_start(tools: Path, tmp: Path, method: str) -> float:
    """Spawn -> the response to the first request (written right after spawn)."""
    server = Server(tools, tmp, f"cold-{method.replace('/', '-')}")
    try:
        params = {"initialize": init_params(), "server/discover": {"_meta": MODERN_META},
                  "tools/call": {"name": "echo", "arguments": {"msg": "cold"}, "_meta": MODERN_META}}[method]
        rid, data = server.request_bytes(method, params)
        arrived, msg = server.exchange(data, {rid}, SPAWN_TIMEOUT_S)[rid]
        if "result" not in msg:
            raise BenchError(f"{method} failed: {msg.get('error')}")
        return arrived - server.t_spawn
    finally:
        server.close()


def measure_cold_start(tools: Path, big_tools: Path, tmp: Path, runs: int) -> dict[str, Any]:
    say(f"cold start: {runs} runs each of floor / initialize / server/discover / tools/call / initialize with 1,000 tools")
    # warm-up: .pyc files, the page cache, and mcpwrap's per-state-dir cache of validated tools files
    floor_import_trio(); cold_start(tools, tmp, "initialize"); cold_start(big_tools, tmp, "initialize")
    samples: dict[str, list[float]] = {"floor": [], "initialize": [], "discover": [], "call": [], "initialize_1000": []}
    kinds: dict[str, Callable[[], float]] = {
        "floor": floor_import_trio,
        "initialize": lambda: cold_start(tools, tmp, "initialize"),
        "discover": lambda: cold_start(tools, tmp, "server/discover"),
        "call": lambda: cold_start(tools, tmp, "tools/call"),
        "initialize_1000": lambda: cold_start(big_tools, tmp, "initialize")}
    order = list(kinds)
    shuffle = random.Random(1).shuffle
    for _ in range(runs):                     # interleaved, in a shuffled order: drift hits all alike
        shuffle(order)
        for kind in order:
            samples[kind].append(kinds[kind]())
    return {k: [v * 1000 for v in vals] for k, vals in samples.items()}


def floor_spawn_echo(n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        run_bounded(["echo", "x"], 10.0, capture=True)
        out.append(time.perf_counter() - t0)
    return out


def measure_per_call(tools: Path, tmp: Path, calls: int) -> dict[str, Any]:
    say(f"per-call latency: {calls} sequential echo calls, and {calls} spawns of 'echo x', "
        "interleaved in blocks of 50")
    server = Server(tools, tmp, "per-call")
    lat: list[float] = []
    floor: list[float] = []
    try:
        server.initialize()
        for _ in range(20):                                                  # warm-up
            check_call_result(server.call("tools/call", echo_params())[1])
        floor_spawn_echo(20)
        while len(lat) < calls:                     # blocks: machine noise hits server and floor alike
            for _ in range(min(50, calls - len(lat))):
                seconds, msg = server.call("tools/call", echo_params())
                check_call_result(msg)
                lat.append(seconds)
            floor += floor_spawn_echo(min(50, calls - len(floor)))
    finally:
        server.close()
    return {"server": [v * 1000 for v in lat], "floor": [v * 1000 for v in floor]}


def floor_parallel_echo(n: int) -> float:
    workers = os.cpu_count() or 1

    def one(_: int) -> None:
        run_bounded(["echo", "x"], 30.0, capture=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(n)))
    return time.perf_counter() - t0


def pipelined_burst(server: Server, n: int) -> float:
    ids, chunks = [], []
    for _ in range(n):
        rid, data = server.request_bytes("tools/call", echo_params())
        ids.append(rid)
        chunks.append(data)
    t0 = time.perf_counter()
    got = server.exchange(b"".join(chunks), set(ids), BURST_TIMEOUT_S)
    last = max(arrived for arrived, _ in got.values())
    for _, msg in got.values():
        check_call_result(msg)
    return last - t0


def measure_pipelined(tools: Path, tmp: Path, calls: int, runs: int) -> dict[str, Any]:
    say(f"pipelined: {runs} bursts of {calls} calls; floor: {calls} echo spawns on {os.cpu_count()} threads")
    server = Server(tools, tmp, "pipelined")
    times, floors = [], []
    try:
        server.initialize()
        pipelined_burst(server, min(calls, 100))                             # warm-up
        floor_parallel_echo(min(calls, 100))
        for _ in range(runs):
            times.append(pipelined_burst(server, calls))
            floors.append(floor_parallel_echo(calls))
    finally:
        server.close()
    return {"server": times, "floor": floors, "calls": calls}


def generate_big_tools(path: Path, n: int) -> None:
    parts = ['[server]\nname = "bench-big"\nversion = "1.0.0"\n']
    for i in range(n):
        parts.append(
            f'\n[tools.tool_{i:04d}]\n'
            f'description = "Generated tool number {i}: prints its arguments"\n'
            f'command = ["echo", "{{text}}", "{{count}}"]\n'
            f'annotations = {{ readOnlyHint = true }}\n'
            f'args.text = {{ type = "string", description = "some text", maxLength = 200 }}\n'
            f'args.count = {{ type = "integer", description = "a number", minimum = 0, default = 1 }}\n')
    path.write_text("".join(parts))


def list_all(server: Server) -> tuple[float, int]:
    """All pages of tools/list; (seconds, tools listed)."""
    total, count, cursor = 0.0, 0, None
    for _ in range(100):
        seconds, result = server.result("tools/list", {"cursor": cursor} if cursor else {})
        total += seconds
        count += len(result.get("tools", []))
        cursor = result.get("nextCursor")
        if not cursor:
            return total, count
    raise BenchError("tools/list never ended (100 pages)")


def measure_tools_list(big_tools: Path, tmp: Path, runs: int, n_tools: int) -> dict[str, Any]:
    say(f"tools/list with {n_tools} tools: {runs} full listings; floor: ping on the same server")
    server = Server(big_tools, tmp, "tools-list")
    lists, pings, pages = [], [], 0
    try:
        server.initialize()
        list_all(server)                                                      # warm-up
        for _ in range(runs):
            seconds, count = list_all(server)
            if count != n_tools:
                raise BenchError(f"tools/list returned {count} tools, expected {n_tools}")
            lists.append(seconds * 1000)
            pings.append(server.result("ping")[0] * 1000)
        _, first = server.result("tools/list")
        pages = 1 + (1 if first.get("nextCursor") else 0)
    finally:
        server.close()
    return {"server": lists, "floor": pings, "pages_hint": pages}


def floor_durable_write(directory: Path, n: int) -> list[float]:
    """Temp file, write, fsync, rename, fsync the directory: the least a durable new record costs
    (each a new name, as each task's record is)."""
    directory.mkdir(parents=True, exist_ok=True)
    record = json.dumps({"taskId": "x" * 32, "status": "working", "ttl": 60000,
                         "createdAt": "2026-01-01T00:00:00Z", "tool": "task_echo",
                         "arguments": {"msg": "x"}}).encode()
    out = []
    for _ in range(n):
        name = uuid.uuid4().hex
        t0 = time.perf_counter()
        tmp_path, final = directory / f".rec-{name}.tmp", directory / f"rec-{name}.json"
        fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, record)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp_path, final)
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        out.append(time.perf_counter() - t0)
    return [v * 1000 for v in out]


TERMINAL = ("completed", "failed", "cancelled")


def wait_task(server: Server, task_id: str, timeout: float) -> tuple[float | None, str | None]:
    """Poll tasks/get until the task is terminal; (seconds waited, status), (None, why) when it cannot."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        _, msg = server.call("tasks/get", {"taskId": task_id})
        result = msg.get("result")
        if not isinstance(result, dict):
            return None, f"tasks/get failed: {json.dumps(msg.get('error'))[:200]}"
        status = result.get("status") or (result.get("task") or {}).get("status")
        if status in TERMINAL:
            return time.perf_counter() - t0, status
        time.sleep(0.01)
    return None, f"not terminal after {timeout:g}s"


def measure_tasks(tools: Path, tmp: Path, runs: int) -> dict[str, Any]:
    """Task creation as a sequential client sees it: each sample starts right after the previous
    task's terminal status was read (its supervisor may still be exiting). The floor is sampled
    at that same point, in alternate cycles (a floor write, then an untimed creation), so both
    meet the same disk and the same tail of the previous task; bench/scale_tasks.py does the same."""
    say(f"task creation: {runs} task-augmented calls, each right after the previous task ended; "
        "floor: a durable small-file write at the same point, in alternate cycles")
    floor: list[float] = []
    server = Server(tools, tmp, "tasks")
    try:
        server.initialize()
        lat: list[float] = []
        done: list[float] = []
        statuses: dict[str, int] = {}
        first_ms = None
        wait_note = None
        for i in range(2 * runs + 1):
            timed = i % 2 == 1                                             # else a floor cycle (or the first call)
            if i and not timed:
                floor += floor_durable_write(tmp / "floor-records", 1)
            seconds, msg = server.call("tools/call", {"name": "task_echo", "arguments": {"msg": "x"},
                                                      "task": {"ttl": 60000}})
            result = msg.get("result")
            task = result.get("task") if isinstance(result, dict) else None
            if not isinstance(task, dict) or not isinstance(task.get("taskId"), str):
                why = msg.get("error") or result
                return {"error": f"no task was created: {json.dumps(why)[:300]}", "floor": floor}
            if i == 0:
                first_ms = seconds * 1000                                  # includes lazy imports
            elif timed:
                lat.append(seconds * 1000)
            # wait for its end: the next creation (or floor write) starts right after its terminal status
            waited, status = wait_task(server, task["taskId"], 15.0) if wait_note is None else (None, None)
            if waited is None:
                wait_note = wait_note or status
                time.sleep(0.3)
            else:
                statuses[str(status)] = statuses.get(str(status), 0) + 1
                if timed:
                    done.append((seconds + waited) * 1000)
        out: dict[str, Any] = {"server": lat, "floor": floor, "first_ms": first_ms, "statuses": statuses}
        if done:
            out["create_to_terminal_ms_median"] = statistics.median(done)
        if wait_note:
            out["wait_note"] = wait_note
        return out
    except BenchError as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        return {"error": " | ".join(lines[:1] + lines[-2:]) if len(lines) > 1 else str(exc), "floor": floor}
    finally:
        server.close()


def measure_rss(tools: Path, tmp: Path, runs: int, concurrent: int) -> dict[str, Any]:
    say(f"peak RSS: {runs} servers idle, then under {concurrent} concurrent 'sleep 0.5' calls; floor: python + import trio")
    floors, idle, busy, busy_now = [], [], [], []
    for _ in range(runs):
        proc = subprocess.Popen([sys.executable, "-c",
                                 "import sys, trio; sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=server_env(), cwd=WORKDIR)
        SPAWNED.append(proc)
        try:
            assert proc.stdout
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(SPAWN_TIMEOUT_S):
                raise BenchError("the RSS floor process did not start")
            sel.close()
            proc.stdout.readline()
            floors.append(proc_status(proc.pid)["VmHWM"] / MiB)
        finally:
            reap(proc)
        server = Server(tools, tmp, "rss")
        try:
            server.initialize()
            server.result("tools/list")
            check_call_result(server.call("tools/call", echo_params())[1])     # one call: the runner is loaded
            server.result("ping")
            time.sleep(0.2)
            idle.append(proc_status(server.pid)["VmHWM"] / MiB)
            ids, chunks = [], []
            for _ in range(concurrent):
                rid, data = server.request_bytes("tools/call", {"name": "sleep_half", "arguments": {}})
                ids.append(rid)
                chunks.append(data)
            got = server.exchange(b"".join(chunks), set(ids), BURST_TIMEOUT_S)
            for _, msg in got.values():
                check_call_result(msg)
            status = proc_status(server.pid)
            busy.append(status["VmHWM"] / MiB)
            busy_now.append(status["VmRSS"] / MiB)
        finally:
            server.close()
    return {"floor": floors, "idle": idle, "busy": busy, "busy_rss_after": busy_now}


def wait_for_children(pid: int, name: str, count: int, timeout: float) -> int:
    deadline = time.perf_counter() + timeout
    seen = 0
    while time.perf_counter() < deadline:
        seen = 0
        for kid in descendants(pid):
            try:
                with open(f"/proc/{kid}/comm") as f:
                    seen += f.read().strip() == name
            except OSError:
                pass
        if seen >= count:
            return seen
        time.sleep(0.02)
    return seen


def measure_under_load(tools: Path, tmp: Path, windows: int, samples: int, slow: int) -> dict[str, Any]:
    say(f"ping / server/discover: {windows} window(s) of {samples} each while {slow} 'sleep 5' calls run; "
        "floor: the same requests on the idle server")
    out: dict[str, list[float]] = {"ping_idle": [], "discover_idle": [], "ping_busy": [], "discover_busy": []}
    started_counts = []
    discover = {"_meta": MODERN_META}
    for _ in range(windows):
        server = Server(tools, tmp, "under-load")
        try:
            server.initialize()
            for _ in range(10):                                                 # warm-up
                server.result("ping")
                server.result("server/discover", discover)
            for _ in range(samples):
                out["ping_idle"].append(server.result("ping")[0] * 1000)
                out["discover_idle"].append(server.result("server/discover", discover)[0] * 1000)
            chunks = [server.request_bytes("tools/call", {"name": "sleep_five", "arguments": {}})[1]
                      for _ in range(slow)]
            t_start = time.perf_counter()
            server.exchange(b"".join(chunks), set(), REQUEST_TIMEOUT_S)
            started_counts.append(wait_for_children(server.pid, "sleep", slow, 4.0))
            for _ in range(samples):
                if time.perf_counter() - t_start > 4.5:
                    break                                                       # the slow calls are ending
                out["ping_busy"].append(server.result("ping")[0] * 1000)
                out["discover_busy"].append(server.result("server/discover", discover)[0] * 1000)
        finally:
            server.close()                                                      # EOF cancels the slow calls
    return {**out, "slow_started": started_counts}


QUIET_S = 0.1                # the quiet spell before each call of the quiet-call scenario
PING_AFTER_S = 0.002         # ...and a ping written this long after such a call


def measure_quiet_call(tools: Path, tmp: Path, rounds: int) -> dict[str, Any]:
    """Calls as a host makes them, one now and then: a cgroup move after a quiet spell waits for an
    RCU grace period in the kernel (~10 ms on a cgroup2 mounted without favordynmods), which the
    call pays and, were the move on the loop, every request behind it."""
    say(f"quiet call: {rounds} calls, each after {QUIET_S * 1000:.0f} ms of quiet, and {rounds} pings written "
        f"{PING_AFTER_S * 1000:.0f} ms after such a call; floors: spawning echo after the same quiet, "
        "ping on the same server")
    server = Server(tools, tmp, "quiet-call")
    out: dict[str, list[float]] = {"call": [], "floor": [], "ping": [], "ping_idle": []}
    try:
        server.initialize()
        for _ in range(5):                                                   # warm-up
            check_call_result(server.call("tools/call", echo_params())[1])
        for _ in range(rounds):
            time.sleep(QUIET_S)
            seconds, msg = server.call("tools/call", echo_params())
            check_call_result(msg)
            out["call"].append(seconds * 1000)
            time.sleep(QUIET_S)
            out["floor"] += [v * 1000 for v in floor_spawn_echo(1)]
            out["ping_idle"].append(server.result("ping")[0] * 1000)
            time.sleep(QUIET_S)
            call_id, call = server.request_bytes("tools/call", echo_params())
            server.exchange(call, set(), REQUEST_TIMEOUT_S)                  # written; its answer is read below
            time.sleep(PING_AFTER_S)
            seconds, _ = server.result("ping")
            out["ping"].append(seconds * 1000)
            server.collect({call_id}, REQUEST_TIMEOUT_S)
            check_call_result(server.others.pop(call_id)[1])
    finally:
        server.close()
    return out


# --- hardening: clients and tools that misbehave ----------------------------------------------
QUADRATIC_PROGRESS = r"(\d+)/(\d+)"           # the progress form mcpwrap used to ship
PING_GAP_S = 0.01                              # between pings of a window, so they span the load
PING_TIMEOUT_S = 10.0                          # a ping unanswered this long: the loop is stuck
DIGITS_S = 4.0                                 # how long the progress tools print digit lines
# what each call of the stuck-reader scenario prints: at 10 KiB even an unbounded queue stays under
# 60 MiB after 500 calls (39 MiB measured), at 100 KiB it does not
BIG_OUTPUT = 100 * 1024
CHATTY_LINES = 3000                            # stderr lines per chatty tool (in 30 bursts over ~3 s)

HARDENING_TOML = """\
[server]
name = "bench-hardening"
version = "1.0.0"

[tools.big]
description = "Print {big} digits"
command = ["printf", "%0{big}d", "0"]

[tools.chatty]
description = "Print many stderr lines in 30 bursts"
shell = 'b=0; while [ $b -lt 30 ]; do i=0; while [ $i -lt {burst} ]; do echo "chatty: line $b.$i of a tool that logs a lot on stderr" >&2; i=$((i+1)); done; sleep 0.1; b=$((b+1)); done'
timeout = "60s"

[tools.stubborn]
description = "Ignore SIGTERM and sleep"
shell = "trap '' TERM; sleep 60"
env = {{ BENCH_TAG = "{tag}" }}
kill_grace = "1s"
timeout = "120s"
"""

DIGITS_TOOL = """
[tools.digits_{form}]
description = "Print 8 KiB lines of digits to stderr for a few seconds, then one progress line"
shell = 'echo "$D" >&2; echo "$D" >&2; echo "$D" >&2; i=0; while [ $i -lt {lines} ]; do echo "$D" >&2; sleep 0.05; i=$((i+1)); done; echo 1/1 >&2'
env = {{ D = "{digits}" }}
progress = {regex}
timeout = "60s"
"""


def hardening_toml(tag: str, shipped_progress: str) -> str:
    text = HARDENING_TOML.format(big=BIG_OUTPUT, burst=CHATTY_LINES // 30, tag=tag)
    for form, regex in (("quadratic", QUADRATIC_PROGRESS), ("shipped", shipped_progress)):
        text += DIGITS_TOOL.format(form=form, lines=int(DIGITS_S / 0.05), regex=json.dumps(regex), digits="0" * 8192)
    return text


def ping_window(server: Server, seconds: float, minimum: int, hard_s: float) -> tuple[list[float], bool]:
    """Pings one after another (PING_GAP_S apart) for `seconds` and until `minimum` were answered,
    never past hard_s from now. Returns the round trips (ms) and whether the server got stuck: a
    ping unanswered after PING_TIMEOUT_S (or at hard_s) ends the window, its wait the last sample."""
    start = time.perf_counter()
    out: list[float] = []
    while time.perf_counter() - start < seconds or len(out) < minimum:
        left = start + hard_s - time.perf_counter()
        if left <= 0:
            break
        t0 = time.perf_counter()
        try:
            seconds_taken, _ = server.call("ping", timeout=min(left, PING_TIMEOUT_S))
        except Stalled:
            out.append((time.perf_counter() - t0) * 1000)
            return out, True
        out.append(seconds_taken * 1000)
        time.sleep(PING_GAP_S)
    return out, False


def start_calls(server: Server, tool: str, n: int, progress: str | None = None) -> set[int]:
    """Write n calls of a tool at once (with a progress token each when progress names a prefix)."""
    ids, chunks = set(), []
    for i in range(n):
        params: dict[str, Any] = {"name": tool, "arguments": {}}
        if progress:
            params["_meta"] = {"progressToken": f"{progress}-{i}"}
        rid, data = server.request_bytes("tools/call", params)
        ids.add(rid)
        chunks.append(data)
    server.exchange(b"".join(chunks), set(), REQUEST_TIMEOUT_S)
    return ids


def answered(server: Server, ids: set[int], timeout: float) -> int:
    """How many of ids got a response within timeout (a server that is stuck answers fewer)."""
    try:
        server.collect(ids, timeout)
    except Stalled:
        pass
    return len(ids & server.others.keys())


def measure_stuck_reader(tools: Path, tmp: Path, calls: int) -> dict[str, Any]:
    say(f"stuck reader: {calls} calls printing {BIG_OUTPUT // 1024} KiB each while nobody reads the server's stdout; "
        "floor: the same server idle")
    server = Server(tools, tmp, "stuck-reader")
    try:
        server.initialize()
        server.result("ping")
        idle = proc_status(server.pid)
        requests = [server.request_bytes("tools/call", {"name": "big", "arguments": {}}) for _ in range(calls)]
        accepted = [0]                                  # requests written whole
        stop = threading.Event()

        def writer() -> None:                           # a thread: the server may stop reading stdin
            for _, data in requests:
                view = memoryview(data)
                while view:
                    if stop.is_set():
                        return
                    if select.select([], [server.wfd], [], 0.2)[1]:
                        try:
                            view = view[os.write(server.wfd, view):]
                        except BlockingIOError:
                            continue
                        except OSError:
                            return                      # the server closed its stdin
                accepted[0] += 1

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        try:
            # settled: for 2 s the writes, the number of tool processes and VmRSS (+-1 MiB) stay put
            deadline = time.perf_counter() + 20.0
            state: tuple[int, int] | None = None
            since = rss_ref = 0.0
            while time.perf_counter() < deadline and server.proc.poll() is None:
                now, rss = time.perf_counter(), proc_status(server.pid)["VmRSS"]
                current = (accepted[0], len(descendants(server.pid)))
                if current != state or abs(rss - rss_ref) > MiB:
                    state, since, rss_ref = current, now, rss
                elif now - since >= 2.0:
                    break
                time.sleep(0.1)
            if server.proc.poll() is not None:
                raise BenchError(f"the server exited (status {server.proc.returncode}) while its stdout "
                                 f"was not read; stderr:\n{server.stderr_tail()}")
            stuck = proc_status(server.pid)
            written_unread = accepted[0]
            # now read everything: the writer must get through, every call be answered
            deadline = time.perf_counter() + 20.0
            while thread.is_alive() and time.perf_counter() < deadline:
                server.read_some(0.1)
        finally:
            stop.set()
            thread.join(5)
        if accepted[0] < calls:
            raise BenchError(f"the server took only {accepted[0]}/{calls} requests once stdout was read")
        ids = {rid for rid, _ in requests}
        done = answered(server, ids, max(1.0, deadline - time.perf_counter()))
        ok = sum(1 for rid in ids & server.others.keys()
                 if isinstance(res := server.others[rid][1].get("result"), dict) and not res.get("isError"))
        ping_ms = server.call("ping")[0] * 1000
    finally:
        server.close(force=True)
    return {"hwm": [stuck["VmHWM"] / MiB], "rss": stuck["VmRSS"] / MiB, "floor": [idle["VmHWM"] / MiB],
            "written_unread": written_unread, "calls": calls, "answered": done, "succeeded": ok,
            "ping_after_ms": ping_ms}


def measure_progress(tools: Path, tmp: Path, shipped: str, pings: int) -> dict[str, Any]:
    out: dict[str, Any] = {"shipped_regex": shipped}
    for form, regex in (("quadratic", QUADRATIC_PROGRESS), ("shipped", shipped)):
        say(f"pathological progress: {pings}+ pings while 4 tools with progress = {regex!r} print 8 KiB "
            "lines of digits; floor: ping on the same server idle")
        server = Server(tools, tmp, f"progress-{form}")
        stuck = True
        try:
            server.initialize()
            for _ in range(10):                                                  # warm-up
                server.result("ping")
            idle, _ = ping_window(server, 0, 50, 30.0)
            ids = start_calls(server, f"digits_{form}", 4, progress=form)
            started = wait_for_children(server.pid, "sh", 4, 10.0)
            busy, stuck = ping_window(server, DIGITS_S, pings, DIGITS_S + 15.0)
            done = 0 if stuck else answered(server, ids, 10.0)
            out[form] = {"idle": idle, "busy": busy, "stuck": stuck, "started": started, "answered": done,
                         "progress_notifications": server.notified.get("notifications/progress", 0)}
        finally:
            server.close(force=stuck)
    return out


def measure_stderr_unread(tools: Path, tmp: Path, pings: int, chatty: int = 4) -> dict[str, Any]:
    say(f"stderr unread: --log-level debug, stderr a pipe nobody reads, {pings}+ pings while {chatty} tools "
        f"print {CHATTY_LINES} stderr lines each; floor: ping on the same server idle")
    server = Server(tools, tmp, "stderr-unread", extra=("--log-level", "debug"), stderr_pipe=True)
    stuck = True
    busy: list[float] = []
    started = done = 0
    ping_after: float | None = None
    try:
        server.initialize()
        idle, stuck = ping_window(server, 0, 50, 30.0)
        if not stuck:
            ids = start_calls(server, "chatty", chatty)
            started = wait_for_children(server.pid, "sh", chatty, 10.0)
            busy, stuck = ping_window(server, 3.0, pings, 20.0)
            done = 0 if stuck else answered(server, ids, 10.0)
            if not stuck and done == chatty:
                try:                    # every tool line was read (and logged or dropped): still there?
                    ping_after = server.call("ping", timeout=PING_TIMEOUT_S)[0] * 1000
                except Stalled:
                    stuck = True
    finally:
        server.close(force=stuck)
    # debug logs each message in and out and each tool stderr line
    caused = 2 * (server.next_id + 1) + chatty * CHATTY_LINES
    return {"idle": idle, "busy": busy, "stuck": stuck, "started": started, "answered": done,
            "log_lines": caused, "ping_after_ms": ping_after}


def tagged(tag: str) -> list[tuple[int, str]]:
    """(pid, command name) of the live processes whose environment carries BENCH_TAG=tag."""
    marker = f"\0BENCH_TAG={tag}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker in b"\0" + f.read():
                        with open(f"/proc/{entry}/comm") as c:
                            found.append((int(entry), c.read().strip()))
            except OSError:
                pass
    return found


def eof_to_exit(server: Server, timeout: float) -> float | None:
    """Close the server's stdin; seconds until it exited (None: not within timeout). Its stdout is
    read meanwhile, so answers to cancelled calls cannot hold it up."""
    pidfd = os.pidfd_open(server.pid)
    try:
        server.sel.register(pidfd, selectors.EVENT_READ)
        assert server.proc.stdin
        server.proc.stdin.close()
        t0 = time.perf_counter()
        while (left := t0 + timeout - time.perf_counter()) > 0:
            for key, _ in server.sel.select(left):
                if key.fd == pidfd:
                    return time.perf_counter() - t0
                try:
                    if not os.read(server.rfd, 1 << 20):
                        server.sel.unregister(server.rfd)            # stdout closed: the exit is near
                except BlockingIOError:
                    pass
        return None
    finally:
        server.sel.unregister(pidfd)
        os.close(pidfd)


def shutdown_round(tools: Path, tmp: Path, calls: int, tag: str) -> tuple[float | None, int, int]:
    """One server, `calls` TERM-ignoring calls, EOF: (seconds to exit or None, sleeps started, left)."""
    # a server with a ceiling on running calls is told to allow them all (older ones ignore this)
    server = Server(tools, tmp, "shutdown", env={"MCPWRAP_MAX_CALLS": str(calls)})
    try:
        server.initialize()
        start_calls(server, "stubborn", calls)
        deadline = time.perf_counter() + 30.0
        started, since = 0, time.perf_counter()
        while started < calls and time.perf_counter() < deadline and time.perf_counter() - since < 5.0:
            time.sleep(0.05)
            if (now := sum(name == "sleep" for _, name in tagged(tag))) != started:
                started, since = now, time.perf_counter()              # not stuck below a ceiling
        seconds = eof_to_exit(server, 20.0)
        left = len(tagged(tag))
    finally:
        server.close(force=True)
        kill_checked([(pid, proc_identity(pid)) for pid, _ in tagged(tag)])
    return seconds, started, left


def measure_shutdown(tools: Path, tmp: Path, calls: int, tag: str, rounds: int) -> dict[str, Any]:
    say(f"shutdown: {rounds} times EOF with {calls} calls running whose children ignore SIGTERM "
        "(kill_grace 1s); floor: EOF on the same kind of server idle")
    floor = []
    for _ in range(rounds):
        server = Server(tools, tmp, "shutdown-idle")
        try:
            server.initialize()
            server.result("ping")
            floor.append(eof_to_exit(server, EXIT_TIMEOUT_S))
        finally:
            server.close()
    if None in floor:
        raise BenchError(f"an idle server did not exit on EOF within {EXIT_TIMEOUT_S:g}s")
    times: list[float] = []
    started: list[int] = []
    left = 0
    for _ in range(rounds):
        seconds, running, leftover = shutdown_round(tools, tmp, calls, tag)
        if seconds is None:                     # a server that did not exit fails the figure
            times, started, left = [], [running], leftover
            break
        times.append(seconds * 1000)
        started.append(running)
        left += leftover
    return {"server": times, "floor": [v * 1000 for v in floor if v is not None],
            "started": started, "calls": calls, "left": left, "exited": bool(times)}

# --- report ----------------------------------------------------------------------------------
def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return str(value)
    if unit == "calls/s":
        return f"{value:,.0f}"
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def build_report(args: argparse.Namespace, data: dict[str, Any]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []

    def row(key: str, label: str, unit: str, server: list[float] | None, floor: list[float],
            floor_label: str, higher_is_better: bool = False, error: str | None = None,
            extra: dict[str, Any] | None = None) -> dict[str, Any]:
        f = summary(floor) if floor else None
        s = summary(server) if server else None
        r: dict[str, Any] = {"key": key, "label": label, "unit": unit, "floor_what": floor_label,
                             "median": s and s["median"], "p95": s and s["p95"], "n": s and s["n"],
                             "floor_median": f and f["median"], "floor_p95": f and f["p95"],
                             "ratio_median": None, "ratio_p95": None, "targets": []}
        if s and f:                      # server / floor: a time ratio > 1 is slower, a rate ratio < 1 is
            r["ratio_median"] = s["median"] / f["median"]
            r["ratio_p95"] = s["p95"] / f["p95"]
        if error:
            r["error"] = error
        if extra:
            r.update(extra)
        rows.append(r)
        return r

    def target(r: dict[str, Any], name: str, value: float | None, op: str, limit: float, unit: str,
               required: bool = False) -> None:
        """required: no value (the server died or hung) fails instead of being n/a."""
        ok = (False if required else None) if value is None else (value <= limit if op == "<=" else value >= limit)
        t = {"row": r["key"], "target": name, "value": value, "op": op, "limit": limit, "unit": unit, "pass": ok}
        r["targets"].append(t)
        checks.append(t)

    if (cold := data.get("cold")) is not None:
        floor_label = "python -c 'import trio'"
        for key, label in (("initialize", "cold start: spawn -> initialize"),
                           ("discover", "cold start: spawn -> server/discover")):
            r = row(f"cold_{key}", label, "ms", cold[key], cold["floor"], floor_label)
            target(r, "median <= 1.25 x floor", r["ratio_median"], "<=", 1.25, "x")
        row("cold_call", "cold start: spawn -> a tools/call result (trio's)", "ms", cold["call"], cold["floor"],
            floor_label)
        row("cold_initialize_1000_tools", "cold start, 1,000 tools: spawn -> initialize", "ms",
            cold["initialize_1000"], cold["floor"], floor_label)
    if (pc := data.get("per_call")) is not None:
        r = row("per_call", f"per-call latency, echo ({len(pc['server'])} sequential)", "ms", pc["server"], pc["floor"],
                "spawn of echo x from Python, output captured")
        target(r, "p50 <= 1.5 x floor (issue 16)", r["ratio_median"], "<=", 1.5, "x")
        target(r, "p50 <= 2.0 ms", r["median"], "<=", 2.0, "ms")
        target(r, "p95 <= 3.0 ms", r["p95"], "<=", 3.0, "ms")
    if (pl := data.get("pipelined")) is not None:
        n = pl["calls"]
        rates = [n / t for t in pl["server"]]
        floor_rates = [n / t for t in pl["floor"]]
        # a rate's bad tail is its low end: report p95 as the 5th percentile of the rate
        r = row("pipelined", f"pipelined throughput ({n} calls at once)", "calls/s", rates, floor_rates,
                f"{n} echo spawns, ThreadPool({os.cpu_count()})", higher_is_better=True,
                extra={"time_to_last_ms_median": statistics.median(pl["server"]) * 1000,
                       "time_to_last_ms_p95": pct(pl["server"], 95) * 1000})
        r["p95"] = pct(rates, 5)
        r["floor_p95"] = pct(floor_rates, 5)
        r["ratio_p95"] = r["p95"] / r["floor_p95"]
        target(r, "rate >= 0.6 x floor (issue 25)", r["ratio_median"], ">=", 0.6, "x")
    if (tl := data.get("tools_list")) is not None:
        row("tools_list_1000", f"tools/list, 1,000 tools ({tl['pages_hint']} pages)", "ms", tl["server"], tl["floor"],
            "ping on the same server")
    if (tk := data.get("tasks")) is not None:
        r = row("task_create", "task creation (tools/call + task)", "ms", tk.get("server"), tk["floor"],
                "write + fsync + rename + fsync(dir) of a small record, sampled where a creation is",
                error=tk.get("error"),
                extra={k: tk[k] for k in ("first_ms", "statuses", "create_to_terminal_ms_median", "wait_note")
                       if k in tk})
        target(r, "p50 <= 3 ms", r["median"], "<=", 3.0, "ms")
    if (rss := data.get("rss")) is not None:
        r = row("rss_idle", "peak RSS, idle", "MiB", rss["idle"], rss["floor"], "python + import trio (VmHWM)")
        target(r, "<= 35 MiB", r["p95"], "<=", 35.0, "MiB")
        r = row("rss_busy", f"peak RSS, {args.concurrent} concurrent calls", "MiB", rss["busy"], rss["floor"],
                "python + import trio (VmHWM)", extra={"rss_after_median": statistics.median(rss["busy_rss_after"])})
        target(r, "<= 60 MiB", r["p95"], "<=", 60.0, "MiB")
    if (ul := data.get("under_load")) is not None:
        for key, label in (("ping", "ping"), ("discover", "server/discover")):
            r = row(f"{key}_under_load", f"{label} while {args.slow} tools run", "ms", ul[f"{key}_busy"],
                    ul[f"{key}_idle"], f"{label} on the idle server",
                    extra={"slow_started": ul["slow_started"]})
            target(r, "p95 <= 5 ms", r["p95"], "<=", 5.0, "ms")
    if (qc := data.get("quiet_call")) is not None:
        row("quiet_call", f"per call, each after {QUIET_S * 1000:.0f} ms of quiet", "ms", qc["call"], qc["floor"],
            "spawning echo from Python after the same quiet")
        r = row("ping_quiet_call", f"ping written {PING_AFTER_S * 1000:.0f} ms after such a call", "ms", qc["ping"],
                qc["ping_idle"], "ping on the same server")
        target(r, "p95 <= 5 ms", r["p95"], "<=", 5.0, "ms")
    hard_floor = "ping on the same server idle"
    if (sr := data.get("stuck_reader")) is not None:
        note = sr.get("error") or (
            f"VmRSS {sr['rss']:.1f} MiB; {sr['written_unread']}/{sr['calls']} requests written before "
            f"stdout was read; then {sr['answered']} answered ({sr['succeeded']} succeeded), "
            f"ping {sr['ping_after_ms']:.2f} ms")
        r = row("stuck_reader_rss", f"peak RSS, {sr.get('calls', 500)} calls of {BIG_OUTPUT // 1024} KiB, stdout not read", "MiB",
                sr.get("hwm"), sr.get("floor", []), "the same server idle (VmHWM)", error=sr.get("error"),
                extra={"note": note, **{k: v for k, v in sr.items() if k not in ("hwm", "floor", "error")}})
        target(r, "<= 60 MiB", r["median"], "<=", 60.0, "MiB", required=True)
    if (pp := data.get("pathological_progress")) is not None:
        for form, regex in (("quadratic", QUADRATIC_PROGRESS), ("shipped", pp.get("shipped_regex"))):
            w = pp.get(form, {})
            note = pp.get("error") or (
                f"{len(w['busy'])} pings{', the server got STUCK' if w['stuck'] else ''}; "
                f"{w['started']}/4 tools started, {w['answered']}/4 answered, "
                f"{w['progress_notifications']} progress notifications")
            r = row(f"ping_progress_{form}", f"ping while 4 tools print 8 KiB digit lines, progress {regex}",
                    "ms", w.get("busy"), w.get("idle", []), hard_floor, error=pp.get("error"),
                    extra={"note": note, **{k: v for k, v in w.items() if k not in ("busy", "idle")}})
            target(r, "p95 <= 5 ms", r["p95"], "<=", 5.0, "ms", required=True)
    if (su := data.get("stderr_unread")) is not None:
        note = su.get("error") or (
            f"{len(su['busy'])} pings{', the server got STUCK' if su['stuck'] else ''}; {su['started']}/4 tools "
            f"started, {su['answered']}/4 answered; {su['log_lines']:,} log lines caused")
        r = row("ping_stderr_unread", "ping while tools print stderr lines, --log-level debug, stderr not read",
                "ms", su.get("busy"), su.get("idle", []), hard_floor, error=su.get("error"),
                extra={"note": note, **{k: v for k, v in su.items() if k not in ("busy", "idle", "error")}})
        target(r, "p95 <= 5 ms", r["p95"], "<=", 5.0, "ms", required=True)
        target(r, "then ping <= 100 ms (still answers)", su.get("ping_after_ms"), "<=", 100.0, "ms", required=True)
    if (sd := data.get("shutdown")) is not None:
        note = sd.get("error") or (
            f"TERM-ignoring children started per round (of {sd['calls']}): {sd['started']}; "
            + ("" if sd["exited"] else "the server did NOT exit within 20 s; ")
            + f"{sd['left']} tagged processes left at the exits")
        r = row("shutdown", f"EOF -> exit, {sd.get('calls', 200)} calls ignoring SIGTERM (kill_grace 1s)", "ms",
                sd.get("server"), sd.get("floor", []), "EOF -> exit of the same server idle", error=sd.get("error"),
                extra={"note": note, **{k: v for k, v in sd.items() if k not in ("server", "floor", "error")}})
        target(r, "<= grace + 0.5 s", r["median"], "<=", 1500.0, "ms", required=True)
        target(r, "no tool process left", sd.get("left"), "<=", 0, "processes", required=True)

    failed = [c for c in checks if c["pass"] is False]
    return {"bench": "mcpwrap", "loadavg_start": data.get("loadavg_start"), "loadavg_end": data.get("loadavg_end"), "mode": "quick" if args.quick else "full", "runs": args.runs,
            "python": sys.version.split()[0], "executable": sys.executable, "cpus": os.cpu_count(),
            "machine": platform.machine(), "kernel": platform.release(),
            "mcpwrap": data.get("version"), "rows": rows, "ok": not failed,
            "failed": [f"{c['row']}: {c['target']}" for c in failed]}


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def print_table(report: dict[str, Any]) -> None:
    head = ["measure", "unit", "median", "p95", "floor med", "floor p95", "ratio med", "ratio p95", "target", "result"]
    lines = []
    for r in report["rows"]:
        targets = r["targets"] or [None]
        for i, t in enumerate(targets):
            first = i == 0
            verdict = "-" if t is None else ("n/a" if t["pass"] is None else "PASS" if t["pass"] else "FAIL")
            if t is not None and t["value"] is not None:
                verdict += f" ({t['value']:.2f}x)" if t["unit"] == "x" else f" ({fmt(t['value'], t['unit'])})"
            lines.append([
                r["label"] if first else "",
                r["unit"] if first else "",
                (fmt(r["median"], r["unit"]) if first else ""),
                (fmt(r["p95"], r["unit"]) if first else ""),
                (fmt(r["floor_median"], r["unit"]) if first else ""),
                (fmt(r["floor_p95"], r["unit"]) if first else ""),
                (f"{r['ratio_median']:.2f}" if first and r["ratio_median"] is not None else "n/a" if first else ""),
                (f"{r['ratio_p95']:.2f}" if first and r["ratio_p95"] is not None else "n/a" if first else ""),
                t["target"] if t else "-",
                verdict])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    sep = "  "
    print(sep.join(h.ljust(w) for h, w in zip(head, widths)))
    print(sep.join("-" * w for w in widths))
    for line in lines:
        print(sep.join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())
    print()
    for r in report["rows"]:
        notes = []
        if r.get("error"):
            notes.append(f"n/a: {r['error']}")
        if r.get("first_ms") is not None:
            notes.append(f"first call {r['first_ms']:.1f} ms")
        if r.get("create_to_terminal_ms_median") is not None:
            notes.append(f"create -> terminal status (tasks/get every 10 ms) median "
                         f"{r['create_to_terminal_ms_median']:.0f} ms, statuses {r.get('statuses')}")
        if r.get("wait_note"):
            notes.append(f"could not wait for tasks to end ({r['wait_note']}); 0.3 s between creations")
        if r["key"] == "pipelined":
            notes.append(f"time to last response: median {r['time_to_last_ms_median']:.0f} ms, "
                         f"p95 {r['time_to_last_ms_p95']:.0f} ms (rate p95 = 5th percentile)")
        if r["key"] == "rss_busy":
            notes.append(f"VmRSS after the calls: {r['rss_after_median']:.1f} MiB")
        if r["key"] == "ping_under_load":
            notes.append(f"slow calls running per window: {r['slow_started']}")
        if r.get("note") and not r.get("error"):
            notes.append(r["note"])
        if notes:
            print(f"  {r['label']}: floor = {r['floor_what']}; " + "; ".join(notes))
        else:
            print(f"  {r['label']}: floor = {r['floor_what']}")
    print()
    print("result:", "all targets PASS" if report["ok"] else "FAIL: " + ", ".join(report["failed"]))


SCENARIOS = ("cold", "per-call", "pipelined", "tools-list", "tasks", "rss", "under-load", "quiet-call",
             "stuck-reader", "pathological-progress", "stderr-unread", "shutdown")
HARDENING = SCENARIOS[8:]
# prints [version, the progress regex of the starter tools file mcpwrap ships (or null)]
PROBE = """\
import importlib.resources, json, tomllib, mcpwrap, trio
starter = tomllib.loads(importlib.resources.files("mcpwrap.config").joinpath("starter.toml").read_text())
shipped = [t["progress"] for t in starter.get("tools", {}).values() if "progress" in t]
print(json.dumps([mcpwrap.__version__, shipped[0] if shipped else None]))
"""


def run_all(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                           timeout=SPAWN_TIMEOUT_S, cwd=WORKDIR, check=False)
    if probe.returncode != 0:
        raise BenchError(f"mcpwrap is not importable by {sys.executable} (install it into this "
                         f"interpreter's environment first): {probe.stderr.strip()}")
    version, shipped = json.loads(probe.stdout)
    tools, big_tools, hard_tools = tmp / "tools.toml", tmp / "tools-1000.toml", tmp / "hardening.toml"
    tools.write_text(TOOLS_TOML)
    generate_big_tools(big_tools, 1000)
    tag = uuid.uuid4().hex                              # marks the shutdown scenario's tool processes
    hard_tools.write_text(hardening_toml(tag, shipped or QUADRATIC_PROGRESS))
    data: dict[str, Any] = {"version": version, "loadavg_start": loadavg()}
    cpus = os.cpu_count() or 1
    if data["loadavg_start"] and data["loadavg_start"][0] > cpus / 2:
        say(f"warning: the machine is busy (load average {data['loadavg_start'][0]:.2f} on {cpus} "
            "cpus); figures will be noisy")
    pings = 200
    scenarios: dict[str, Callable[[], dict[str, Any]]] = {
        "cold": lambda: measure_cold_start(tools, big_tools, tmp, args.runs),
        "per-call": lambda: measure_per_call(tools, tmp, args.calls),
        "pipelined": lambda: measure_pipelined(tools, tmp, 1000, args.bursts),
        "tools-list": lambda: measure_tools_list(big_tools, tmp, args.runs, 1000),
        "tasks": lambda: measure_tasks(tools, tmp, max(args.runs, 20)),
        "rss": lambda: measure_rss(tools, tmp, args.rss_runs, args.concurrent),
        "under-load": lambda: measure_under_load(tools, tmp, args.windows,
                                                 50 if args.quick else max(100, args.runs * 4), args.slow),
        "quiet-call": lambda: measure_quiet_call(tools, tmp, 5 if args.quick else max(10, args.runs)),
        "stuck-reader": lambda: measure_stuck_reader(hard_tools, tmp, 500),
        "pathological-progress": lambda: measure_progress(hard_tools, tmp, shipped or QUADRATIC_PROGRESS, pings),
        "stderr-unread": lambda: measure_stderr_unread(hard_tools, tmp, pings),
        "shutdown": lambda: measure_shutdown(hard_tools, tmp, 200, tag, 1 if args.quick else 3)}
    assert list(scenarios) == list(SCENARIOS)
    for name in args.only:
        try:
            data[name.replace("-", "_")] = scenarios[name]()
        except BenchError as exc:
            if name not in HARDENING:
                raise
            # a server that dies or hangs under attack fails the figure; the other scenarios still run
            lines = [line for line in str(exc).splitlines() if line.strip()]
            data[name.replace("-", "_")] = {"error": " | ".join(lines[:1] + lines[-2:])}
            kill_all()
    data["loadavg_end"] = loadavg()
    return data


def main(argv: list[str] | None = None) -> int:
    global QUIET, WORKDIR
    parser = argparse.ArgumentParser(description="Benchmark `mcpwrap serve` against floors measured in the same run.")
    parser.add_argument("--quick", action="store_true", help="fewer runs and calls: a smoke check of ~45-60 s")
    parser.add_argument("--runs", type=int, default=None,
                        help="samples per repeated measurement (cold starts, listings, task creations, ping); "
                             "default 30, --quick 5")
    parser.add_argument("--json-only", action="store_true", help="print only the JSON line")
    parser.add_argument("--only", metavar="NAME[,NAME]", default=",".join(SCENARIOS),
                        help="run only these scenarios: " + ", ".join(SCENARIOS))
    args = parser.parse_args(argv)
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    if unknown := [name for name in args.only if name not in SCENARIOS]:
        parser.error(f"--only: unknown scenario {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    QUIET = args.json_only
    runs = args.runs or (5 if args.quick else 30)
    if runs < 1:
        parser.error("--runs must be at least 1")
    args.runs = runs
    args.calls = 200 if args.quick else 1000                 # sequential and pipelined calls
    args.bursts = 1 if args.quick else max(3, runs // 6)     # pipelined bursts (each ~1,000 spawns)
    args.rss_runs = 2 if args.quick else max(3, runs // 6)
    args.windows = 1 if args.quick else 3
    args.concurrent, args.slow = 100, 50
    started = time.perf_counter()

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt                         # clean up as for Ctrl-C

    signal.signal(signal.SIGTERM, on_term)
    try:
        with tempfile.TemporaryDirectory(prefix="mcpwrap-bench-") as tmp_name:
            WORKDIR = tmp_name
            try:
                data = run_all(args, Path(tmp_name))
            finally:
                kill_all()
                end_supervisors(tmp_name)
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 2
    report = build_report(args, data)
    report["seconds"] = round(time.perf_counter() - started, 1)
    if not args.json_only:
        print_table(report)
        print(f"({report['seconds']} s, {report['mode']} mode, {runs} runs, python {report['python']}, "
              f"{report['cpus']} cpus, load average {report['loadavg_start']} -> {report['loadavg_end']})")
    print(json.dumps(rounded(report), separators=(",", ":")))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
