"""protocol/tools: tools/list pages and a tool rendered for each revision (only the fields it defines),
parse_call's checks, and a result rendered field by field (a block the revision lacks becomes a text note)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwrap.config import load as config
from mcpwrap.protocol.revisions import REVISIONS
from mcpwrap.protocol.tools import ProtocolError, list_page, parse_call, progress_params, render_result, result_error
from mcpwrap.result import Media, ResourceLink, Text, ToolResult
from tests import mcpschema

TOOLS = b"""
[tools.rich]
title = "Rich"
description = "every field"
command = ["echo", "{n}"]
output = "json"
output_schema = { type = "object", properties = { n = { type = "integer" } } }
annotations = { readOnlyHint = true }
task = "optional"
args.n = { type = "integer" }
[tools.b]
command = ["true"]
[tools.c]
command = ["true"]
"""
CFG = config.loads(TOOLS, Path("/tmp/tools.toml"))


@pytest.mark.parametrize(("version", "fields"), [
    ("2024-11-05", {"name", "description", "inputSchema"}),
    ("2025-03-26", {"name", "description", "inputSchema", "annotations"}),
    ("2025-06-18", {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}),
    ("2025-11-25", {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "execution"}),
])
def test_a_tool_is_listed_with_the_fields_its_revision_defines(version: str, fields: set[str]) -> None:
    page = list_page(CFG, REVISIONS[version], None)
    mcpschema.check(version, {"jsonrpc": "2.0", "id": 1, "result": page}, "tools/list")
    rich = page["tools"][0]
    assert set(rich) == fields
    if "execution" in fields:
        assert rich["execution"] == {"taskSupport": "optional"}


def test_pages_follow_their_cursor_and_a_foreign_cursor_is_32602() -> None:
    rev = REVISIONS["2025-11-25"]
    first = list_page(CFG, rev, None, page_size=2)
    assert [t["name"] for t in first["tools"]] == ["rich", "b"]
    last = list_page(CFG, rev, first["nextCursor"], page_size=2)
    assert [t["name"] for t in last["tools"]] == ["c"] and "nextCursor" not in last
    other = config.loads(TOOLS + b"[tools.d]\ncommand = ['true']\n", Path("/tmp/tools.toml"))
    for cursor in (first["nextCursor"] + "=", 7, ""):
        with pytest.raises(ProtocolError) as caught:
            list_page(CFG, rev, cursor)
        assert caught.value.code == -32602
    with pytest.raises(ProtocolError, match="does not belong to the current tools list"):
        list_page(other, rev, first["nextCursor"])


def test_parse_call_checks_the_name_and_the_shape_of_the_arguments() -> None:
    assert parse_call(CFG, {"name": "rich", "arguments": {"n": 1}}).arguments == {"n": 1}
    assert parse_call(CFG, {"name": "b"}).arguments == {}
    assert parse_call(CFG, {"name": "b", "arguments": None}).arguments == {}
    assert parse_call(CFG, {"name": "rich", "arguments": {"n": "not checked here"}}).tool.name == "rich"
    for params, words in (({}, "string 'name'"), ({"name": "zz"}, "Unknown tool: zz"),
                          ({"name": "b", "arguments": [1]}, "must be an object")):
        with pytest.raises(ProtocolError, match=words) as caught:
            parse_call(CFG, params)
        assert caught.value.code == -32602


def test_a_result_carries_only_what_its_revision_has() -> None:
    result = ToolResult((Text("t"), Media("audio", "AAAA", "audio/wav"),
                         ResourceLink("file:///x", "x", "text/plain", "a file")), structured={"n": 1})
    old = render_result(result, REVISIONS["2024-11-05"])
    assert old["content"][0] == {"type": "text", "text": "t"}
    assert old["content"][1]["type"] == "text" and "cannot carry audio" in old["content"][1]["text"]
    assert old["content"][2] == {"type": "text", "text": "[resource link] x: file:///x (text/plain) - a file"}
    assert "structuredContent" not in old and old["isError"] is False
    new = render_result(result, REVISIONS["2025-06-18"])
    assert [b["type"] for b in new["content"]] == ["text", "audio", "resource_link"]
    assert new["structuredContent"] == {"n": 1}
    listed = render_result(ToolResult((Text(""),), structured=[1, 2]), REVISIONS["2025-06-18"])
    assert "structuredContent" not in listed          # a non-object only where any JSON is allowed
    for version in ("2024-11-05", "2025-06-18"):
        mcpschema.check(version, {"jsonrpc": "2.0", "id": 1, "result": render_result(result, REVISIONS[version])},
                        "tools/call")


def test_progress_says_its_message_only_where_the_revision_has_one() -> None:
    assert progress_params("p", 1, None, "half", REVISIONS["2024-11-05"]) == {"progressToken": "p", "progress": 1}
    assert progress_params(3, 1, 2, "half", REVISIONS["2025-03-26"]) == {
        "progressToken": 3, "progress": 1, "total": 2, "message": "half"}


def test_a_result_with_a_protocol_error_code_stands_for_a_json_rpc_error() -> None:
    crashed = ToolResult((Text("x" * 3000 + "\n[t exited with status 2]"),), is_error=True, exit_code=2,
                         protocol_error=True)
    error = result_error(crashed)
    assert error is not None and error.to_json() == {
        "code": -32603, "message": crashed.text[-2000:], "data": {"exitCode": 2}}
    assert result_error(ToolResult((Text("failed"),), is_error=True, exit_code=1)) is None
