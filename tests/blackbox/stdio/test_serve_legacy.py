"""End to end over real pipes: the legacy handshake revisions, schema-checked."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests import procs
from tests.harness import Server, until, write_atomically

FIXTURE = Path(__file__).parents[2] / "fixtures" / "basic.toml"
LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@pytest.fixture
def server(tmp_path: Path):
    with Server(FIXTURE, tmp_path) as s:
        yield s


@pytest.mark.parametrize("version", LEGACY)
def test_scripted_session_per_revision(tmp_path: Path, version: str) -> None:
    with Server(FIXTURE, tmp_path) as s:
        init = s.initialize(version)
        assert init["result"]["protocolVersion"] == version
        assert init["result"]["serverInfo"]["name"] == "basic"
        assert init["result"]["instructions"] == "Test tools."
        tools = s.call("tools/list")["result"]["tools"]
        names = [t["name"] for t in tools]
        assert names == ["echo", "slow", "sleeper", "status", "media", "fail"]
        echo = tools[0]
        assert ("title" in echo) == (version >= "2025-06-18")
        assert ("annotations" in echo) == (version >= "2025-03-26")
        status = tools[3]
        assert ("outputSchema" in status) == (version >= "2025-06-18")
        result = s.call("tools/call", {"name": "echo", "arguments": {"msg": "a; touch /tmp/x"}})["result"]
        assert result["content"] == [{"type": "text", "text": "a; touch /tmp/x\n"}]
        assert result["isError"] is False
        structured = s.call("tools/call", {"name": "status", "arguments": {}})["result"]
        assert ("structuredContent" in structured) == (version >= "2025-06-18")
        media = s.call("tools/call", {"name": "media", "arguments": {}})["result"]["content"]
        kinds = [b["type"] for b in media]
        assert kinds[0] == ("audio" if version >= "2025-03-26" else "text")
        assert kinds[1] == ("resource_link" if version >= "2025-06-18" else "text")
        assert s.call("ping")["result"] == {}


def test_unknown_version_gets_latest(server: Server) -> None:
    assert server.initialize("1999-01-01")["result"]["protocolVersion"] == "2025-11-25"


def test_second_initialize_is_an_error(server: Server) -> None:
    server.initialize()
    again = server.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "x", "version": "1"}})
    assert again["error"]["code"] == -32600
    assert server.call("tools/list")["result"]["tools"]


def test_request_before_initialize(server: Server) -> None:
    assert server.call("tools/list")["error"]["code"] == -32600
    assert server.call("ping")["result"] == {}
    assert server.initialize()["result"]


def test_invalid_arguments_per_revision(tmp_path: Path) -> None:
    with Server(FIXTURE, tmp_path) as old:
        old.initialize("2025-06-18")
        assert old.call("tools/call", {"name": "echo", "arguments": {"msg": 3}})["error"]["code"] == -32602
    with Server(FIXTURE, tmp_path) as new:
        new.initialize("2025-11-25")
        result = new.call("tools/call", {"name": "echo", "arguments": {"msg": 3}})["result"]
        assert result["isError"] is True and "msg" in result["content"][0]["text"]
        assert new.call("tools/call", {"name": "nope", "arguments": {}})["error"]["code"] == -32602


def test_failing_tool_is_an_error_result(server: Server) -> None:
    server.initialize()
    result = server.call("tools/call", {"name": "fail", "arguments": {}})["result"]
    assert result["isError"] is True
    assert "broken" in result["content"][0]["text"] and "status 3" in result["content"][0]["text"]


def test_bad_input_is_answered_and_server_survives(server: Server) -> None:
    server.initialize()
    server.raw(os.urandom(200).replace(b"\n", b" ") + b"\n")
    assert server.read()["error"]["code"] == -32700
    server.raw(b"{}\n")
    assert server.read()["error"]["code"] == -32600
    server.raw(b"[]\n")
    assert server.read()["error"]["code"] == -32600
    server.raw(b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n')
    assert server.read()["error"]["code"] == -32600
    server.raw(b'\xff\xfe{"jsonrpc":"2.0"}\n')
    assert server.read()["error"]["code"] == -32700
    server.raw(b'{"jsonrpc":"2.0","method":"notifications/whatever"}\n')
    server.raw(b'{"jsonrpc":"2.0","id":77,"method":"no/such"}\n')
    assert server.read()["error"] == {"code": -32601, "message": "Method not found: no/such"}
    server.raw(b'{"jsonrpc":"2.0","id":"' + b"x" * (20 * 1024 * 1024) + b'","method":"ping"}\n')
    assert server.read()["error"]["code"] == -32600
    assert server.call("ping")["result"] == {}


def test_parse_error_id_forms(tmp_path: Path) -> None:
    with Server(FIXTURE, tmp_path) as old:
        old.initialize("2025-06-18")
        old.raw(b"nope\n")
        error = old.read()
        assert error["id"] is None and error["error"]["code"] == -32700
    with Server(FIXTURE, tmp_path) as new:
        new.initialize("2025-11-25")
        new.raw(b"nope\n")
        error = new.read()
        assert "id" not in error and error["error"]["code"] == -32700


def test_batches_only_in_2025_03_26(tmp_path: Path) -> None:
    batch = b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"msg":"b"}}},{"jsonrpc":"2.0","method":"notifications/x"}]\n'
    with Server(FIXTURE, tmp_path) as s:
        s.initialize("2025-03-26")
        s.pending.update({1: ("ping", "2025-03-26"), 2: ("tools/call", "2025-03-26")})
        s.raw(batch)
        answer = s.read()
        assert isinstance(answer, list) and sorted(m["id"] for m in answer) == [1, 2]
    with Server(FIXTURE, tmp_path) as s:
        s.initialize("2025-06-18")
        s.raw(batch)
        assert s.read()["error"]["code"] == -32600


def test_duplicate_inflight_id(server: Server) -> None:
    server.initialize()
    # One write: the ping arrives while slow (>= 0.5 s of sleeps) is still running, however loaded the machine.
    server.pending["dup"] = ("tools/call", "2025-11-25")
    server.raw(b'{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"slow","arguments":{}}}\n'
               b'{"jsonrpc":"2.0","id":"dup","method":"ping"}\n')
    first = server.read()
    assert first["id"] == "dup" and first["error"]["code"] == -32600
    assert server.response("dup")["result"]["content"][0]["text"] == "finished\n"


def test_progress_and_logs(server: Server) -> None:
    server.initialize("2025-11-25")
    assert server.call("logging/setLevel", {"level": "info"})["result"] == {}
    notes: list = []
    rid = server.request("tools/call", {"name": "slow", "arguments": {}, "_meta": {"progressToken": "tok"}})
    result = server.response(rid, notes=notes)
    assert result["result"]["isError"] is False
    progress = [n["params"] for n in notes if n["method"] == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3, 4, 5]
    assert all(p["progressToken"] == "tok" and p["total"] == 5 for p in progress)
    logs = [n["params"] for n in notes if n["method"] == "notifications/message"]
    assert [entry["data"] for entry in logs] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    assert all(entry["logger"] == "slow" and entry["level"] == "info" for entry in logs)


def test_no_progress_without_token_and_no_logs_by_default(server: Server) -> None:
    server.initialize()
    notes: list = []
    server.response(server.request("tools/call", {"name": "slow", "arguments": {}}), notes=notes)
    assert notes == []


def test_cancel_kills_process_group_and_sends_nothing(server: Server) -> None:
    server.initialize()
    rid = server.request("tools/call", {"name": "sleeper", "arguments": {}})
    groups = server.tool_groups()
    server.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
    until(lambda: not any(procs.group_alive(g) for g in groups), "the cancelled tool's group to die")
    server.notify("notifications/cancelled", {"requestId": rid})      # late: ignored
    server.notify("notifications/cancelled", {"requestId": "unknown"})
    assert server.call("ping")["result"] == {}                        # and no response for rid came first


def test_eof_during_call_exits_and_kills(server: Server) -> None:
    """The sleeper sleeps 60 s: a server that waited for it would not exit within the guard."""
    server.initialize()
    server.request("tools/call", {"name": "sleeper", "arguments": {}})
    groups = server.tool_groups()
    assert server.close(timeout=30) == 0
    until(lambda: not any(procs.group_alive(g) for g in groups), "the tool's group to die")


def test_sigterm_exits_and_kills(server: Server) -> None:
    server.initialize()
    server.request("tools/call", {"name": "sleeper", "arguments": {}})
    groups = server.tool_groups()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(30) == 0
    until(lambda: not any(procs.group_alive(g) for g in groups), "the tool's group to die")


def test_hot_reload(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text('[tools.a]\ncommand = ["true"]\n')
    with Server(tools, tmp_path) as s:
        s.initialize()
        write_atomically(tools, '[tools.a]\ncommand = ["true"]\n[tools.b]\ncommand = ["true"]\n')
        assert s.read()["method"] == "notifications/tools/list_changed"
        assert [t["name"] for t in s.call("tools/list")["result"]["tools"]] == ["a", "b"]
        write_atomically(tools, '[tools.a]\ncomand = ["true"]\n')
        assert "tools.toml:2:1: unknown key 'tools.a.comand'" in s.wait_stderr("tools.toml:2:1")
        assert [t["name"] for t in s.call("tools/list")["result"]["tools"]] == ["a", "b"]


def test_pagination_cursor_validation(server: Server) -> None:
    server.initialize()
    assert server.call("tools/list", {"cursor": "bogus"})["error"]["code"] == -32602
