"""Elicitation forms round-trip through the official MCP TypeScript SDK (tests/ts/elicit.mjs): a
titled single-select, a legacy enumNames enum and a titled multi-select, from tests/fixtures/forms.toml,
are parsed by the SDK's ElicitRequest schema with their titles intact, answered, and the tool runs
with the answers; every message the server sent validates against the 2025-11-25 schema.
Needs `npm ci --prefix tests/ts` (CI does that before pytest).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.protocol.test_asking import ENUM_NAMES, FIXTURE, TITLED_MULTI, TITLED_ONE_OF
from tests.blackbox.sdk.test_ts_client import TS_DIR, needs_node, needs_sdk
from tests.blackbox.sdk.test_ts_content import check_wire, run_client

CLIENT = TS_DIR / "elicit.mjs"


@needs_node
@needs_sdk
def test_typescript_sdk_round_trips_titled_forms(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary, context = run_client(CLIENT, FIXTURE, run_dir)
    assert summary["required"] == []                       # every argument is asked for when missing
    [form] = summary["forms"]                              # as the SDK parsed it: nothing dropped
    assert form["properties"] == {"env": {"type": "string", "title": "Environment", "oneOf": TITLED_ONE_OF},
                                  "size": ENUM_NAMES, "tags": TITLED_MULTI}
    assert summary["isError"] is False and summary["text"] == "prod m a b\n", context
    wire = [json.loads(line)["msg"] for line in (run_dir / "wire.jsonl").read_text().splitlines()]
    assert next(m for m in wire if "protocolVersion" in m.get("result", {}))["result"]["protocolVersion"] == "2025-11-25"
    assert any(m.get("method") == "elicitation/create" for m in wire)
    assert check_wire(run_dir / "wire.jsonl", "2025-11-25") >= 4
