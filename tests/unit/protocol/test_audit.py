"""`protocol/audit.py`: the audit trail's records, built from plain values; a secret argument never
reaches them (tests/unit/state/test_audit_log.py writes and verifies them)."""

from __future__ import annotations

from pathlib import Path

import orjson

from mcpwrap.protocol import audit
from mcpwrap.protocol.argv import build_argv
from tests.unit.state.test_audit_log import CALLER, _tool


def test_secret_argument_redacted_in_arguments_and_argv(tmp_path: Path) -> None:
    tool = _tool(tmp_path)
    args = {"token": "hunter2", "target": "prod", "extra": ["a", "b"]}
    argv = ["/usr/bin/prlimit", "--", *build_argv(tool, args)]
    record = audit.call_start(CALLER, 1, tool, args, argv, "/srv", "cgroup", "landlock")
    assert b"hunter2" not in orjson.dumps(record)
    assert record["arguments"] == {"token": "[redacted]", "target": "prod", "extra": ["[redacted]", "[redacted]"]}
    assert record["argv"] == ["/usr/bin/prlimit", "--", "deploy", "--token=[redacted]", "prod", "-e", "[redacted]",
                              "-e", "[redacted]", "--", "[redacted]"]
    assert record["identity"] == "bearer:0123" and record["event"] == "call.start"


def test_unknown_tool_refusal_records_argument_names_only() -> None:
    record = audit.refused(CALLER, 2, "unknown", "nope", {"password": "hunter2"}, "no such tool")
    assert b"hunter2" not in orjson.dumps(record) and record["argument_names"] == ["password"]
