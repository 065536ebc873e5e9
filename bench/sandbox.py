"""What confinement costs per call: `echo` sandboxed (Landlock), with rlimits, and with cgroup
limits, against the same `echo` unconfined, on one server, in interleaved blocks so machine
noise hits all alike.

    .venv/bin/python bench/sandbox.py [--calls 1000] [--json-only]

Target (issue "Defence in depth"): sandboxed p50 <= 1.3 x unconfined p50, and <= 0.5 ms added.
The limited variants are information: limits need code in the child between fork and exec, so
they cost a fork of the server where the others cost a vfork.
Exit status 0 when the target holds, 1 when it fails, 2 when the benchmark could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import bench as b   # bench/bench.py: the server driver, summaries and clean-up this file shares

TOOLS = """\
[tools.echo]
command = ["echo", "{msg}"]
args.msg = { type = "string" }

[tools.sandboxed]
command = ["echo", "{msg}"]
args.msg = { type = "string" }
sandbox = { read = ["{cwd}"], write = [], network = false }

[tools.rlimited]
command = ["echo", "{msg}"]
args.msg = { type = "string" }
limits = { open_files = 256, file_size = "100MiB", cpu = "30s" }

[tools.cgroup_limited]
command = ["echo", "{msg}"]
args.msg = { type = "string" }
sandbox = { read = ["{cwd}"], write = [], network = false }
limits = { processes = 64, memory = "1GiB" }
"""
BLOCK = 50


def measure(tmp: Path, calls: int) -> dict[str, list[float]]:
    tools = tmp / "tools.toml"
    tools.write_text(TOOLS)
    server = b.Server(tools, tmp, "sandbox")
    samples: dict[str, list[float]] = {"echo": [], "sandboxed": [], "rlimited": [], "cgroup_limited": []}
    try:
        server.initialize()
        for name in samples:                                      # warm-up
            for _ in range(20):
                b.check_call_result(server.call("tools/call", {"name": name, "arguments": {"msg": "x"}})[1])
        while len(samples["echo"]) < calls:
            for name, values in samples.items():
                for _ in range(min(BLOCK, calls - len(values))):
                    seconds, msg = server.call("tools/call", {"name": name, "arguments": {"msg": "x"}})
                    b.check_call_result(msg)
                    values.append(seconds * 1000)
    finally:
        server.close()
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls of each tool (default 1000)")
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args(argv)
    b.QUIET = args.json_only
    try:
        with tempfile.TemporaryDirectory(prefix="mcpwrap-bench-sandbox-") as tmp:
            b.WORKDIR = tmp
            samples = measure(Path(tmp), args.calls)
    except b.BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    finally:
        b.kill_all()
    base = b.summary(samples["echo"])
    report: dict[str, object] = {"calls": args.calls, "unconfined": base, "loadavg": b.loadavg()}
    ok = True
    for name in ("sandboxed", "rlimited", "cgroup_limited"):
        figure = b.summary(samples[name])
        ratio, added = figure["median"] / base["median"], figure["median"] - base["median"]
        passed = ratio <= 1.3 and added <= 0.5 if name == "sandboxed" else None
        ok = ok and passed is not False
        report[name] = {**figure, "ratio_p50": round(ratio, 3), "added_p50_ms": round(added, 3),
                        "target": "<= 1.3x and <= 0.5 ms added" if passed is not None else "information",
                        "pass": passed}
        if not args.json_only:
            verdict = {True: "PASS", False: "FAIL", None: "(information)"}[passed]
            print(f"{name:16} p50 {figure['median']:.3f} ms  p95 {figure['p95']:.3f} ms  vs unconfined p50 "
                  f"{base['median']:.3f} ms: {ratio:.2f}x, +{added:.3f} ms  {verdict}")
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
