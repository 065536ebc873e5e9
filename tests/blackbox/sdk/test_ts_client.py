"""The official MCP TypeScript SDK client against a real `mcpwrap serve` over stdio.

tests/ts/client.mjs spawns the server with the SDK's StdioClientTransport, lists tools,
calls echo/status/slow (progress + log notifications), cancels sleeper with an
AbortController and proves the server still answers. It prints one JSON summary line.
Needs `npm ci --prefix tests/ts` (CI does that before pytest).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.harness import HANG_S

ROOT = Path(__file__).resolve().parents[3]
TS_DIR = ROOT / "tests" / "ts"
CLIENT = TS_DIR / "client.mjs"
FIXTURE = ROOT / "tests" / "fixtures" / "ts.toml"
MARKER = "60.4217"              # sleeper's `sleep` duration in ts.toml; also hard-coded in client.mjs
RUN_ENV = "TS_RUN_OF_MCPWRAP"      # client.mjs sets it to the run's tmpdir for the server and its tools
TIMEOUT_S = 60
EXPECTED_TOOLS = ["echo", "slow", "sleeper", "status", "media", "fail"]
NODE = shutil.which("node")

needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed (needed for the TypeScript SDK client test)")
needs_sdk = pytest.mark.skipif(not (TS_DIR / "node_modules").is_dir(),
                               reason="tests/ts/node_modules is missing: run `npm ci --prefix tests/ts` first")


def run_processes(run_id: str) -> list[tuple[int, str]]:
    """Live processes started for this run (marker on the command line, run id in the environment)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if MARKER.encode() not in cmdline:
                continue
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue                         # exited meanwhile, or someone else's
        if f"{RUN_ENV}={run_id}".encode() in environ.split(b"\0"):
            found.append((int(entry.name), cmdline.replace(b"\0", b" ").decode(errors="replace").strip()))
    return found


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(none)"


def test_fixture_marks_the_sleeper() -> None:
    tools = tomllib.loads(FIXTURE.read_text())["tools"]
    assert list(tools) == EXPECTED_TOOLS
    assert MARKER in " ".join(tools["sleeper"]["command"])
    assert f"const SLEEP_MARKER = '{MARKER}'" in CLIENT.read_text()


@needs_node
@needs_sdk
def test_typescript_sdk_client(tmp_path: Path) -> None:
    run_dir = (tmp_path / "run").resolve()
    run_id = str(run_dir)
    proc = subprocess.Popen([NODE, str(CLIENT), sys.executable, str(FIXTURE), run_id],  # type: ignore[list-item]
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)          # node and the server it spawned
        out, err = proc.communicate()
        pytest.fail(f"client.mjs did not finish within {TIMEOUT_S}s\nstdout:\n{out}\nstderr:\n{err}")
    finally:
        # Whatever the outcome, nothing the server started for this run may outlive it.
        deadline = time.monotonic() + HANG_S          # a hang guard: they go as soon as the server does
        while (leftovers := run_processes(run_id)) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid, _ in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    context = (f"exit status {proc.returncode}\nstdout:\n{out}\nstderr:\n{err}\n"
               f"--- server stderr (tail):\n{tail(run_dir / 'server-stderr.log')}\n"
               f"--- wire (tail):\n{tail(run_dir / 'wire.jsonl')}")
    lines = out.strip().splitlines()
    assert lines, "client.mjs printed no summary\n" + context
    summary: dict[str, Any] = json.loads(lines[-1])

    assert not leftovers, f"processes of the cancelled sleeper outlived the server: {leftovers}\n" + context
    assert proc.returncode == 0 and summary["ok"] is True, context
    assert summary["error"] is None and summary["step"] == "done", context

    assert summary["sdkVersion"] == "1.32.2"
    assert summary["marker"] == MARKER and summary["runId"] == run_id
    assert summary["protocolVersion"] == "2025-11-25"
    assert summary["serverInfo"]["name"] == "ts" and summary["serverInfo"]["version"] == "1.2.3"
    assert summary["tools"] == EXPECTED_TOOLS
    assert summary["echo"] == "hello; rm -rf /\n"
    assert summary["structuredContent"] == {"ok": True, "count": 3}

    values = [p["progress"] for p in summary["progress"]]
    assert values == sorted(set(values)) and values, summary["progress"]    # strictly increasing
    assert values == [1, 2, 3, 4, 5]
    assert all(p.get("total") == 5 for p in summary["progress"]), summary["progress"]

    slow_logs = [entry for entry in summary["logs"] if entry.get("logger") == "slow"]
    assert [entry["data"] for entry in slow_logs] == ["1/5", "2/5", "3/5", "4/5", "5/5"], summary["logs"]
    assert all(entry["level"] == "info" for entry in slow_logs), summary["logs"]

    assert summary["cancelled"] is True, context
    assert summary["cancelNotificationSent"] is True
    assert summary["sleepersBeforeCancel"], "sleeper had not started its processes when cancelled"
    assert len(summary["sleepersBeforeCancel"]) >= 2          # sh and at least one sleep
    assert summary["sleepersAfterCancel"] == [], summary["sleepersAfterCancel"]
    assert summary["lateResponses"] == [], "the server answered the cancelled request id"

    assert summary["stillAlive"] == "still alive\n"
    assert summary["sdkErrors"] == [], summary["sdkErrors"]
    assert summary["serverExited"] is True
