"""Flat at scale: the rows of issue 16 at 1 / 1,000 / 10,000 tools and 1 / 100 / 500 / 2,000 concurrent calls.

    .venv/bin/python bench/scale.py                    # about 5-8 minutes on 2 cores
    .venv/bin/python bench/scale.py --runs 3 --sizes 1,1000 --calls 1,100 --no-peer
    .venv/bin/python bench/scale.py --tasks            # also bench/scale_tasks.py's rows

Each row shows the median per size and its growth (largest size / smallest), and where the issue
sets a bound, the bound and PASS/FAIL. Figures and floors are taken in the same run:
- cold start, tools-file cache cold (a fresh state dir per spawn): spawn -> `initialize` response;
  bound: 2 x the 1-tool figure + the file's parse time (`tomllib.loads` here, median of 3);
- hot reload: the file is rewritten (one more comment line) -> `notifications/tools/list_changed`;
  `ping`s are sent one after another meanwhile, and those sent once the watcher must have seen the
  edit (0.5 s) are counted (all of them where the reload ended sooner); bound: their p95 <= 5 ms;
- calling the last of N tools, and `tools/list` all pages (per tool listed);
- N concurrent `echo` calls written at once: how many succeed, and the time per call;
- per call p50 against a raw spawn of `echo x` (bound 1.5 x), pipelined 1,000 calls against a
  thread-pool spawn floor (bound 0.7 x), both from bench.py;
- cold start, spawn -> first response (`initialize`), against a node stdio MCP server started the
  way a client config does (`npx -y mcp-server-commands`, when npx can fetch it) and directly
  (`node` on the entry npx installed: npx's own start-up left out), and `python -c "import trio"`,
  interleaved in a shuffled order; bound: 0.6 x the node peer, each way.
Standard library plus bench.py; everything lives in a temporary directory removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench as B  # noqa: E402

NODE_PEER = ["npx", "-y", "mcp-server-commands"]
NODE_PEER_ENTRY = NODE_PEER[:2] + ["-p", NODE_PEER[2], "-c", f"command -v {NODE_PEER[2]}"]   # prints its bin link
WATCH_INTERVAL_S = 0.5         # mcpwrap.serve.driver's: the reload starts within this long of an edit


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def first_response(argv: list[str], message: dict[str, Any], timeout: float = B.SPAWN_TIMEOUT_S) -> float:
    """Spawn argv, write one request, return seconds from spawn to its response."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=B.server_env(), cwd=B.WORKDIR, bufsize=0)
    B.SPAWNED.append(proc)
    assert proc.stdin and proc.stdout
    try:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf = b""
        while b"\n" not in buf:
            if not sel.select(max(0.0, t0 + timeout - time.perf_counter())):
                raise B.BenchError(f"no first response from {argv[:3]} within {timeout:g}s")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                raise B.BenchError(f"{argv[:3]} exited before answering")
            buf += chunk
        seconds = time.perf_counter() - t0
        if "result" not in json.loads(buf.split(b"\n", 1)[0]):
            raise B.BenchError(f"{argv[:3]} answered with an error: {buf[:300]!r}")
        return seconds
    finally:
        B.reap(proc, timeout=5, force=True)


def init_message() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": B.init_params()}


def serve_argv(tools: Path, state: Path, tmp: Path) -> list[str]:
    return [sys.executable, "-m", "mcpwrap", "serve", str(tools), "--secret-file", str(tmp / "secret"),
            "--state-dir", str(state), "--no-watch"]


def measure_cold(files: dict[int, Path], tmp: Path, runs: int) -> dict[str, Any]:
    B.say(f"cold start, cache cold: {runs} runs per size")
    out: dict[str, Any] = {"cold": {n: [] for n in files}, "parse": {}}
    for n, path in files.items():
        text = path.read_text()
        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            tomllib.loads(text)
            samples.append(time.perf_counter() - t0)
        out["parse"][n] = median(samples) * 1000
        first_response(serve_argv(path, tmp / "warm", tmp), init_message())    # .pyc files, page cache
    order = list(files)
    for run in range(runs):
        random.Random(run).shuffle(order)
        for n in order:
            state = tmp / f"cold-{n}-{run}"
            out["cold"][n].append(first_response(serve_argv(files[n], state, tmp), init_message()) * 1000)
            shutil.rmtree(state, ignore_errors=True)
    return out


