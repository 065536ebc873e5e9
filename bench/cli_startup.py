"""How long the shell commands take, start to exit, against `python -c "import trio"` in the same run.

    .venv/bin/python bench/cli_startup.py              # 21 runs of each, about 30 s
    .venv/bin/python bench/cli_startup.py --runs 41

Each command runs `--runs` times as the `mcpwrap` script next to this interpreter (else as
`<this interpreter> -m mcpwrap`), the floor as `<this interpreter> -c "import trio"`; the runs of all commands are interleaved in a shuffled
order, so background load hits floor and commands alike. Before timing, each command runs
once untimed: a first run writes the tools file's validation marker under the state dir (as
`serve`'s first start does) and compiles bytecode (PYTHONDONTWRITEBYTECODE and MCPWRAP_* are
dropped from the environment: an installed package has its bytecode). `call` runs a real `echo` with one
argument, so it pays for argument validation and a process spawn. The task store holds a
working task (a `sleep`, its supervisor alive) and a completed one, created with `call --task`
before timing and cancelled after: `tasks list` and `tasks show` check the live supervisor as a
user's would. Prints a table (median, p95, median / floor median) and one JSON line; exit 1
when a ratio is above the target (1.3).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.3
TOOLS = """
[tools.echo]
command = ["echo", "{text}"]
args.text = { type = "string", description = "what to print" }
args.loud = { type = "boolean", flag = "-n", default = false }

[tools.wait]
command = ["sleep", "600"]
task = "optional"

[tools.done]
command = ["true"]
task = "optional"
"""


def measure(mcpwrap: list[str], tools: Path, working: str, env: dict[str, str], tmp: str,
            runs: int) -> dict[str, list[float]]:
    """ms of each run of each command, the runs of all commands interleaved in a shuffled order."""
    commands = {
        "floor: import trio": [sys.executable, "-c", "import trio"],
        "call": [*mcpwrap, "call", str(tools), "echo", "--arg", "text=hi"],
        "list": [*mcpwrap, "list", str(tools)],
        "check": [*mcpwrap, "check", str(tools)],
        "tasks list": [*mcpwrap, "tasks", "list", str(tools)],
        "tasks show": [*mcpwrap, "tasks", "show", working],
        "--help": [*mcpwrap, "call", "--help"],
    }
    for argv in commands.values():
        subprocess.run(argv, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    order = [name for name in commands for _ in range(runs)]
    random.shuffle(order)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for name in order:
        started = time.perf_counter()
        subprocess.run(commands[name], env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples[name].append((time.perf_counter() - started) * 1000)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="samples of each command (at least 15)")
    runs = max(15, parser.parse_args().runs)
    with tempfile.TemporaryDirectory(prefix="mcpwrap-bench-cli-") as tmp:
        tools, state = Path(tmp) / "tools.toml", Path(tmp) / "state"
        tools.write_text(TOOLS)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPWRAP_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(MCPWRAP_STATE_DIR=str(state), MCPWRAP_SECRET_FILE=str(Path(tmp) / "secret"),
                   NO_COLOR="1")                              # (bytecode as an installed package has it)
        script = Path(sys.executable).parent / "mcpwrap"     # what a shell runs; `-m` would add runpy
        mcpwrap = [str(script)] if script.exists() else [sys.executable, "-m", "mcpwrap"]

        def run(*args: str) -> str:
            return subprocess.run([*mcpwrap, *args], env=env, cwd=tmp, capture_output=True, text=True,
                                  check=True).stdout

        run("call", str(tools), "done", "--task")
        working = run("call", str(tools), "wait", "--task", "--no-wait").strip()
        try:
            samples = measure(mcpwrap, tools, working, env, tmp, runs)
        finally:
            supervisor = json.loads(run("tasks", "show", working, "--json"))["supervisorPid"]
            run("tasks", "cancel", working)
            deadline = time.monotonic() + 30          # it ends the sleep, then itself: before its store goes
            while supervisor and Path(f"/proc/{supervisor}").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
    floor = statistics.median(samples["floor: import trio"])
    rows = {name: {"median_ms": round(statistics.median(s), 1),
                   "p95_ms": round(sorted(s)[int(0.95 * (len(s) - 1))], 1),
                   "ratio": round(statistics.median(s) / floor, 2)} for name, s in samples.items()}
    print(f"{'command':<20} {'median ms':>10} {'p95 ms':>8} {'x floor':>8}   (runs: {runs}, load {os.getloadavg()[0]:.2f}; "
          f"{' '.join(mcpwrap)})")
    for name, row in rows.items():
        print(f"{name:<20} {row['median_ms']:>10} {row['p95_ms']:>8} {row['ratio']:>8}")
    passed = all(row["ratio"] <= TARGET for name, row in rows.items() if not name.startswith("floor"))
    print(json.dumps({"runs": runs, "target_ratio": TARGET, "pass": passed, "figures": rows}))
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
