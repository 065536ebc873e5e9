"""What one credential created answers only to it (issue 24, class 5).

Two bearer tokens, A and B, on one real `serve --http --token-file`: B cannot reach A's legacy
session (POST, GET, DELETE), A's tasks (tasks/list, get, result, cancel, update, in 2025-11-25
and in the 2026-07-28 extension) nor A's `requestState`. Each is answered exactly as if it did
not exist — the same status and error as an unknown session id, an unknown task id or a
tampered requestState — and nothing runs.

The spec's words:
- 2025-11-25 basic/utilities/tasks.mdx, "Task Isolation and Access Control": "When an
  authorization context is provided, receivers **MUST** bind tasks to said context." and "If
  context-binding is available, receivers **MUST** reject `tasks/get`, `tasks/result`, and
  `tasks/cancel` requests for tasks that do not belong to the same authorization context as
  the requestor. For `tasks/list` requests, receivers **MUST** ensure the returned task list
  includes only tasks associated with the requestor's authorization context."
- the same section: "receivers that cannot identify requestors **SHOULD NOT** declare the
  `tasks.list` capability, as listing tasks would expose task metadata to any requestor
  regardless of task ID entropy."
- ext-tasks/tasks.md, "Security Considerations": "**Auth binding.** Servers **MUST** perform
  authentication and authorization checks on each task-related request to ensure that the
  client has permission to access a task." (The extension has no tasks/list.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.harness import MODERN, Server, modern_meta, until
from tests.httpharness import Answer, HttpServer, modern_headers

TOOLS = Path(__file__).parents[2] / "fixtures" / "http.toml"
LEGACY = "2025-11-25"
TOKEN_A, TOKEN_B = "token-of-alice-0123456789", "token-of-bob-0123456789"
EXT = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
UNKNOWN_TASK = "A" + "b" * 21 + "c"       # well-formed, never issued


class Client:
    """One credential on a shared server: its own bearer token and its own legacy session."""

    def __init__(self, server: HttpServer, token: str) -> None:
        self.server, self.token = server, token
        self.session: str | None = None
        self.rev = LEGACY

    def send(self, message: Any, method: str = "POST", session: str | None = None,
             headers: dict[str, str] | None = None, rev: str | None = None) -> Answer:
        self.server.session, self.server.rev = session or self.session, self.rev
        return self.server.send(message, {"authorization": f"Bearer {self.token}", **(headers or {})}, rev, method)

    def initialize(self) -> None:
        opened = self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        self.session = opened.headers["mcp-session-id"]
        assert self.send({"jsonrpc": "2.0", "method": "notifications/initialized"}).status == 202

    def legacy(self, method: str, params: dict[str, Any] | None = None, id: int = 1,
               session: str | None = None) -> Answer:
        return self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}, session=session)

    def modern(self, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None, id: int = 1) -> Answer:
        params = {**params, "_meta": modern_meta(caps)}
        return self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params},
                         headers=modern_headers(method, params), rev=MODERN)


@pytest.fixture
def pair(tmp_path: Path) -> Any:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_A}\n{TOKEN_B}\n")
    tokens.chmod(0o600)
    with HttpServer(TOOLS, tmp_path, "--token-file", str(tokens)) as server:
        yield Client(server, TOKEN_A), Client(server, TOKEN_B)


def _error(answer: Answer) -> dict[str, Any]:
    return answer.final["error"]


# --- sessions -------------------------------------------------------------------------------
def test_a_session_answers_only_to_the_token_that_opened_it(pair: tuple[Client, Client], tmp_path: Path) -> None:
    alice, bob = pair
    alice.initialize()
    assert alice.session is not None
    unknown = bob.legacy("tools/list", session="no-such-session-" + "x" * 32)
    assert unknown.status == 404
    marker = tmp_path / "touched"
    call = {"name": "touch", "arguments": {"path": str(marker)}}
    into = bob.legacy("tools/call", call, session=alice.session)
    assert (into.status, into.body) == (unknown.status, unknown.body)     # as if it did not exist
    assert not marker.exists()                                            # and nothing ran
    assert bob.legacy("tools/list", session=alice.session).status == 404
    assert bob.send(None, method="GET", session=alice.session).status == 404
    assert bob.send(None, method="DELETE", session=alice.session).status == 404
    assert alice.legacy("tools/list").status == 200                      # still alice's, still open
    assert alice.legacy("tools/call", call).status == 200
    assert marker.read_text() == "run\n"
    assert alice.send(None, method="DELETE").status == 204


# --- tasks: 2025-11-25 ------------------------------------------------------------------------
def test_legacy_tasks_answer_only_to_their_creator(pair: tuple[Client, Client], tmp_path: Path) -> None:
    alice, bob = pair
    alice.initialize()
    bob.initialize()
    go = tmp_path / "go"
    created = alice.legacy("tools/call", {"name": "gated", "arguments": {"go": str(go)}, "task": {}})
    task_id = created.final["result"]["task"]["taskId"]
    mine = alice.legacy("tasks/list").final["result"]["tasks"]
    assert [t["taskId"] for t in mine] == [task_id]
    assert alice.legacy("tasks/get", {"taskId": task_id}).final["result"]["status"] == "working"

    assert bob.legacy("tasks/list").final["result"]["tasks"] == []
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        unknown = _error(bob.legacy(method, {"taskId": UNKNOWN_TASK}))
        assert _error(bob.legacy(method, {"taskId": task_id})) == unknown, method

    assert alice.legacy("tasks/get", {"taskId": task_id}).final["result"]["status"] == "working"   # not cancelled
    go.touch()
    result = alice.legacy("tasks/result", {"taskId": task_id}).final["result"]
    assert result["content"][0]["text"].strip() == "done"


def test_tasks_list_shows_only_the_callers_tasks(pair: tuple[Client, Client], tmp_path: Path) -> None:
    """Interleaved creations: each caller's list holds its own tasks, in order, and none of the other's."""
    alice, bob = pair
    alice.initialize()
    bob.initialize()
    go = tmp_path / "go"
    made: dict[str, list[str]] = {"a": [], "b": []}
    for i in range(3):
        for name, client in (("a", alice), ("b", bob)):
            answer = client.legacy("tools/call", {"name": "gated", "arguments": {"go": str(go)}, "task": {}}, id=10 + i)
            made[name].append(answer.final["result"]["task"]["taskId"])
    for name, client in (("a", alice), ("b", bob)):
        listed = [t["taskId"] for t in client.legacy("tasks/list").final["result"]["tasks"]]
        assert listed == made[name]
    go.touch()


# --- tasks: the 2026-07-28 extension ----------------------------------------------------------
def test_extension_tasks_answer_only_to_their_creator(pair: tuple[Client, Client], tmp_path: Path) -> None:
    alice, bob = pair
    go = tmp_path / "go"
    created = alice.modern("tools/call", {"name": "gated", "arguments": {"go": str(go)}}, EXT)
    assert created.final["result"]["resultType"] == "task", created.final
    task_id = created.final["result"]["taskId"]
    for method, extra in (("tasks/get", {}), ("tasks/cancel", {}), ("tasks/update", {"inputResponses": {}})):
        unknown = bob.modern(method, {"taskId": UNKNOWN_TASK, **extra}, EXT)
        theirs = bob.modern(method, {"taskId": task_id, **extra}, EXT)
        assert (theirs.status, _error(theirs)) == (unknown.status, _error(unknown)), method
    assert alice.modern("tasks/get", {"taskId": task_id}, EXT).final["result"]["status"] == "working"
    go.touch()
    done = until(lambda: (r := alice.modern("tasks/get", {"taskId": task_id}, EXT).final["result"])["status"]
                 == "completed" and r, "alice's task to complete")
    assert done["result"]["content"][0]["text"].strip() == "done"


# --- requestState ------------------------------------------------------------------------------
def test_a_request_state_issued_to_one_token_runs_nothing_for_another(pair: tuple[Client, Client],
                                                                      tmp_path: Path) -> None:
    alice, bob = pair
    marker = tmp_path / "made"
    params = {"name": "create", "arguments": {"path": str(marker)}}
    caps = {"elicitation": {"form": {}}}
    asked = alice.modern("tools/call", params, caps).final["result"]
    assert asked["resultType"] == "input_required"
    (key,) = asked["inputRequests"]
    accept = {key: {"action": "accept", "content": {"confirm": True}}}
    state = asked["requestState"]
    tampered = bob.modern("tools/call", {**params, "requestState": state[:-2] + ("A" if state[-2] != "A" else "B")
                                         + state[-1], "inputResponses": accept}, caps)
    replayed = bob.modern("tools/call", {**params, "requestState": state, "inputResponses": accept}, caps)
    assert _error(replayed)["code"] == -32602
    assert (replayed.status, _error(replayed)) == (tampered.status, _error(tampered))
    assert not marker.exists()                                         # nothing ran for bob
    done = alice.modern("tools/call", {**params, "requestState": state, "inputResponses": accept}, caps, id=2)
    assert done.final["result"]["resultType"] == "complete", done.final  # bob's try did not use it up
    assert marker.read_text() == "run\n"


# --- where requestors cannot be told apart ---------------------------------------------------
def _legacy_caps(server: HttpServer, headers: dict[str, str] | None = None) -> dict[str, Any]:
    answer = server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, headers, LEGACY)
    server.session = answer.headers["mcp-session-id"]
    return answer.final["result"]["capabilities"]


def test_tasks_list_is_declared_only_where_requestors_are_told_apart(tmp_path: Path) -> None:
    """Over stdio the one client is the user who owns the store: it keeps tasks.list (see README)."""
    stdio = Server(TOOLS, tmp_path)
    try:
        assert stdio.initialize(LEGACY)["result"]["capabilities"]["tasks"]["list"] == {}
    finally:
        stdio.close()
    with HttpServer(TOOLS, tmp_path) as server:                         # loopback, no token file
        assert "list" not in _legacy_caps(server)["tasks"]
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert server.legacy("tasks/list").final["error"]["code"] == -32601
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN_A + "\n")
    tokens.chmod(0o600)
    with HttpServer(TOOLS, tmp_path, "--token-file", str(tokens)) as server:
        assert _legacy_caps(server, {"authorization": f"Bearer {TOKEN_A}"})["tasks"]["list"] == {}


# --- output kept in the spool ----------------------------------------------------------------
LOUD = """
[tools.loud]
description = "Writes more than it may return"
command = ["sh", "-c", "i=0; while [ $i -lt 400 ]; do echo line-$i; i=$((i+1)); done"]
max_output = "1KiB"
"""


def test_kept_output_answers_only_to_the_token_whose_call_made_it(tmp_path: Path) -> None:
    tools, tokens = tmp_path / "loud.toml", tmp_path / "tokens"
    tools.write_text(LOUD)
    tokens.write_text(f"{TOKEN_A}\n{TOKEN_B}\n")
    tokens.chmod(0o600)
    with HttpServer(tools, tmp_path, "--token-file", str(tokens)) as server:
        alice, bob = Client(server, TOKEN_A), Client(server, TOKEN_B)
        result = alice.modern("tools/call", {"name": "loud", "arguments": {}}).final["result"]
        uri = next(b["uri"] for b in result["content"] if b.get("type") == "resource_link" and "stdout" in b["uri"])
        unknown = uri.replace(uri.split("/")[3], "0" * 32)
        assert "line-399" in alice.modern("resources/read", {"uri": uri}).final["result"]["contents"][0]["text"]
        theirs, none = (bob.modern("resources/read", {"uri": u}) for u in (uri, unknown))
        assert "error" in none.final
        assert (theirs.status, _error(theirs)["code"], _error(theirs)["message"]) == (
            none.status, _error(none)["code"], _error(none)["message"])
