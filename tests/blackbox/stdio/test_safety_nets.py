"""The drivers' safety nets: a bug costs the request it hit, never the server (issue 24, class 1).

The core has its own net (tests/unit/protocol/test_core_fuzz.py); these are the ones around it, each met by a real
bug planted in the server it ships (tests/injected_bug.py, or a `Core` subclass for the front in
memory): a `Core.receive` that raises, which only a driver can catch (`common.received` for the
front and the trio stdio driver, `Hub.__call__` over HTTP), and a performer that raises while
carrying out a `ReadResource` (`Driver.perform`, on stdio and over HTTP). Each promises the same:
the request is answered -32603 (inside its batch's array when batched; over HTTP a JSON-RPC body,
500 for a 2026-07-28 request, 200 in a legacy session), exactly one line of stderr names the bug
(what failed, the exception, where), and the next request is answered as usual.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.serve import common
from mcpwrap.protocol import jsonrpc
from mcpwrap.config.load import loads
from mcpwrap.serve.common import SecretSource
from mcpwrap.serve.front import Front
from mcpwrap.protocol.core import Action, Core
from tests import harness, httpharness
from tests.harness import HANG_S, Server, until
from tests.httpharness import HttpServer
from tests.injected_bug import BUG

TOOLS = """
[tools.echo]
command = ["echo", "{msg}"]
args.msg = { type = "string" }
[resources.status]
uri = "svc://status"
command = ["echo", "ok"]
"""
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tests", "version": "1"}}
READ = {"uri": "svc://status"}
INTERNAL = jsonrpc.INTERNAL_ERROR


def request(id: int | None, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, **({"id": id} if id is not None else {}),
            **({"params": params} if params is not None else {})}


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def bug_line(stderr: list[str], *names: str) -> str:
    """The one stderr line that reports the bug; it names the exception and what it cost."""
    reports = [x for x in "".join(stderr).splitlines() if "internal error" in x or "InjectedBug" in x]
    assert len(reports) == 1, "expected one line about the bug; stderr:\n" + "".join(stderr)
    assert all(name in reports[0] for name in ("InjectedBug", *names)), reports[0]
    return reports[0]


def is_internal(answer: dict[str, Any], id: int) -> bool:
    return answer.get("id") == id and answer.get("error", {}).get("code") == INTERNAL


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    return path


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Servers started by the harnesses run mcpwrap's CLI through tests/injected_bug.py."""
    def command(*args: str) -> list[str]:
        return [sys.executable, "-m", "tests.injected_bug", *args]
    monkeypatch.setattr(harness, "mcpwrap_cmd", command)
    monkeypatch.setattr(httpharness, "mcpwrap_cmd", command)
    monkeypatch.chdir(Path(__file__).parents[3])          # where `tests` is importable
    yield


# --- the front, before trio: in memory, over pipes ----------------------------------------------
class BuggedCore(Core):
    """A core whose `receive` raises once, for the first message holding a tools/list request."""
    fired = False

    def receive(self, message: jsonrpc.Message) -> list[Action]:
        items = message.items if isinstance(message, jsonrpc.Batch) else (message,)
        if not self.fired and any(isinstance(m, jsonrpc.Request) and m.method == "tools/list" for m in items):
            self.fired = True
            raise RuntimeError("InjectedBug in Core.receive")
        return super().receive(message)


@pytest.mark.parametrize("batched", [False, True])
def test_the_front_answers_a_bug_in_core_receive_with_32603_and_serves_on(tmp_path: Path, tools: Path,
                                                                          capfd: pytest.CaptureFixture[str],
                                                                          batched: bool) -> None:
    core = BuggedCore(loads(tools.read_bytes(), tools), SecretSource(tmp_path / "secret"), time.time)
    bugged = [request(2, "tools/list"), request(3, "ping")] if batched else request(2, "tools/list")
    stream = b"".join(line(m) for m in (request(1, "initialize", INIT), request(None, "notifications/initialized"),
                                        bugged, request(4, "tools/list")))
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    wake_r, wake_w = os.pipe()
    try:
        os.write(in_w, stream)
        with Front(core, in_r, out_w) as front:
            front.answer_waiting(wake_r)              # the front, synchronously: trio is not involved
            while front.output:
                front._poll(wake_r, HANG_S, reading=False)
        os.close(out_w)
        answers = [json.loads(x) for x in os.read(out_r, 1 << 20).splitlines()]
    finally:
        for fd in (in_r, in_w, out_r, wake_r, wake_w):
            os.close(fd)
    common.stderr.flush(HANG_S)
    assert [a["id"] if isinstance(a, dict) else [i["id"] for i in a] for a in answers] == [
        1, [2, 3] if batched else 2, 4]
    bugged_answers = answers[1] if batched else [answers[1]]
    assert all(is_internal(a, a["id"]) for a in bugged_answers), answers[1]
    assert [t["name"] for t in answers[2]["result"]["tools"]] == ["echo"]      # the next one: as usual
    bug_line([capfd.readouterr().err], "batch of 2" if batched else "tools/list")