def measure_peer(tools: Path, tmp: Path, runs: int, peer: bool) -> dict[str, list[float]]:
    kinds: dict[str, Callable[[], float]] = {
        "mcpwrap": lambda: first_response(serve_argv(tools, tmp / "state", tmp), init_message()),
        "import trio": lambda: B.floor_import_trio()}
    if peer:
        try:
            first_response(NODE_PEER, init_message(), 180.0)      # npx fetches it once
            kinds["node peer"] = lambda: first_response(NODE_PEER, init_message())
            found = subprocess.run(NODE_PEER_ENTRY, capture_output=True, text=True, timeout=180, env=B.server_env(),
                                   cwd=B.WORKDIR, check=True).stdout.strip()
            direct = ["node", os.path.realpath(found)]
            kinds["node peer, direct"] = lambda: first_response(direct, init_message())
        except (B.BenchError, OSError, subprocess.SubprocessError) as exc:
            B.say(f"node peer unavailable: {exc}")
    B.say(f"cold start against {', '.join(kinds)}: {runs} runs each, shuffled")
    for kind in kinds.values():
        kind()
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    order = list(kinds)
    for run in range(runs):
        random.Random(run).shuffle(order)
        for kind in order:
            samples[kind].append(kinds[kind]() * 1000)
    return samples


def measure_server(files: dict[int, Path], tmp: Path, runs: int) -> dict[str, dict[int, Any]]:
    """Per size: calling the first and the last tool, tools/list all pages, and a hot reload under pings."""
    out: dict[str, dict[int, Any]] = {k: {} for k in ("first", "last", "list", "reload", "reload_ping")}
    for n, source in files.items():
        B.say(f"{n:,} tools: calls, tools/list, {runs} reloads")
        path = tmp / f"live-{n}.toml"
        shutil.copy(source, path)
        server = B.Server(path, tmp, f"live-{n}")
        try:
            server.initialize()
            for key, name in (("first", "tool_0000"), ("last", f"tool_{n - 1:04d}")):
                call = {"name": name, "arguments": {"text": "x"}}
                server.call("tools/call", call)
                out[key][n] = [server.result("tools/call", call)[0] * 1000 for _ in range(runs * 5)]
            out["list"][n] = [B.list_all(server)[0] * 1000 / n for _ in range(runs)]
            out["reload"][n], out["reload_ping"][n] = [], []
            for run in range(runs):
                seen = server.notified.get("notifications/tools/list_changed", 0)
                with path.open("a") as f:
                    f.write(f"# edit {run}\n")
                t0 = time.perf_counter()
                pings = []
                while server.notified.get("notifications/tools/list_changed", 0) == seen:
                    sent = time.perf_counter() - t0
                    if sent > 120:
                        raise B.BenchError(f"no list_changed within 120 s at {n} tools")
                    pings.append((sent, server.result("ping")[0] * 1000))
                out["reload"][n].append((time.perf_counter() - t0) * 1000)
                # the watcher looks every WATCH_INTERVAL_S: pings before that may precede the reload
                late = [ms for sent, ms in pings if sent >= WATCH_INTERVAL_S]
                out["reload_ping"][n] += late or [ms for _, ms in pings]
        finally:
            server.close()
    return out


def measure_concurrent(tools: Path, tmp: Path, counts: list[int]) -> dict[int, dict[str, float]]:
    out = {}
    server = B.Server(tools, tmp, "concurrent")
    try:
        server.initialize()
        for count in counts:
            B.say(f"{count:,} concurrent echo calls")
            ids, chunks = [], []
            for _ in range(count):
                rid, data = server.request_bytes("tools/call", B.echo_params())
                ids.append(rid)
                chunks.append(data)
            t0 = time.perf_counter()
            got = server.exchange(b"".join(chunks), set(ids), B.BURST_TIMEOUT_S * 4)
            last = max(arrived for arrived, _ in got.values()) - t0
            failed = sum(1 for _, msg in got.values() if not isinstance(msg.get("result"), dict)
                         or msg["result"].get("isError"))
            out[count] = {"ok": count - failed, "failed": failed, "per_call_ms": last * 1000 / count}
    finally:
        server.close()
    return out


