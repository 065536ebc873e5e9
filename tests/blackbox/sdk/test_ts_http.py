"""The official MCP TypeScript SDK's Streamable HTTP client (tests/ts/http.mjs) against `serve --http`:
it lists tools, calls one with progress, cancels a running call (the SDK sends notifications/cancelled
and the server must kill the tool's processes), and answers a confirmation asked on the call's SSE
stream: accepted, the command ran; declined, it did not. Every message the server sent validates
against the 2025-11-25 schema. Needs `npm ci --prefix tests/ts` (CI does that before pytest).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import procs
from tests.httpharness import HttpServer
from tests.blackbox.sdk.test_ts_client import TS_DIR, needs_node, needs_sdk
from tests.blackbox.sdk.test_ts_content import check_wire, run_client

CLIENT = TS_DIR / "http.mjs"
TOOLS = Path(__file__).parents[2] / "fixtures" / "http.toml"


@needs_node
@needs_sdk
def test_typescript_sdk_over_streamable_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    secs = f"606.{os.getpid() % 1000000:06d}"
    with HttpServer(TOOLS, tmp_path, "--log-level", "debug") as server:
        monkeypatch.setenv("TS_HTTP_URL", f"http://{server.host}:{server.port}{server.path}")
        monkeypatch.setenv("TS_HTTP_SECS", secs)
        summary, context = run_client(CLIENT, TOOLS, run_dir)
        context += "\n--- server stderr:\n" + "".join(server.stderr[-60:])
        assert summary["protocolVersion"] == "2025-11-25" and summary["sessionId"], context
        assert {"echo", "slow", "sleeper", "create"} <= set(summary["tools"])
        assert summary["slow"] == "finished\n"
        assert [p["progress"] for p in summary["progress"]] == [1, 2, 3], summary["progress"]

        assert summary["runningAtCancel"] >= 2 and summary["cancelNotified"], context
        assert "error" in summary["cancelOutcome"], summary["cancelOutcome"]     # the SDK's own abort
        assert not procs.with_cmdline(secs), "the cancelled tool outlived its cancellation"
        assert summary["afterCancel"] == "still here\n" and not summary["answeredCancelled"], context
        received = [line for line in server.stderr if line.startswith("mcpwrap <- ")]
        assert any('"notifications/cancelled"' in line for line in received), context

        accepted, declined = summary["forms"]
        assert accepted["answer"] == "accept" and declined["answer"] == "decline"
        assert summary["accept"]["isError"] is False and (run_dir / "accept").read_text() == "run\n", context
        assert summary["decline"]["isError"] is True and not (run_dir / "decline").exists(), context
        # client.close() aborts the SDK's own GET stream, which its transport reports as an error
        assert [e for e in summary["sdkErrors"] if e != ["done", "This operation was aborted"]] == [], context
    assert check_wire(run_dir / "wire.jsonl", "2025-11-25") >= 10
