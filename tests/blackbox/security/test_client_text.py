"""Attacks on the real server with client text a loose check would let through to a stricter parser.

`resources/read` of `...?offset=²` passed `str.isdigit()` and broke `int()`: the stdio server exited
with a traceback, and over HTTP the POST was a 500 with an empty body. Each kind of field gets its
case here (a URI's query, a cursor, a task id, a header): each is refused as the protocol says
(-32602, 400), and the server answers the next request.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from mcpwrap.config import load as config
from tests.harness import Server
from tests.httpharness import HttpServer

TOOLS = """
[tools.a]
command = ["echo", "a"]
[tools.b]
command = ["echo", "b"]
[tools.job]
command = ["echo", "job"]
task = "optional"
[prompts.p]
description = "a prompt, so that prompts/list is served"
messages = [{ text = "hello" }]
"""
OUTPUT = "mcpwrap://output/" + "a" * 32 + "/stdout"


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    return path


def _cursor(*fields: object) -> str:
    return base64.urlsafe_b64encode(":".join(map(str, fields)).encode()).decode().rstrip("=")


def test_a_superscript_offset_is_refused_over_stdio_and_the_server_goes_on(tools: Path, tmp_path: Path) -> None:
    with Server(tools, tmp_path) as server:
        server.initialize()
        for query in ("offset=²", "length=³", "offset=%C2%B2", "offset=٣", "offset=" + "9" * 40):
            error = server.call("resources/read", {"uri": f"{OUTPUT}?{query}"})["error"]
            assert error["code"] == -32602 and "ASCII digits" in error["message"], query
        assert server.call("ping") == {"jsonrpc": "2.0", "id": server.next_id, "result": {}}
        assert server.close() == 0
    assert not [line for line in server.stderr if "Traceback" in line or "internal error" in line]


def test_a_superscript_offset_is_a_json_rpc_error_over_http(tools: Path, tmp_path: Path) -> None:
    with HttpServer(tools, tmp_path) as server:           # close() fails on any internal error logged
        server.initialize()
        answer = server.legacy("resources/read", {"uri": f"{OUTPUT}?offset=²"}, id=7)
        assert answer.status == 200 and answer.final["id"] == 7 and answer.final["error"]["code"] == -32602
        assert "result" in server.legacy("ping", id=8).final


def test_a_cursor_with_unicode_digits_is_refused(tools: Path, tmp_path: Path) -> None:
    """`int()` reads '١' as 1: the cursor named a real page of the list before."""
    digest = config.load(tools).digest[:16]
    with Server(tools, tmp_path) as server:
        server.initialize()
        for cursor in (_cursor(1, "١", digest), _cursor(1, " 1", digest), _cursor(1, "1_0", digest),
                       "!" + _cursor(1, 1, digest), _cursor(2, "٣", "0", "a" * 22)):
            for method in ("tools/list", "tasks/list", "prompts/list", "resources/list"):
                error = server.call(method, {"cursor": cursor})["error"]
                assert error["code"] == -32602, (method, cursor)
        assert "result" in server.call("ping")


def test_task_ids_outside_their_grammar_are_not_found(tools: Path, tmp_path: Path) -> None:
    with Server(tools, tmp_path) as server:
        server.initialize()
        for task_id in ("a" * 22 + "\n", "٣" * 22, "-" + "a" * 22, "../" * 8, "a" * 24, "%41" * 8, ""):
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                error = server.call(method, {"taskId": task_id})["error"]
                assert error["code"] == -32602 and "not found" in error["message"], (method, task_id)
        assert "result" in server.call("ping")


def test_a_protocol_version_header_is_trimmed_of_http_whitespace_only(tools: Path, tmp_path: Path) -> None:
    """NBSP (0xA0) is not HTTP whitespace: `str.strip()` took it away, and a bad version passed."""
    with HttpServer(tools, tmp_path) as server:
        server.initialize()
        refused = server.send({"jsonrpc": "2.0", "id": 3, "method": "ping"},
                              {"mcp-protocol-version": "2025-11-25\xa0"})
        assert refused.status == 400 and refused.final["error"]["code"] == -32600
        taken = server.send({"jsonrpc": "2.0", "id": 4, "method": "ping"}, {"mcp-protocol-version": "2025-11-25\t"})
        assert taken.status == 200 and taken.final["result"] == {}
        weird = server.send({"jsonrpc": "2.0", "id": 5, "method": "ping"},
                            {"accept": "application/json;q=infinity, text/event-stream"})
        assert weird.status == 406
