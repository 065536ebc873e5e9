"""Benchmark the real `mcpwrap serve` against floors measured in the same run.

Run it with the interpreter mcpwrap is installed in; servers are spawned as
`sys.executable -m mcpwrap serve ...`:

    .venv/bin/python bench/bench.py            # full run (a few minutes)
    .venv/bin/python bench/bench.py --quick    # smoke check (~20-30 s)
    .venv/bin/python bench/bench.py --runs 40 --json-only

Every figure is a median / p95 over several samples and is printed next to a
floor measured in the same run (a ratio: lower is better for times, higher
for rates), with the target it must meet. The last line of output is one JSON
object. Exit status: 0 when every target passes, 1 when one fails, 2 when the
benchmark itself could not run. Only the standard library is used.
"""

from __future__ import annotations

import argparse
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
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from collections.abc import Callable

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
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0]) * 1024
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
    for proc in list(SPAWNED):
        reap(proc, timeout=5, force=True)


class Server:
    """One real `python -m mcpwrap serve` over pipes, driven from this thread without helper threads."""

    def __init__(self, tools: Path, tmp: Path, name: str) -> None:
        self.err_path = tmp / f"{name}.stderr"
        self.err = open(self.err_path, "wb")
        self.argv = [sys.executable, "-m", "mcpwrap", "serve", str(tools),
                     "--secret-file", str(tmp / "secret"), "--state-dir", str(tmp / "state")]
        self.t_spawn = time.perf_counter()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, env=server_env(), bufsize=0, cwd=WORKDIR)
        SPAWNED.append(self.proc)
        self.err.close()
        assert self.proc.stdin and self.proc.stdout
        self.wfd, self.rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self.wfd, False)
        os.set_blocking(self.rfd, False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.rfd, selectors.EVENT_READ)
        self.buf = bytearray()
        self.next_id = 0
        self.eof = False

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
                    raise BenchError(f"timed out after {timeout:g}s with {len(got)}/{len(want)} responses"
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
            if "method" not in msg and rid in want:
                got[rid] = (now, msg)

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

    def close(self) -> None:
        self.sel.close()
        reap(self.proc)


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
        params = init_params() if method == "initialize" else {"_meta": MODERN_META}
        rid, data = server.request_bytes(method, params)
        arrived, msg = server.exchange(data, {rid}, SPAWN_TIMEOUT_S)[rid]
        if "result" not in msg:
            raise BenchError(f"{method} failed: {msg.get('error')}")
        return arrived - server.t_spawn
    finally:
        server.close()


def measure_cold_start(tools: Path, big_tools: Path, tmp: Path, runs: int) -> dict[str, Any]:
    say(f"cold start: {runs} runs each of floor / initialize / server/discover / initialize with 1,000 tools")
    # warm-up: .pyc files, the page cache, and mcpwrap's per-state-dir cache of validated tools files
    floor_import_trio(); cold_start(tools, tmp, "initialize"); cold_start(big_tools, tmp, "initialize")
    samples: dict[str, list[float]] = {"floor": [], "initialize": [], "discover": [], "initialize_1000": []}
    kinds: dict[str, Callable[[], float]] = {
        "floor": floor_import_trio,
        "initialize": lambda: cold_start(tools, tmp, "initialize"),
        "discover": lambda: cold_start(tools, tmp, "server/discover"),
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
    """Temp file, write, fsync, rename, fsync the directory: the least a durable new record costs."""
    directory.mkdir(parents=True, exist_ok=True)
    record = json.dumps({"taskId": "x" * 32, "status": "working", "ttl": 60000,
                         "createdAt": "2026-01-01T00:00:00Z", "tool": "task_echo",
                         "arguments": {"msg": "x"}}).encode()
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        tmp_path, final = directory / f".rec-{i}.tmp", directory / f"rec-{i}.json"
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
    say(f"task creation: {runs} task-augmented calls, each after the previous task ended; "
        "floor: a durable small-file write")
    floor = floor_durable_write(tmp / "floor-records", runs)
    server = Server(tools, tmp, "tasks")
    try:
        server.initialize()
        lat: list[float] = []
        done: list[float] = []
        statuses: dict[str, int] = {}
        first_ms = None
        wait_note = None
        for i in range(runs + 1):
            seconds, msg = server.call("tools/call", {"name": "task_echo", "arguments": {"msg": "x"},
                                                      "task": {"ttl": 60000}})
            result = msg.get("result")
            task = result.get("task") if isinstance(result, dict) else None
            if not isinstance(task, dict) or not isinstance(task.get("taskId"), str):
                why = msg.get("error") or result
                return {"error": f"no task was created: {json.dumps(why)[:300]}", "floor": floor}
            if i == 0:
                first_ms = seconds * 1000                                  # includes lazy imports
            else:
                lat.append(seconds * 1000)
            # let the task end before the next creation, so each creation is measured on a quiet server
            waited, status = wait_task(server, task["taskId"], 15.0) if wait_note is None else (None, None)
            if waited is None:
                wait_note = wait_note or status
                time.sleep(0.3)
            else:
                statuses[status] = statuses.get(status, 0) + 1
                if i:
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


# --- report ----------------------------------------------------------------------------------
def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
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

    def target(r: dict[str, Any], name: str, value: float | None, op: str, limit: float, unit: str) -> None:
        ok = None if value is None else (value <= limit if op == "<=" else value >= limit)
        t = {"row": r["key"], "target": name, "value": value, "op": op, "limit": limit, "unit": unit, "pass": ok}
        r["targets"].append(t)
        checks.append(t)

    cold = data["cold"]
    floor_label = "python -c 'import trio'"
    for key, label in (("initialize", "cold start: spawn -> initialize"),
                       ("discover", "cold start: spawn -> server/discover")):
        r = row(f"cold_{key}", label, "ms", cold[key], cold["floor"], floor_label)
        target(r, "median <= 1.25 x floor", r["ratio_median"], "<=", 1.25, "x")
    row("cold_initialize_1000_tools", "cold start, 1,000 tools: spawn -> initialize", "ms",
        cold["initialize_1000"], cold["floor"], floor_label)

    pc = data["per_call"]
    r = row("per_call", f"per-call latency, echo ({len(pc['server'])} sequential)", "ms", pc["server"], pc["floor"],
            "spawn of echo x from Python, output captured")
    target(r, "p50 <= 1.8 x floor", r["ratio_median"], "<=", 1.8, "x")
    target(r, "p50 <= 2.0 ms", r["median"], "<=", 2.0, "ms")
    target(r, "p95 <= 3.0 ms", r["p95"], "<=", 3.0, "ms")

    pl = data["pipelined"]
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
    target(r, "rate >= 50% of floor", r["ratio_median"], ">=", 0.5, "x")

    tl = data["tools_list"]
    row("tools_list_1000", f"tools/list, 1,000 tools ({tl['pages_hint']} pages)", "ms", tl["server"], tl["floor"],
        "ping on the same server")

    tk = data["tasks"]
    row("task_create", "task creation (tools/call + task)", "ms", tk.get("server"), tk["floor"],
        "write + fsync + rename + fsync(dir) of a small record", error=tk.get("error"),
        extra={k: tk[k] for k in ("first_ms", "statuses", "create_to_terminal_ms_median", "wait_note")
               if k in tk})

    rss = data["rss"]
    r = row("rss_idle", "peak RSS, idle", "MiB", rss["idle"], rss["floor"], "python + import trio (VmHWM)")
    target(r, "<= 35 MiB", r["p95"], "<=", 35.0, "MiB")
    r = row("rss_busy", f"peak RSS, {args.concurrent} concurrent calls", "MiB", rss["busy"], rss["floor"],
            "python + import trio (VmHWM)", extra={"rss_after_median": statistics.median(rss["busy_rss_after"])})
    target(r, "<= 60 MiB", r["p95"], "<=", 60.0, "MiB")

    ul = data["under_load"]
    for key, label in (("ping", "ping"), ("discover", "server/discover")):
        r = row(f"{key}_under_load", f"{label} while {args.slow} tools run", "ms", ul[f"{key}_busy"],
                ul[f"{key}_idle"], f"{label} on the idle server",
                extra={"slow_started": ul["slow_started"]})
        target(r, "p95 <= 5 ms", r["p95"], "<=", 5.0, "ms")

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
            shown = {"x": lambda v: f"{v:.2f}x"}.get(t["unit"], lambda v: fmt(v, t["unit"])) if t else None
            verdict = "-" if t is None else ("n/a" if t["pass"] is None else "PASS" if t["pass"] else "FAIL")
            if t is not None and t["value"] is not None:
                verdict += f" ({shown(t['value'])})"
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
        if notes:
            print(f"  {r['label']}: floor = {r['floor_what']}; " + "; ".join(notes))
        else:
            print(f"  {r['label']}: floor = {r['floor_what']}")
    print()
    print("result:", "all targets PASS" if report["ok"] else "FAIL: " + ", ".join(report["failed"]))


def run_all(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    probe = subprocess.run([sys.executable, "-c", "import mcpwrap, trio; print(mcpwrap.__version__)"],
                           capture_output=True, text=True, timeout=SPAWN_TIMEOUT_S, cwd=WORKDIR)
    if probe.returncode != 0:
        raise BenchError(f"mcpwrap is not importable by {sys.executable} (install it into this "
                         f"interpreter's environment first): {probe.stderr.strip()}")
    tools, big_tools = tmp / "tools.toml", tmp / "tools-1000.toml"
    tools.write_text(TOOLS_TOML)
    generate_big_tools(big_tools, 1000)
    data: dict[str, Any] = {"version": probe.stdout.strip(), "loadavg_start": loadavg()}
    cpus = os.cpu_count() or 1
    if data["loadavg_start"] and data["loadavg_start"][0] > cpus / 2:
        say(f"warning: the machine is busy (load average {data['loadavg_start'][0]:.2f} on {cpus} "
            "cpus); figures will be noisy")
    data["cold"] = measure_cold_start(tools, big_tools, tmp, args.runs)
    data["per_call"] = measure_per_call(tools, tmp, args.calls)
    data["pipelined"] = measure_pipelined(tools, tmp, 1000, args.bursts)
    data["tools_list"] = measure_tools_list(big_tools, tmp, args.runs, 1000)
    data["tasks"] = measure_tasks(tools, tmp, max(args.runs, 20))
    data["rss"] = measure_rss(tools, tmp, args.rss_runs, args.concurrent)
    data["under_load"] = measure_under_load(tools, tmp, args.windows,
                                            50 if args.quick else max(100, args.runs * 4), args.slow)
    data["loadavg_end"] = loadavg()
    return data


def main(argv: list[str] | None = None) -> int:
    global QUIET, WORKDIR
    parser = argparse.ArgumentParser(description="Benchmark `mcpwrap serve` against floors measured in the same run.")
    parser.add_argument("--quick", action="store_true", help="fewer runs and calls: a smoke check of ~20-30 s")
    parser.add_argument("--runs", type=int, default=None,
                        help="samples per repeated measurement (cold starts, listings, task creations, ping); "
                             "default 30, --quick 5")
    parser.add_argument("--json-only", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
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
