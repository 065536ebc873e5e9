"""How task operations grow with the store: 1 / 1,000 / 10,000 tasks (issue 16 items 1 and 7).

    .venv/bin/python bench/scale_tasks.py                  # sizes 1,1000,10000; 10 samples each
    .venv/bin/python bench/scale_tasks.py --sizes 1,1000 --runs 5 --json

For each size a fresh store is filled directly through `tasks.Store` (create, then finish:
the records `mcpwrap serve` writes, with fsync skipped while filling, which only the setup
needs), then a real `mcpwrap serve` (2025-11-25 session, over pipes) is measured:

- tasks/list, all pages: one client walking every cursor to the end (500 tasks a page),
  and the last page of that walk alone (at 1,000 and 10,000 tasks: a page behind a cursor);
- tasks/get of a stored task;
- creation: `tools/call` with `task` -> CreateTaskResult, each sample right after the previous
  task's terminal status was read (as bench/bench.py's `tasks` row; target p50 <= 3 ms);
- creation when the store's collection is due (its `.gc` marker made old before each call);
- created -> started: the tool runs `date +%s%N`; the figure is that stamp minus the moment
  the creating response was read (negative: the command started before the answer arrived);
  shown apart for the first task, created right after `initialize` (one sample per size).

Each row shows the median per size and the growth (largest size / smallest); listing
every page is linear by nature, so its flat rows are per task listed and the last page. The
floor row is the least a durable record costs here: temp file, write, fsync, rename,
fsync(dir) (bench.py's `floor_durable_write`), sampled at the same point as a creation, in
alternate cycles (a floor write then an untimed creation): both meet the tail of the task
that just ended. (Sampled just before each creation instead, the floor absorbed that tail and
the creation did not, which is why this file once showed 2-3 ms where bench.py showed 12.)
Standard library plus mcpwrap only; everything lives in a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mcpwrap.tasks import store as tasks

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench as B  # noqa: E402

TOOLS = """
[tools.stamp]
shell = 'date +%s%N > "$MCP_ARG_OUT"'
task = "optional"
args.out = { type = "string" }
"""
TIMEOUT_S = 120.0


class Client:
    """One `mcpwrap serve` over pipes, one request at a time."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpwrap", "serve", str(root / "tools.toml"), "--state-dir", str(root / "state"),
             "--secret-file", str(root / "secret"), "--no-watch"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(root / "serve.stderr", "wb"), cwd=root,
            env=B.server_env())                   # bytecode cached, as an installed package has it
        self.ids = iter(range(1, 1 << 30))
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "scale_tasks", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdout is not None
        request_id = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server exited during {method}")
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message["result"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(TIMEOUT_S)


@contextlib.contextmanager
def no_fsync() -> Iterator[None]:
    """Filling a store for the benchmark need not survive a crash."""
    saved = os.fsync, os.fdatasync
    os.fsync = os.fdatasync = lambda fd: None
    try:
        yield
    finally:
        os.fsync, os.fdatasync = saved


def fill(root: Path, count: int) -> list[str]:
    store = tasks.Store.for_tools_file(root / "state", root / "tools.toml")
    done = {"content": [{"type": "text", "text": "ok\n"}], "isError": False, "exitCode": 0}
    ids = []
    with no_fsync():
        for _ in range(count):
            record = store.create(tool="stamp", arguments={"out": "/dev/null"}, ttl_ms=3_600_000, poll_ms=100,
                                  tools_file=root / "tools.toml", digest="0" * 64, snapshot=None, key=b"k" * 32)
            store.finish(record.task_id, result=done)
            ids.append(record.task_id)
    return ids


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = action()
    return (time.perf_counter() - start) * 1000, value


def list_all(client: Client) -> list[float]:
    """ms of each page, walking every cursor to the end."""
    pages: list[float] = []
    cursor = None
    while True:
        elapsed, page = timed(lambda: client.request("tasks/list", {"cursor": cursor} if cursor else {}))
        pages.append(elapsed)
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages


def create(client: Client, root: Path, gc_due: bool) -> tuple[float, float]:
    """(creation ms, created -> started ms) of one task, waited for until it is terminal."""
    out = root / f"stamp-{random.getrandbits(64):x}"
    marker = tasks.Store.for_tools_file(root / "state", root / "tools.toml").root / ".gc"
    if gc_due and marker.exists():
        os.utime(marker, (0, 0))
    elapsed, result = timed(lambda: client.request("tools/call", {"name": "stamp", "arguments": {"out": str(out)},
                                                                  "task": {"ttl": 600_000}}))
    answered = time.time_ns()
    deadline = time.monotonic() + TIMEOUT_S
    while not (text := out.read_text().strip() if out.exists() else ""):
        if time.monotonic() > deadline:
            raise RuntimeError("the task's command never ran")
        time.sleep(0.001)
    task_id = result["task"]["taskId"]
    while client.request("tasks/get", {"taskId": task_id})["status"] == "working":
        time.sleep(0.005)
    return elapsed, (int(text) - answered) / 1e6


def measure(size: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="scale-tasks-") as tmp:
        root = Path(tmp)
        (root / "tools.toml").write_text(TOOLS)
        ids = fill(root, size)
        client = Client(root)
        try:
            figures: dict[str, Any] = {"first": [create(client, root, False)[1]]}   # and the warm-up
            B.floor_durable_write(root / "floor", 1)
            walks = [list_all(client) for _ in range(runs)]
            figures["list"] = [sum(pages) for pages in walks]
            figures["list_last"] = [pages[-1] for pages in walks]
            figures["pages"] = len(walks[0])
            figures["get"] = [timed(lambda: client.request("tasks/get", {"taskId": random.choice(ids)}))[0]
                              for _ in range(runs * 5)]
            figures["floor"] = []
            normal = []
            for cycle in range(2 * runs):                     # alternate: a floor write or a timed creation
                if cycle % 2 == 0:
                    figures["floor"] += B.floor_durable_write(root / "floor", 1)
                sample = create(client, root, False)
                if cycle % 2:
                    normal.append(sample)
            figures["create"] = [ms for ms, _ in normal]
            figures["started"] = [late for _, late in normal]
            figures["create_gc"] = [create(client, root, True)[0] for _ in range(runs)]
        finally:
            client.close()
        return figures


ROWS = [("list", "tasks/list, all pages (ms)"), ("list_task", "tasks/list, per task listed (us)"),
        ("list_last", "tasks/list, last page (ms)"), ("get", "tasks/get (ms)"),
        ("create", "creation, normal (ms)"), ("create_gc", "creation, GC due (ms)"),
        ("started", "created -> command started (ms)"), ("first", "  the same, first task after start"),
        ("floor", "floor: durable record (ms)")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,1000,10000", help="store sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=10, help="samples per figure (tasks/get: 5x)")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every sample")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {}
    for size in sizes:
        sys.stderr.write(f"scale_tasks: {size} tasks...\n")
        results[size] = measure(size, args.runs)
    for size in sizes:
        figures = results[size]
        figures["list_task"] = [1000 * ms / (size + 1) for ms in figures["list"]]   # + the warm-up task
    print(f"{'median':34}" + "".join(f"{f'{s:,} tasks':>14}" for s in sizes) + f"{'growth':>12}")
    for key, label in ROWS:
        medians = [statistics.median(results[s][key]) for s in sizes]
        growth = medians[-1] / medians[0] if medians[0] > 0 else float("nan")
        print(f"{label:34}" + "".join(f"{m:14.2f}" for m in medians) + f"{growth:11.2f}x")
    print(f"{'pages walked':34}" + "".join(f"{results[s]['pages']:14d}" for s in sizes))
    if args.runs >= 2:
        print("creation p95 (ms): " + ", ".join(
            f"{s:,} tasks {statistics.quantiles(results[s]['create'], n=20)[-1]:.2f}" for s in sizes))
    if args.json:
        print(json.dumps({str(s): results[s] for s in sizes}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
