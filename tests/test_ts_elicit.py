"""Elicitation forms round-trip through the official MCP TypeScript SDK (tests/ts/elicit.mjs): a
titled single-select, a legacy enumNames enum and a titled multi-select, from tests/fixtures/forms.toml,
are parsed by the SDK's ElicitRequest schema with their titles intact, answered, and the tool runs
with the answers; every message the server sent validates against the 2025-11-25 schema.
Needs `npm ci --prefix tests/ts` (CI does that before pytest).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.test_elicit_forms import ENUM_NAMES, FIXTURE, TITLED_MULTI, TITLED_ONE_OF
from tests.test_ts_client import NODE, ROOT, TIMEOUT_S, TS_DIR, needs_node, needs_sdk, tail
from tests.test_ts_content import check_wire

CLIENT = TS_DIR / "elicit.mjs"


@needs_node
@needs_sdk
def test_typescript_sdk_round_trips_titled_forms(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([NODE, str(CLIENT), sys.executable, str(FIXTURE), str(run_dir)],  # type: ignore[list-item]
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
    assert summary["required"] == []                       # every argument is asked for when missing
    [form] = summary["forms"]                              # as the SDK parsed it: nothing dropped
    assert form["properties"] == {"env": {"type": "string", "title": "Environment", "oneOf": TITLED_ONE_OF},
                                  "size": ENUM_NAMES, "tags": TITLED_MULTI}
    assert summary["isError"] is False and summary["text"] == "prod m a b\n", context
    wire = [json.loads(line)["msg"] for line in (run_dir / "wire.jsonl").read_text().splitlines()]
    assert next(m for m in wire if "protocolVersion" in m.get("result", {}))["result"]["protocolVersion"] == "2025-11-25"
    assert any(m.get("method") == "elicitation/create" for m in wire)
    assert check_wire(run_dir / "wire.jsonl", "2025-11-25") >= 4