# --- the trio stdio driver ----------------------------------------------------------------------
def test_the_stdio_driver_answers_a_bug_in_core_receive_with_32603_and_serves_on(tmp_path: Path, tools: Path,
                                                                                 planted: None) -> None:
    with Server(tools, tmp_path, env={BUG: "receive:tools/list"}) as server:
        server.initialize()
        # a call needs the driver: the front stops at it, so what follows is trio's to decide (serve/front.py)
        server.request("tools/call", {"name": "echo", "arguments": {"msg": "hi"}}, id=2)
        server.request("tools/list", id=3)
        called, failed = server.responses([2, 3])
        assert called["result"]["content"][0]["text"] == "hi\n"
        assert is_internal(failed, 3), failed
        assert [t["name"] for t in server.call("tools/list")["result"]["tools"]] == ["echo"]
        server.wait_stderr("InjectedBug")
        bug_line(server.stderr, "tools/list")
        assert server.close() == 0


@pytest.mark.parametrize("batched", [False, True])
def test_a_bug_carrying_out_an_action_costs_its_request_only(tmp_path: Path, tools: Path, planted: None,
                                                             batched: bool) -> None:
    with Server(tools, tmp_path, env={BUG: "perform:ReadResource"}) as server:
        server.initialize("2025-03-26")               # the one revision with batches
        if batched:
            server.pending.update({2: ("resources/read", server.rev or ""), 3: ("tools/list", server.rev or "")})
            server.raw(line([request(2, "resources/read", READ), request(3, "tools/list")]))
            answer = server.read()
            assert isinstance(answer, list) and {a["id"] for a in answer} == {2, 3}, answer
            by_id = {a["id"]: a for a in answer}
            assert is_internal(by_id[2], 2) and [t["name"] for t in by_id[3]["result"]["tools"]] == ["echo"], answer
        else:
            assert is_internal(server.call("resources/read", READ), server.next_id)
        assert server.call("resources/read", READ)["result"]["contents"][0]["text"] == "ok\n"
        server.wait_stderr("InjectedBug")
        bug_line(server.stderr, "ReadResource")
        assert server.close() == 0


# --- HTTP: the hub's net, and Driver.perform under it ---------------------------------------------
def http_bug(server: HttpServer, *names: str) -> None:
    """The bug's one line, then stderr forgotten (HttpServer.close refuses a log with a bug in it)."""
    until(lambda: any("InjectedBug" in x for x in server.stderr), lambda: "the bug's line:\n" + "".join(server.stderr))
    bug_line(server.stderr, *names)
    server.stderr.clear()


def test_a_legacy_session_request_that_meets_a_bug_gets_32603_and_the_session_serves_on(tmp_path: Path,
                                                                                       tools: Path,
                                                                                       planted: None) -> None:
    with HttpServer(tools, tmp_path, env={BUG: "receive:tools/list"}) as server:
        server.initialize()
        failed = server.legacy("tools/list", id=1)
        assert failed.status == 200 and failed.headers["content-type"] == "application/json", failed
        assert is_internal(failed.final, 1), failed
        assert [t["name"] for t in server.legacy("tools/list", id=2).final["result"]["tools"]] == ["echo"]
        http_bug(server, "tools/list")


def test_a_2026_07_28_request_that_meets_a_bug_gets_a_500_with_32603_and_the_server_serves_on(
        tmp_path: Path, tools: Path, planted: None) -> None:
    with HttpServer(tools, tmp_path, env={BUG: "receive:tools/list"}) as server:
        failed = server.modern("tools/list", id=1)
        assert failed.status == 500 and failed.headers["content-type"] == "application/json", failed
        assert is_internal(failed.final, 1), failed
        again = server.modern("tools/list", id=1)
        assert again.status == 200 and [t["name"] for t in again.final["result"]["tools"]] == ["echo"], again
        http_bug(server, "tools/list")


@pytest.mark.parametrize("bug", ["receive:tools/list", "perform:ReadResource"])
def test_a_batch_that_meets_a_bug_over_http_gets_32603_in_its_array(tmp_path: Path, tools: Path, planted: None,
                                                                    bug: str) -> None:
    with HttpServer(tools, tmp_path, env={BUG: bug}) as server:
        server.initialize("2025-03-26")               # the one revision with batches
        answer = server.send([request(1, "resources/read", READ), request(2, "tools/list")])
        assert answer.status == 200 and len(answer.messages) == 1 and isinstance(answer.final, list), answer
        by_id = {a["id"]: a for a in answer.final}
        assert set(by_id) == {1, 2}, answer
        if bug.startswith("receive"):                 # the whole batch met the bug: each request is answered so
            assert is_internal(by_id[1], 1) and is_internal(by_id[2], 2), answer
        else:                                         # only the read met it
            assert is_internal(by_id[1], 1) and by_id[2]["result"]["tools"][0]["name"] == "echo", answer
        again = server.send([request(3, "resources/read", READ), request(4, "tools/list")])
        assert {a["id"]: "result" in a for a in again.final} == {3: True, 4: True}, again
        http_bug(server, "batch of 2" if bug.startswith("receive") else "ReadResource")
