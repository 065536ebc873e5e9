"""Terraform-style, apt-style (on a pseudo-terminal) and enum questions answered through a task parked in
`input_required`, in both task designs,
driven by the official MCP TypeScript SDK (tests/ts/tasks-ask.mjs): a 2025-11-25 task (the SDK's own
callToolStream meets input_required, calls tasks/result, and its elicitation handler answers the question
the server relays there, tagged with the task) and a 2026-07-28 tasks-extension task (inputRequests on
tasks/get, the answer in tasks/update). The bytes the command received on stdin are compared byte for
byte. Over `serve --http` the 2025-11-25 question comes on the tasks/result POST's SSE stream. Needs
`npm ci --prefix tests/ts` (CI does that before pytest).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.blackbox.sdk.test_ts_client import TS_DIR, needs_node, needs_sdk
from tests.blackbox.sdk.test_ts_content import run_client
from tests.httpharness import HttpServer

CLIENT = TS_DIR / "tasks-ask.mjs"
FIXTURE = Path(__file__).parents[2] / "fixtures" / "ask_tasks.toml"
QUESTION = ("Terraform asks: apply this plan?\n\nPlan: 1 to add, 0 to change, 0 to destroy.\n\n"
            "Do you want to perform these actions?")
# tool -> (the question's message, the 2025-11-25 answer and the bytes it writes, the 2026-07-28 answer and its bytes)
STYLES = {
    "apply": (QUESTION, True, b"yes\n", False, b"no\n"),
    "upgrade": ("apt asks: continue?", True, b"Y\n", False, b"n\n"),
    "migrate": ("Migrate which environment?", "production", b"production\n", "staging", b"staging\n"),
}


@needs_node
@needs_sdk
@pytest.mark.parametrize("tool", sorted(STYLES))
def test_typescript_sdk_answers_a_parked_task_in_both_task_designs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    message, legacy_answer, legacy_bytes, modern_answer, modern_bytes = STYLES[tool]
    monkeypatch.setenv("TS_TOOL", tool)
    monkeypatch.setenv("TS_LEGACY_ANSWER", json.dumps(legacy_answer))
    monkeypatch.setenv("TS_MODERN_ANSWER", json.dumps(modern_answer))
    run_dir = tmp_path / "run"
    summary, context = run_client(CLIENT, FIXTURE, run_dir)
    legacy, modern = summary["legacy"], summary["modern"]
    assert legacy["statuses"][-1] == "input_required", context
    assert legacy["asked"] == [{"message": message, "related": {"taskId": legacy["taskId"]}}], context
    assert legacy["result"]["isError"] is False and legacy["result"]["content"][0]["text"].endswith("done\n")
    assert (run_dir / "legacy.out").read_bytes() == legacy_bytes
    assert modern["resultType"] == "task" and modern["question"]["params"]["message"] == message, context
    assert modern["statuses"][:2] == ["working", "input_required"] and modern["statuses"][-1] == "completed"
    assert modern["update"]["resultType"] == "complete" and modern["result"]["isError"] is False, context
    assert (run_dir / "modern.out").read_bytes() == modern_bytes


@needs_node
@needs_sdk
def test_typescript_sdk_answers_a_parked_2025_task_over_streamable_http(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    with HttpServer(FIXTURE, tmp_path) as server:
        monkeypatch.setenv("TS_HTTP_URL", f"http://{server.host}:{server.port}{server.path}")
        summary, context = run_client(CLIENT, FIXTURE, run_dir)
    check_legacy(summary["legacy"], run_dir, context)


def check_legacy(legacy: dict[str, Any], run_dir: Path, context: str) -> None:
    """The SDK met input_required, was asked on tasks/result (related-task), and the command received yes."""
    assert legacy["statuses"][-1] == "input_required", context
    assert legacy["asked"] == [{"message": QUESTION, "related": {"taskId": legacy["taskId"]}}], context
    assert legacy["result"]["isError"] is False and legacy["result"]["content"][0]["text"].endswith("done\n")
    assert (run_dir / "legacy.out").read_bytes() == b"yes\n"
