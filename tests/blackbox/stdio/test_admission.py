"""Issue 24, class 3: one server-wide admission ledger, whatever the transport.

Calls running, calls waiting and the request bytes of the waiting ones are counted once per
server process: over HTTP every legacy session and every 2026-07-28 POST draws from the same
waiting room, its bytes fed by each POST body, and the excess gets the refusal stdio gives.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.serve import admission as server_module
from tests.harness import Server, until
from tests.httpharness import Answer, HttpServer, modern_headers, modern_meta

MiB = 1024 * 1024
TOOLS = """
[tools.hold]
description = "says it started, then waits until a go-file exists"
shell = 'touch "$GO.started"; while [ ! -e "$GO" ]; do sleep 0.05; done; echo released'
"""


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    return path


def _call(id: Any, pad: str = "") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "hold", "arguments": {}, **({"padding": pad} if pad else {})}}


def _modern(id: Any, pad: str = "") -> tuple[dict[str, Any], dict[str, str]]:
    message = _call(id, pad)
    message["params"]["_meta"] = modern_meta()
    return message, modern_headers("tools/call", message["params"])


def _padded(make: Callable[[str], dict[str, Any]], size: int) -> dict[str, Any]:
    """The message `make(pad)` with its pad grown so that its body is exactly `size` bytes."""
    bare = len(json.dumps(make("x")).encode()) - 1
    message = make("x" * (size - bare))
    assert len(json.dumps(message).encode()) == size
    return message


def _refused(item: dict[str, Any]) -> bool:
    result = item.get("result", {})
    return result.get("isError") is True and "mcpwrap is at its limit" in result["content"][0]["text"]


def _released(item: dict[str, Any]) -> bool:
    return item.get("result", {}).get("content", [{}])[0].get("text") == "released\n"


class Posts:
    """POSTs sent from threads (each waits for its answer), their answers kept as they come."""

    def __init__(self, server: HttpServer) -> None:
        self.server, self.threads, self.answers = server, list[threading.Thread](), list[Answer]()

    def post(self, message: Any, session: str | None = None, headers: dict[str, str] | None = None,
             rev: str = "2025-03-26") -> None:
        extra = {**({"mcp-session-id": session} if session else {}), **(headers or {})}
        thread = threading.Thread(target=lambda: self.answers.append(self.server.send(message, extra, rev)),
                                  daemon=True)
        thread.start()
        self.threads.append(thread)

    def items(self) -> list[dict[str, Any]]:
        return [i for a in list(self.answers) for m in a.messages for i in (m if isinstance(m, list) else [m])]

    def join(self) -> list[dict[str, Any]]:
        for thread in self.threads:
            thread.join(60)
            assert not thread.is_alive()
        return self.items()


def _sessions(server: HttpServer, count: int) -> list[str]:
    found = []
    for _ in range(count):
        server.initialize("2025-03-26")
        assert server.session is not None
        found.append(server.session)
    return found


def test_waiting_calls_of_every_session_and_post_share_one_room(tools: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    room = 1 + server_module.QUEUED_PER_SLOT              # --max-calls 1: one running, 64 waiting
    with HttpServer(tools, tmp_path, "--max-calls", "1", "--no-watch", "--log-level", "debug",
                    env={"GO": str(go)}) as server:
        first, second = _sessions(server, 2)
        posts = Posts(server)
        message, headers = _modern("running")
        posts.post(message, headers=headers, rev="2026-07-28")
        until(lambda: Path(f"{go}.started").exists(), "the first call to run")
        for session, name in ((first, "a"), (second, "b")):    # 60 waiting calls in two sessions' batches
            posts.post([_call(f"{name}{n}") for n in range(30)], session)
            until(lambda: any(f'"{name}29"' in line for line in server.stderr), f"batch {name} to be read")
        for n in range(5):                                     # and 8 single calls: 4 fit, 4 do not
            message, headers = _modern(f"m{n}")
            posts.post(message, headers=headers, rev="2026-07-28")
        for n in range(3):
            posts.post(_call(f"s{n}"), first)
        refused = room - 1 - 60
        until(lambda: sum(map(_refused, posts.items())) == 8 - refused, "the calls past the room to be refused")
        go.touch()
        items = posts.join()
        assert len(items) == 1 + 60 + 8
        assert sum(map(_refused, items)) == 8 - refused and sum(map(_released, items)) == room
        assert not any(_refused(i) for i in items if str(i["id"])[0] in "ab")


def test_waiting_bytes_are_counted_from_every_post_body(tools: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    size = 3 * MiB                                         # 10 of these fit in 32 MiB, 12 are sent
    with HttpServer(tools, tmp_path, "--max-calls", "1", "--no-watch", env={"GO": str(go)}) as server:
        sessions = _sessions(server, 2)
        posts = Posts(server)
        message, headers = _modern("running")
        posts.post(message, headers=headers, rev="2026-07-28")
        until(lambda: Path(f"{go}.started").exists(), "the first call to run")
        for n in range(6):
            modern = _padded(lambda pad, n=n: _modern(f"m{n}", pad)[0], size)
            posts.post(modern, headers=modern_headers("tools/call", modern["params"]), rev="2026-07-28")
            posts.post(_padded(lambda pad, n=n: _call(f"s{n}", pad), size), sessions[n % 2])
        fits = server_module.WAITING_BYTES // size
        until(lambda: sum(map(_refused, posts.items())) == 12 - fits, "the bodies past 32 MiB to be refused")
        go.touch()
        items = posts.join()
        assert len(items) == 13 and sum(map(_refused, items)) == 12 - fits
        assert sum(map(_released, items)) == 1 + fits, [json.dumps(i)[:300] for i in items]


def test_reads_that_need_a_slot_wait_in_the_same_room(tmp_path: Path) -> None:
    """A resource read that runs a command takes a slot, so past the waiting room it is refused too."""
    go = tmp_path / "go"
    tools = tmp_path / "tools.toml"
    tools.write_text(TOOLS + '[resources.status]\nuri = "svc://status"\ncommand = ["echo", "ok"]\n')
    with Server(tools, tmp_path, "--max-calls", "1", "--no-watch", env={"GO": str(go)}) as server:
        server.initialize()
        held = [server.request("tools/call", {"name": "hold", "arguments": {}})
                for _ in range(1 + server_module.QUEUED_PER_SLOT)]
        refused = server.call("resources/read", {"uri": "svc://status"})
        assert refused["error"]["code"] == -32603 and "mcpwrap is at its limit" in refused["error"]["message"]
        go.touch()
        assert all(_released(answer) for answer in server.responses(held))
        assert server.call("resources/read", {"uri": "svc://status"})["result"]["contents"][0]["text"] == "ok\n"
