"""Commands that talk back, through the official Python SDK in a legacy session: a running command's
question reaches the SDK's elicitation callback, and its answer reaches the command's stdin, byte for
byte (tests/fixtures/ask.toml: each command writes the line it received to a file)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.blackbox.sdk.test_python import ROOT, run, text_of
from tests.harness import HANG_S
from tests.httpharness import HttpServer

FIXTURE = Path(__file__).parents[2] / "fixtures" / "ask.toml"

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


def params(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcpwrap", "serve", str(FIXTURE), "--secret-file", str(tmp_path / "secret"),
              "--state-dir", str(tmp_path / "state"), "--audit", str(tmp_path / "audit.jsonl")],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
        cwd=str(ROOT))


def call(tmp_path: Path, tool: str, answers: list[Any] | None) -> tuple[types.CallToolResult, list[Any], bytes]:
    """Call `tool` in a legacy session, accepting each question with the next of `answers` (None: the
    client declares no elicitation); the result, the questions seen and the bytes the command received."""
    out, seen = tmp_path / "received", []
    found: list[types.CallToolResult] = []

    async def on_elicit(ctx: ClientRequestContext, request: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(request)
        assert answers is not None
        return types.ElicitResult(action="accept", content={"answer": answers.pop(0)})

    async def body() -> None:
        kwargs: dict[str, Any] = {} if answers is None else {"elicitation_callback": on_elicit}
        async with Client(stdio_client(params(tmp_path)), mode="legacy", read_timeout_seconds=HANG_S, **kwargs) as c:
            found.append(await c.call_tool(tool, {"out": str(out)}))
    run(body)
    return found[0], seen, out.read_bytes() if out.exists() else b""


@pytest.mark.parametrize(("tool", "answer", "received"), [("apply", True, b"yes\n"), ("apply", False, b"no\n"),
                                                          ("upgrade", True, b"Y\n"),
                                                          ("confirm_tty", False, b"n\n")])
def test_a_yes_no_question_is_answered_through_the_elicitation_callback(tmp_path: Path, tool: str, answer: bool,
                                                                        received: bytes) -> None:
    result, seen, got = call(tmp_path, tool, [answer])
    assert got == received and not result.is_error and text_of(result).endswith("done\n")
    (question,) = seen
    assert question.requested_schema["properties"]["answer"]["type"] == "boolean"
    if tool == "apply":
        assert question.message == ("Terraform asks: apply this plan?\n\nPlan: 1 to add, 0 to change, 0 to destroy."
                                    "\n\nDo you want to perform these actions?")


def test_an_enum_question_then_a_free_text_one(tmp_path: Path) -> None:
    result, seen, got = call(tmp_path, "migrate", ["prod", "v1.2 \"blue\" {value}"])
    assert got == b"prod\nv1.2 \"blue\" {value}\n" and not result.is_error
    assert seen[0].requested_schema["properties"]["answer"] == {"type": "string", "enum": ["dev", "prod"]}


@pytest.mark.parametrize("answer", ["v1\nrm -rf ~", "v1\x1b[2J", "v1\r"])
def test_an_answer_with_a_newline_or_an_escape_sequence_writes_nothing(tmp_path: Path, answer: str) -> None:
    result, _, got = call(tmp_path, "migrate", ["dev", answer])
    assert got == b"dev\n"                                    # the first answer only
    assert result.is_error and "holds a newline or another control character; nothing was written" in text_of(result)


def test_a_client_that_cannot_be_asked_gets_the_default(tmp_path: Path) -> None:
    result, _, got = call(tmp_path, "upgrade", None)
    assert got == b"n\n" and not result.is_error


def test_a_client_that_cannot_be_asked_gets_an_error_quoting_the_question(tmp_path: Path) -> None:
    result, _, got = call(tmp_path, "apply", None)
    assert got == b"" and result.is_error
    assert "the command asked 'Enter a value:' (Terraform asks: apply this plan?) and nobody could be asked" \
        in text_of(result)


def test_questions_count_in_the_audit_trail_never_their_answers(tmp_path: Path) -> None:
    call(tmp_path, "migrate", ["prod", "secret-name"])
    call(tmp_path, "apply", None)
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    asked = [(r["tool"], r["prompt"]) for r in lines if r["event"] == "question.asked"]
    assert asked == [("migrate", "Environment [dev/prod]: "), ("migrate", "Release name: "), ("apply", "  Enter a value: ")]
    assert [r["answer"] for r in lines if r["event"] == "question.answered"] == ["accept", "accept", "nobody"]
    assert "secret-name" not in (tmp_path / "audit.jsonl").read_text()


def test_over_streamable_http_a_legacy_sessions_question_is_answered_too(tmp_path: Path) -> None:
    out, seen, found = tmp_path / "received", [], []

    async def on_elicit(ctx: ClientRequestContext, request: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(request)
        return types.ElicitResult(action="accept", content={"answer": "prod" if len(seen) == 1 else "v3"})

    async def main() -> None:
        with anyio.fail_after(2 * HANG_S):
            async with Client(streamable_http_client(f"http://{server.host}:{server.port}{server.path}"),
                              mode="legacy", read_timeout_seconds=HANG_S, elicitation_callback=on_elicit) as c:
                found.append(await c.call_tool("migrate", {"out": str(out)}))

    with HttpServer(FIXTURE, tmp_path) as server:
        anyio.run(main, backend="trio")
    assert out.read_bytes() == b"prod\nv3\n" and not found[0].is_error and len(seen) == 2
