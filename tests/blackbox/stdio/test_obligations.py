"""Obligations of the spec no suite checks (issue 24, class 9): stdio and the core.

Each test's docstring quotes the rule it holds the server to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness import Server

TOOLS = r"""
[tools.create]
description = "Append a line to a marker file, after confirmation"
command = ["sh", "-c", "echo ran >> \"$1\"", "sh", "{path}"]
confirm = "Create {path}?"
args.path = { type = "string" }

[tools.counting]
description = "Counts to three on stderr"
command = ["sh", "-c", "for i in 1 2 3; do echo \"$i/3\" >&2; done; echo finished"]
progress = '(?<!\d)(\d+)/(\d+)'
"""


def half_open(tmp_path: Path) -> Server:
    """A 2025-11-25 session whose client sent initialize and got its result, but no initialized yet."""
    tools = tmp_path / "tools.toml"
    tools.write_text(TOOLS)
    server = Server(tools, tmp_path)
    server.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                               "clientInfo": {"name": "tests", "version": "1"}})
    return server


def test_no_progress_before_initialized(tmp_path: Path) -> None:
    """lifecycle (2025-06-18, 2025-11-25): "The server SHOULD NOT send requests other than pings and
    logging before receiving the initialized notification" (server-obligations.txt: "Before
    notifications/initialized, a server SHOULD NOT send anything except pings and logging")."""
    with half_open(tmp_path) as s:
        notes: list[Any] = []
        rid = s.request("tools/call", {"name": "counting", "arguments": {}, "_meta": {"progressToken": "p"}})
        assert s.response(rid, notes=notes)["result"]["content"][0]["text"] == "finished\n"
        assert [n["method"] for n in notes] == []
        s.notify("notifications/initialized")
        rid = s.request("tools/call", {"name": "counting", "arguments": {}, "_meta": {"progressToken": "q"}})
        s.response(rid, notes=notes)
        assert [n["method"] for n in notes] == ["notifications/progress"] * 3


def test_elicitation_waits_for_initialized(tmp_path: Path) -> None:
    """lifecycle: "The server SHOULD NOT send requests other than pings and logging before receiving
    the initialized notification": the confirmation is held, and asked once initialized arrives."""
    marker = tmp_path / "marker"
    with half_open(tmp_path) as s:
        rid = s.request("tools/call", {"name": "create", "arguments": {"path": str(marker)}})
        ping = s.request("ping")                   # answered in order: the call's question came before it, or not at all
        first = s.read()
        assert first.get("id") == ping and "result" in first, first
        s.notify("notifications/initialized")
        ask = s.read()
        assert ask["method"] == "elicitation/create", ask
        s.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {}}})
        assert s.response(rid)["result"]["isError"] is False
        assert marker.read_text() == "ran\n"
