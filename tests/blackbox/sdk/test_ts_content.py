"""The official MCP TypeScript SDK client (tests/ts/content.mjs) lists and reads resources, gets a
prompt, completes an argument and reads 10 MiB beyond the cap back whole, against
tests/fixtures/content.toml; every message the server sent is checked against the 2025-11-25 schema.
Needs `npm ci --prefix tests/ts` (CI does that before pytest).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests import mcpschema
from tests.blackbox.sdk.test_ts_client import NODE, ROOT, TIMEOUT_S, TS_DIR, needs_node, needs_sdk, tail

CLIENT = TS_DIR / "content.mjs"
FIXTURE = ROOT / "tests" / "fixtures" / "content.toml"


def check_wire(path: Path, rev: str) -> int:
    """Validate what the server sent ('<' lines) against `rev`, each response as its request's result."""
    methods: dict[Any, str] = {}
    checked = 0
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry["msg"]
        if entry["dir"] == ">":
            if "method" in message and "id" in message:
                methods[message["id"]] = message["method"]
            continue
        mcpschema.check(rev, message, methods.get(message.get("id")))
        checked += 1
    return checked


def run_client(client: Path, fixture: Path, run_dir: Path) -> tuple[dict[str, Any], str]:
    """Run a tests/ts client against `serve fixture`; its JSON summary (it must have ended ok) and
    what to show when a later assertion fails."""
    proc = subprocess.Popen([NODE, str(client), sys.executable, str(fixture), str(run_dir)],  # type: ignore[list-item]
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    context = (f"exit status {proc.returncode}\nstdout:\n{out[-3000:]}\nstderr:\n{err}\n"
               f"--- server stderr (tail):\n{tail(run_dir / 'server-stderr.log')}")
    summary = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == 0 and summary["ok"] and summary["step"] == "done", context
    return summary, context


@needs_node
@needs_sdk
def test_typescript_sdk_resources_prompts_and_output(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary, context = run_client(CLIENT, FIXTURE, run_dir)
    assert summary["capabilities"]["resources"] == {"listChanged": True, "subscribe": True}
    assert summary["resources"] == ["notes"] and summary["notes"] == "# Notes\nKeep it short.\n"
    assert summary["templates"] == ["mcpwrap://output/{call}/{stream}{?offset,length}", "greet://{who}"]
    assert summary["greeting"] == "hello ts client"
    assert summary["prompts"] == ["review"]
    assert summary["promptMessages"] == [["user", "text", "Review the style of this change."],
                                         ["user", "resource", "hello style"], ["assistant", "text", "style?"]]
    assert summary["completion"] == ["style"]
    assert summary["cappedText"] < 66_000
    assert summary["bytes"] == 10 * 1024 * 1024 and summary["byteExact"] is True
    assert summary["evicted"] == {"code": -32002, "data": {"uri": summary["evictedUri"]}}
    assert check_wire(run_dir / "wire.jsonl", "2025-11-25") >= 20
