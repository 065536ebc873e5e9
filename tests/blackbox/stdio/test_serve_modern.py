"""End to end over real pipes: stateless 2026-07-28 requests, schema-checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import procs
from tests.harness import Server, modern_meta, until, write_atomically

FIXTURE = Path(__file__).parents[2] / "fixtures" / "basic.toml"


@pytest.fixture
def server(tmp_path: Path):
    with Server(FIXTURE, tmp_path) as s:
        yield s


def test_discover(server: Server) -> None:
    result = server.call("server/discover", {"_meta": modern_meta()})["result"]
    assert result["supportedVersions"][0] == "2026-07-28"
    assert set(result["supportedVersions"]) == {"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "basic"
    assert result["instructions"] == "Test tools."
    assert result["ttlMs"] > 0 and result["cacheScope"] == "public"


def test_list_and_call_without_initialize(server: Server) -> None:
    page = server.call("tools/list", {"_meta": modern_meta()})["result"]
    assert [t["name"] for t in page["tools"]][:2] == ["echo", "slow"]
    assert page["ttlMs"] > 0 and page["cacheScope"] == "public" and page["resultType"] == "complete"
    result = server.call("tools/call", {"_meta": modern_meta(), "name": "echo", "arguments": {"msg": "x"}})["result"]
    assert result["content"][0]["text"] == "x\n" and result["resultType"] == "complete"
    assert "io.modelcontextprotocol/serverInfo" in result["_meta"]
    bad = server.call("tools/call", {"_meta": modern_meta(), "name": "echo", "arguments": {"msg": 1}})["result"]
    assert bad["isError"] is True
    unknown = server.call("tools/call", {"_meta": modern_meta(), "name": "nope", "arguments": {}})
    assert unknown["error"]["code"] == -32602


def test_meta_validation_order(server: Server) -> None:
    missing = server.call("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    assert missing["error"]["code"] == -32602
    old = server.call("tools/list", {"_meta": modern_meta() | {"io.modelcontextprotocol/protocolVersion": "1900-01-01"}})
    assert old["error"]["code"] == -32022
    assert old["error"]["data"]["requested"] == "1900-01-01"
    assert "2026-07-28" in old["error"]["data"]["supported"]
    assert server.call("ping", {"_meta": modern_meta()})["error"]["code"] == -32601
    for removed in ("logging/setLevel", "resources/subscribe", "resources/unsubscribe", "tasks/result", "tasks/list"):
        assert server.call(removed, {"_meta": modern_meta()})["error"]["code"] in (-32601, -32021)
    assert server.call("server/discover", {"_meta": modern_meta()})["result"]["resultType"] == "complete"


def test_structured_any_json(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.arr]\ncommand = ["echo", "[1, 2, 3]"]\noutput = "json"\noutput_schema = { type = "array" }\n')
    with Server(tools, tmp_path) as s:
        listed = s.call("tools/list", {"_meta": modern_meta()})["result"]["tools"][0]
        assert listed["outputSchema"] == {"type": "array"}
        result = s.call("tools/call", {"_meta": modern_meta(), "name": "arr", "arguments": {}})["result"]
        assert result["structuredContent"] == [1, 2, 3]
        s.initialize("2025-11-25")
        legacy = s.call("tools/list")["result"]["tools"][0]
        assert "outputSchema" not in legacy
        assert "structuredContent" not in s.call("tools/call", {"name": "arr", "arguments": {}})["result"]


def test_logging_and_progress_only_when_asked(server: Server) -> None:
    notes: list = []
    server.response(server.request("tools/call", {"_meta": modern_meta(), "name": "slow", "arguments": {}}), notes=notes)
    assert notes == []
    meta = modern_meta(**{"io.modelcontextprotocol/logLevel": "info", "progressToken": 7})
    rid = server.request("tools/call", {"_meta": meta, "name": "slow", "arguments": {}})
    server.pending[7] = server.pending[rid]
    server.response(rid, notes=notes)
    assert [n["params"]["progress"] for n in notes if n["method"] == "notifications/progress"] == [1, 2, 3, 4, 5]
    assert len([n for n in notes if n["method"] == "notifications/message"]) == 5
    notes.clear()
    warn = modern_meta(**{"io.modelcontextprotocol/logLevel": "warning"})
    server.response(server.request("tools/call", {"_meta": warn, "name": "slow", "arguments": {}}), notes=notes)
    assert notes == []


def test_legacy_state_does_not_leak_into_modern(server: Server) -> None:
    server.initialize("2025-06-18")
    server.call("logging/setLevel", {"level": "debug"})
    notes: list = []
    server.response(server.request("tools/call", {"_meta": modern_meta(), "name": "slow", "arguments": {}}), notes=notes)
    assert notes == []                                  # the session's level is not this request's
    modern_list = server.call("tools/list", {"_meta": modern_meta()})["result"]
    assert "title" in modern_list["tools"][0] and "resultType" in modern_list
    legacy_list = server.call("tools/list")["result"]
    assert "resultType" not in legacy_list and "ttlMs" not in legacy_list


def test_listen_filters_and_teardown(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text('[tools.a]\ncommand = ["true"]\n')
    with Server(tools, tmp_path) as s:
        s.request("subscriptions/listen", {"_meta": modern_meta(), "notifications": {"toolsListChanged": True}}, id="L1")
        ack = s.read()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        s.request("subscriptions/listen", {"_meta": modern_meta(), "notifications": {}}, id=2)
        ack2 = s.read()
        assert ack2["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 2
        assert ack2["params"]["notifications"] == {}
        write_atomically(tools, '[tools.a]\ncommand = ["true"]\n[tools.b]\ncommand = ["true"]\n')
        changed = s.read()
        assert changed["method"] == "notifications/tools/list_changed"
        assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
        s.no_message(1.0)
        s.notify("notifications/cancelled", {"requestId": 2})
        s.proc.stdin.close()
        cancel = s.read()
        assert cancel["method"] == "notifications/cancelled" and cancel["params"]["requestId"] == "L1"
        final = s.read()
        assert final["id"] == "L1" and final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
        assert s.proc.wait(30) == 0


def test_modern_cancel(server: Server) -> None:
    rid = server.request("tools/call", {"_meta": modern_meta(), "name": "sleeper", "arguments": {}})
    groups = server.tool_groups()
    server.notify("notifications/cancelled", {"requestId": rid})
    until(lambda: not any(procs.group_alive(g) for g in groups),
          lambda: "the cancelled tool's group to die; stderr:\n" + "".join(server.stderr))
    notes: list = []
    assert server.response(server.request("server/discover", {"_meta": modern_meta()}), notes=notes)["result"]
    assert not [n for n in notes if n.get("id") == rid]                 # a cancelled call is never answered
