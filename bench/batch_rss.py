"""RSS of `mcpwrap serve` while one batch of 80 calls with large answers is served, stdio and HTTP.

Each call prints ~1 MB (`head -c 1000000 /dev/zero | tr '\\0' x`); the batch is one 2025-03-26
request line (stdio) or POST (HTTP, in a session). Measured against the same server idle (after
`initialize` and one small call): the server's peak RSS (VmHWM from /proc/PID/status) and the peak
of VmRSS summed over the server and every process it forked (sampled every 5 ms; the tools'
processes included). Target: the server's peak <= 60 MiB over idle. Standard
library only; prints a table, then one JSON line; exit status 1 when a target fails.

    .venv/bin/python bench/batch_rss.py [--max-calls 16] [--calls 80]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

TOOLS = """
[tools.big]
description = "print about 1 MB"
shell = "head -c 1000000 /dev/zero | tr '\\\\0' x"
[tools.small]
command = ["echo", "hi"]
"""
INIT = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
TARGET_KIB = 60 * 1024


def status_kib(pid: int, field: str) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(rf"^{field}:\s+(\d+)", text, re.M)
    return int(found.group(1)) if found else 0


def tree(pid: int) -> list[int]:
    """The server and the processes it forked that are still mcpwrap, from
    /proc/*/stat; the tools' own processes are left out."""
    children: dict[int, list[int]] = {}
    comm = Path(f"/proc/{pid}/comm").read_text().strip()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if stat[stat.index("(") + 1:stat.rindex(")")] == comm:
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


class Sampler:
    """The peak of VmRSS summed over the server's process tree, sampled on a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.running = pid, 0, True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            self.peak = max(self.peak, sum(status_kib(p, "VmRSS") for p in tree(self.pid)))
            time.sleep(0.005)

    def stop(self) -> int:
        self.running = False
        self.thread.join()
        return self.peak


def batch(calls: int) -> list[dict[str, Any]]:
    return [{"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "big", "arguments": {}}}
            for n in range(calls)]


def tally(answers: list[dict[str, Any]]) -> str:
    kept = sum("result" in a for a in answers)
    return f"{len(answers)} answered: {kept} results, {len(answers) - kept} refused past the batch bound"


def serve(tmp: Path, max_calls: int, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "mcpwrap", "serve", str(tmp / "tools.toml"), "--no-watch",
                             "--max-calls", str(max_calls), "--secret-file", str(tmp / "secret"),
                             "--state-dir", str(tmp / "state"), *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def measure(pid: int, idle_tree: int, run: Any) -> dict[str, Any]:
    idle = status_kib(pid, "VmHWM")
    sampler = Sampler(pid)
    note = run()
    peak_tree = sampler.stop()
    return {"idle_kib": idle, "over_idle_kib": status_kib(pid, "VmHWM") - idle,
            "tree_over_idle_kib": peak_tree - idle_tree, "answers": note}


def over_stdio(tmp: Path, max_calls: int, calls: int) -> dict[str, Any]:
    proc = serve(tmp, max_calls)
    assert proc.stdin and proc.stdout
    threading.Thread(target=proc.stderr.read if proc.stderr else None, daemon=True).start()

    def ask(message: Any) -> Any:
        assert proc.stdin and proc.stdout
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline()) if isinstance(message, list) or "id" in message else None

    try:
        ask({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": INIT})
        ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        ask({"jsonrpc": "2.0", "id": "s", "method": "tools/call", "params": {"name": "small", "arguments": {}}})
        idle_tree = sum(status_kib(p, "VmRSS") for p in tree(proc.pid))
        return measure(proc.pid, idle_tree, lambda: tally(ask(batch(calls))))
    finally:
        proc.stdin.close()
        proc.wait(60)


def over_http(tmp: Path, max_calls: int, calls: int) -> dict[str, Any]:
    proc = serve(tmp, max_calls, "--http", "127.0.0.1:0")
    assert proc.stderr
    while not (found := re.search(r"http://(\S+?):(\d+)/mcp", proc.stderr.readline().decode())):
        if proc.poll() is not None:
            raise SystemExit("the HTTP server did not start")
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}

    def post(message: Any) -> Any:
        conn = http.client.HTTPConnection(found.group(1), int(found.group(2)), timeout=300)
        conn.request("POST", "/mcp", json.dumps(message).encode(), headers)
        response = conn.getresponse()
        body = response.read()
        headers.setdefault("mcp-session-id", response.getheader("mcp-session-id") or "")
        conn.close()
        if response.getheader("content-type") == "text/event-stream":
            body = [line[5:] for line in body.splitlines() if line.startswith(b"data:")][-1]
        return json.loads(body) if body else None

    try:
        post({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": INIT})
        post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        post({"jsonrpc": "2.0", "id": "s", "method": "tools/call", "params": {"name": "small", "arguments": {}}})
        idle_tree = sum(status_kib(p, "VmRSS") for p in tree(proc.pid))
        return measure(proc.pid, idle_tree, lambda: tally(post(batch(calls))))
    finally:
        proc.terminate()
        proc.wait(60)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-calls", type=int, default=16)
    parser.add_argument("--calls", type=int, default=80)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "tools.toml").write_text(TOOLS)
        figures = {"stdio": over_stdio(tmp, args.max_calls, args.calls),
                   "http": over_http(tmp, args.max_calls, args.calls)}
    failed = False
    for way, row in figures.items():
        verdict = "PASS" if row["over_idle_kib"] <= TARGET_KIB else "FAIL"
        failed |= verdict == "FAIL"
        print(f"{way:<6} idle {row['idle_kib'] / 1024:6.1f} MiB  server peak +{row['over_idle_kib'] / 1024:5.1f} MiB"
              f"  tree peak +{row['tree_over_idle_kib'] / 1024:5.1f} MiB  (<= 60 MiB: {verdict})  {row['answers']}")
    print(json.dumps({"max_calls": args.max_calls, "calls": args.calls, **figures}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