def row(label: str, sizes: list[int], values: list[float], bound: str = "", ok: bool | None = None) -> None:
    growth = values[-1] / values[0] if values[0] else float("nan")
    cells = "".join(f"{v:12.2f}" for v in values)
    verdict = "" if ok is None else ("PASS" if ok else "FAIL")
    print(f"{label:44}{cells}{growth:9.2f}x  {bound} {verdict}".rstrip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,1000,10000", help="tools per file, comma-separated")
    parser.add_argument("--calls", default="1,100,500,2000", help="concurrent calls, comma-separated")
    parser.add_argument("--runs", type=int, default=5, help="samples per figure")
    parser.add_argument("--no-peer", action="store_true", help="skip the node peer (npx)")
    parser.add_argument("--tasks", action="store_true", help="also run bench/scale_tasks.py")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    counts = [int(c) for c in args.calls.split(",")]
    with tempfile.TemporaryDirectory(prefix="mcpwrap-scale-") as name:
        tmp = Path(name)
        B.WORKDIR = name
        tools = tmp / "tools.toml"
        tools.write_text(B.TOOLS_TOML)
        files = {}
        for n in sizes:
            files[n] = tmp / f"tools-{n}.toml"
            B.generate_big_tools(files[n], n)
        try:
            cold = measure_cold(files, tmp, args.runs)
            served = measure_server(files, tmp, args.runs)
            concurrent = measure_concurrent(tools, tmp, counts)
            per_call = B.measure_per_call(tools, tmp, 200 * args.runs)
            pipelined = B.measure_pipelined(tools, tmp, 1000, max(5, args.runs // 2))   # a median of 5 bursts at least
            peer = measure_peer(tools, tmp, args.runs * 2, not args.no_peer)
        finally:
            B.kill_all()
    print(f"\n{'median (ms)':44}" + "".join(f"{f'{n:,} tools':>12}" for n in sizes) + f"{'growth':>10}")
    one = median(cold["cold"][sizes[0]])
    colds = [median(cold["cold"][n]) for n in sizes]
    row("cold start, cache cold (spawn -> initialize)", sizes, colds, "<= 2 x 1-tool + parse",
        all(c <= 2 * one + cold["parse"][n] for c, n in zip(colds, sizes)))
    row("  tomllib parse of the file", sizes, [cold["parse"][n] for n in sizes])
    row("hot reload, edit -> list_changed", sizes, [median(served["reload"][n]) for n in sizes])
    p95s = [B.pct(served["reload_ping"][n], 95) for n in sizes]
    row("  ping p95 during the reload", sizes, p95s, "<= 5 ms", all(p <= 5 for p in p95s))
    row("  ping max during the reload", sizes, [max(served["reload_ping"][n]) for n in sizes])
    row("calling the first tool, p50", sizes, [median(served["first"][n]) for n in sizes])
    row("calling the last tool, p50", sizes, [median(served["last"][n]) for n in sizes])
    row("tools/list all pages, per tool (us)", sizes, [1000 * median(served["list"][n]) for n in sizes])
    print(f"\n{'concurrent echo calls':44}" + "".join(f"{c:>12,}" for c in counts) + f"{'growth':>10}")
    row("  answered with a result", counts, [concurrent[c]["ok"] for c in counts], "all",
        all(concurrent[c]["failed"] == 0 for c in counts))
    row("  wall time per call (ms)", counts, [concurrent[c]["per_call_ms"] for c in counts])
    call_p50, spawn_p50 = median(per_call["server"]), median(per_call["floor"])
    rate = median(pipelined["floor"]) / median(pipelined["server"])
    print(f"\nper call p50 {call_p50:.2f} ms = {call_p50 / spawn_p50:.2f} x a raw spawn ({spawn_p50:.2f} ms); "
          f"bound 1.5 x {'PASS' if call_p50 <= 1.5 * spawn_p50 else 'FAIL'}")
    print(f"pipelined 1,000 calls: {rate:.2f} x the thread-pool spawn floor; bound 0.7 x "
          f"{'PASS' if rate >= 0.7 else 'FAIL'}")
    meds = {k: median(v) for k, v in peer.items()}
    print("cold start, spawn -> first response (initialize), ms: " + ", ".join(f"{k} {v:.0f}" for k, v in meds.items()))
    for peer_kind in ("node peer", "node peer, direct"):
        if peer_kind in meds:
            ratio = meds["mcpwrap"] / meds[peer_kind]
            print(f"  mcpwrap = {ratio:.2f} x the {peer_kind}, bound 0.6 x {'PASS' if ratio <= 0.6 else 'FAIL'}")
    if "node peer" not in meds:
        print("  node peer not measured")
    print(f"  mcpwrap = {meds['mcpwrap'] / meds['import trio']:.2f} x python -c 'import trio' (issue: about 0.4 x)")
    pings = {n: {"count": len(v), "p50": median(v), "p95": B.pct(v, 95), "max": max(v)}
             for n, v in served.pop("reload_ping").items()}
    print(json.dumps({"cold": cold, "served": served, "reload_ping": pings, "concurrent": concurrent, "peer": peer,
                      "per_call": {"p50": call_p50, "spawn_p50": spawn_p50}, "pipelined_rate": rate}))
    if args.tasks:
        sys.stdout.flush()
        subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "scale_tasks.py")], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
