"""The protocol core in memory: messages in, actions out, no process, no event loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpwrap.config import load as config
from mcpwrap.protocol import jsonrpc, sealing
from mcpwrap.state import signing
from mcpwrap.protocol.actions import (CancelCall, CancelTimer, Once, ResolvePaths, Send, StartCall, StartTimer, Stderr,
                                      TaskOp)
from mcpwrap.protocol.core import Core
from mcpwrap.protocol.revisions import TASKS_EXTENSION
from mcpwrap.protocol.task_requests import TaskFound, TaskNotFound
from mcpwrap.protocol.tasking import TaskRecord
from mcpwrap.result import Text, ToolResult
from tests import mcpschema
from tests.harness import modern_meta

TOOLS = b"""
[server]
name = "core"
[tools.echo]
command = ["echo", "{msg}"]
args.msg = { type = "string" }
[tools.deploy]
command = ["echo", "deploying", "{target}"]
confirm = "Deploy to {target}?"
args.target = { type = "string", enum = ["staging", "prod"] }
[tools.ask]
command = ["echo", "{name}", "{count}"]
args.name = { type = "string", elicit = true, description = "who" }
args.count = { type = "integer", default = 1, elicit = true }
[tools.sh]
shell = 'printf "%s" "$MCP_ARG_TEXT"'
args.text = { type = "string" }
[tools.job]
command = ["echo", "{n}"]
task = "optional"
args.n = { type = "integer" }
"""
KEYRING = signing.Keyring(b"k" * 32)


class Ledger:
    """An in-memory NonceLedger: the nonces consumed, in order."""

    def __init__(self) -> None:
        self.used: list[Once] = []

    def consume(self, nonce: str, expires_at: float, now: float) -> bool:
        assert expires_at > now
        if any(nonce == seen for seen, _ in self.used):
            return False
        self.used.append(Once(nonce, expires_at))
        return True


def make_core(now: float = 1000.0, **kwargs: Any) -> Core:
    cfg = config.loads(TOOLS, Path("/tmp/core.toml"))
    clock = {"now": now}
    core = Core(cfg, lambda: KEYRING, lambda: clock["now"], **kwargs)
    core.test_clock = clock  # type: ignore[attr-defined]
    return core


def spend(core: Core, actions: list[Any], ledger: Ledger | OSError) -> list[Any]:
    """As a driver does just before a start: a StartCall (or task create) that carries a requestState's
    nonce starts only on the nonce's first use, else the core is told and answers in its place."""
    out: list[Any] = []
    for action in actions:
        once = action.once if isinstance(action, (StartCall, TaskOp)) else None
        if once is None:
            out.append(action)
            continue
        first = ledger if isinstance(ledger, OSError) else ledger.consume(once.nonce, once.expires_at, 1000.0)
        out += [action] if first is True else core.once_refused(action.ctx, first)
    return out


def feed(core: Core, message: dict[str, Any] | bytes) -> list[Any]:
    raw = message if isinstance(message, bytes) else orjson.dumps(message)
    return core.receive(jsonrpc.decode(raw))


def sent(actions: list[Any]) -> list[Any]:
    """The messages sent; a batch's array as the client reads it (its answers are held encoded)."""
    return [orjson.loads(jsonrpc.encode(a.message)) if isinstance(a.message, list) else a.message
            for a in actions if isinstance(a, Send)]


def request(id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, **({"params": params} if params is not None else {})}


def init(core: Core, version: str = "2025-11-25", caps: dict[str, Any] | None = None) -> None:
    out = sent(feed(core, request(0, "initialize", {"protocolVersion": version, "capabilities": caps or {},
                                                      "clientInfo": {"name": "t", "version": "1"}})))
    mcpschema.check(version, out[0], "initialize")
    feed(core, {"jsonrpc": "2.0", "method": "notifications/initialized"})


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_handshake_and_call_per_revision(version: str) -> None:
    core = make_core()
    init(core, version)
    actions = feed(core, request(1, "tools/call", {"name": "echo", "arguments": {"msg": "hi"}}))
    start = next(a for a in actions if isinstance(a, StartCall))
    assert start.arguments == {"msg": "hi"} and start.tool.name == "echo"
    done = sent(core.call_done(start.ctx, ToolResult((Text("hi\n"),))))
    mcpschema.check(version, done[0], "tools/call")
    assert done[0]["result"]["content"] == [{"type": "text", "text": "hi\n"}]


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_a_call_whose_command_ends_with_a_protocol_error_code_is_answered_with_the_error(version: str) -> None:
    core = make_core()
    meta: dict[str, Any] = {"_meta": modern_meta()} if version == "2026-07-28" else {}
    if not meta:
        init(core, version)
    start = next(a for a in feed(core, request(1, "tools/call", {**meta, "name": "echo", "arguments": {"msg": "x"}}))
                 if isinstance(a, StartCall))
    crashed = ToolResult((Text("[echo exited with status 2]"),), is_error=True, exit_code=2, protocol_error=True)
    done = sent(core.call_done(start.ctx, crashed))
    mcpschema.check(version, done[0], "tools/call")
    assert done[0]["error"] == {"code": -32603, "message": "[echo exited with status 2]", "data": {"exitCode": 2}}


def test_cancel_suppresses_response() -> None:
    core = make_core()
    init(core)
    start = feed(core, request(5, "tools/call", {"name": "echo", "arguments": {"msg": "x"}}))[0]
    actions = feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}})
    assert actions == [CancelCall(5)]
    assert core.call_done(start.ctx, ToolResult((Text(""),))) == []
    assert feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}) == []


def test_initialize_is_never_in_flight() -> None:
    core = make_core()
    feed(core, request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "1"}}))
    assert feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}) == []


def test_modern_confirm_round_trip_and_tampering() -> None:
    core = make_core()
    caps = {"elicitation": {}}
    params = {"_meta": modern_meta(caps), "name": "deploy", "arguments": {"target": "prod"}}
    first = sent(feed(core, request(1, "tools/call", params)))[0]
    mcpschema.check("2026-07-28", first, "tools/call")
    result = first["result"]
    assert result["resultType"] == "input_required"
    question = result["inputRequests"]["confirm"]
    assert question["method"] == "elicitation/create" and "prod" in question["params"]["message"]
    state = result["requestState"]
    # No answer yet: asked again, not an error.
    again = sent(feed(core, request(2, "tools/call", {**params, "requestState": state})))[0]
    assert again["result"]["resultType"] == "input_required"
    # Tampered state, other arguments, other tool: -32602 and nothing starts.
    for bad in ({**params, "requestState": state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]},
                {**params, "arguments": {"target": "staging"}, "requestState": state},
                {**params, "name": "echo", "arguments": {"msg": "x"}, "requestState": state}):
        actions = feed(core, request(3, "tools/call", {**bad, "inputResponses": {"confirm": {"action": "accept"}}}))
        assert not any(isinstance(a, StartCall) for a in actions)
        assert sent(actions)[0]["error"]["code"] == -32602
    declined = sent(feed(core, request(4, "tools/call", {**params, "requestState": state,
                                                           "inputResponses": {"confirm": {"action": "decline"}}})))[0]
    assert declined["result"]["isError"] is True and "declined" in declined["result"]["content"][0]["text"]
    accepted = feed(core, request(5, "tools/call", {**params, "requestState": state,
                                                    "inputResponses": {"confirm": {"action": "accept"}, "extra": 1}}))
    assert isinstance(accepted[0], StartCall) and accepted[0].arguments == {"target": "prod"}


def test_modern_state_expires() -> None:
    core = make_core()
    params = {"_meta": modern_meta({"elicitation": {}}), "name": "deploy", "arguments": {"target": "prod"}}
    state = sent(feed(core, request(1, "tools/call", params)))[0]["result"]["requestState"]
    core.test_clock["now"] += sealing.DEFAULT_STATE_TTL_S + 1  # type: ignore[attr-defined]
    out = sent(feed(core, request(2, "tools/call", {**params, "requestState": state,
                                                    "inputResponses": {"confirm": {"action": "accept"}}})))
    assert out[0]["error"]["code"] == -32602


def test_modern_without_elicitation_is_32021() -> None:
    core = make_core()
    out = sent(feed(core, request(1, "tools/call", {"_meta": modern_meta(), "name": "deploy",
                                                    "arguments": {"target": "prod"}})))[0]
    mcpschema.check("2026-07-28", out, "tools/call")
    assert out["error"]["code"] == -32021
    assert out["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}


def test_modern_elicits_missing_arguments() -> None:
    core = make_core()
    params = {"_meta": modern_meta({"elicitation": {"form": {}}}), "name": "ask", "arguments": {}}
    first = sent(feed(core, request(1, "tools/call", params)))[0]
    mcpschema.check("2026-07-28", first, "tools/call")
    form = first["result"]["inputRequests"]["arguments"]["params"]["requestedSchema"]
    assert form["properties"]["name"] == {"type": "string", "description": "who"}
    assert form["properties"]["count"] == {"type": "integer", "default": 1}
    assert form["required"] == ["name"]
    retry = {**params, "requestState": first["result"]["requestState"],
             "inputResponses": {"arguments": {"action": "accept", "content": {"name": "ada", "count": 3}}}}
    start = feed(core, request(2, "tools/call", retry))[0]
    assert isinstance(start, StartCall) and start.arguments == {"name": "ada", "count": 3}


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_legacy_elicitation_request(version: str) -> None:
    core = make_core()
    init(core, version, {"elicitation": {}})
    actions = feed(core, request(1, "tools/call", {"name": "deploy", "arguments": {"target": "staging"}}))
    ask = sent(actions)[0]
    mcpschema.check(version, ask)
    assert ask["method"] == "elicitation/create" and any(isinstance(a, StartTimer) for a in actions)
    answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {}}}
    done = feed(core, answer)
    assert done[0] == CancelTimer(ask["id"]) and isinstance(done[1], StartCall)


def test_legacy_elicitation_decline_and_timeout() -> None:
    core = make_core()
    init(core, "2025-11-25", {"elicitation": {}})
    ask = sent(feed(core, request(1, "tools/call", {"name": "deploy", "arguments": {"target": "prod"}})))[0]
    out = sent(feed(core, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}}))[0]
    assert out["id"] == 1 and out["result"]["isError"] is True
    ask = sent(feed(core, request(2, "tools/call", {"name": "deploy", "arguments": {"target": "prod"}})))[0]
    out = sent(core.timer(ask["id"]))
    assert out[0]["method"] == "notifications/cancelled"
    assert out[1]["id"] == 2 and out[1]["result"]["isError"] is True


def test_legacy_without_capability_refuses() -> None:
    for version, caps in (("2025-03-26", {"elicitation": {}}), ("2025-11-25", {})):
        core = make_core()
        init(core, version, caps)
        out = sent(feed(core, request(1, "tools/call", {"name": "deploy", "arguments": {"target": "prod"}})))[0]
        assert out["result"]["isError"] is True and "confirmation" in out["result"]["content"][0]["text"]


def test_notifications_held_until_initialized() -> None:
    core = make_core()
    feed(core, request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "1"}}))
    assert sent(core.reload(core.config)) == []
    feed(core, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert sent(core.reload(core.config))[0]["method"] == "notifications/tools/list_changed"


def test_tools_list_pagination() -> None:
    core = make_core(page_size=2)
    init(core)
    first = sent(feed(core, request(1, "tools/list")))[0]["result"]
    assert [t["name"] for t in first["tools"]] == ["echo", "deploy"]
    second = sent(feed(core, request(2, "tools/list", {"cursor": first["nextCursor"]})))[0]["result"]
    assert [t["name"] for t in second["tools"]] == ["ask", "sh"] and "nextCursor" in second
    for cursor in ("", "garbage", 3, first["nextCursor"] + "x"):
        assert sent(feed(core, request(3, "tools/list", {"cursor": cursor})))[0]["error"]["code"] == -32602


def test_task_request_refused_before_running_is_an_error_not_a_result() -> None:
    core = make_core()
    init(core, "2025-11-25")
    bad = sent(feed(core, request(1, "tools/call", {"name": "job", "arguments": {"n": "x"}, "task": {"ttl": 1000}})))[0]
    mcpschema.check("2025-11-25", bad, "tools/call")
    assert bad["error"]["code"] == -32602 and "nothing ran" in bad["error"]["message"]
    plain = sent(feed(core, request(2, "tools/call", {"name": "job", "arguments": {"n": "x"}})))[0]
    assert plain["result"]["isError"] is True


def test_batch_answers_broken_items_inside_the_array() -> None:
    core = make_core()
    init(core, "2025-03-26")
    out = sent(feed(core, b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"foo":1},{"jsonrpc":"2.0","method":"notifications/x"}]'))
    assert len(out) == 1 and isinstance(out[0], list)
    assert sorted(str(m.get("id")) for m in out[0]) == ["1", "None"]
    only_broken = sent(feed(core, b'[{"foo":1},{"jsonrpc":"2.0","method":"notifications/x"}]'))
    assert len(only_broken) == 1 and only_broken[0][0]["error"]["code"] == -32600
    only_notes = sent(feed(core, b'[{"jsonrpc":"2.0","method":"notifications/x"}]'))
    assert only_notes == []
    for message in out[0] + only_broken[0]:
        mcpschema.check("2025-03-26", message, "ping")


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_unsafe_value_for_a_shell_tool_is_refused_before_anything_starts(version: str) -> None:
    core = make_core()
    init(core, version)
    actions = feed(core, request(1, "tools/call", {"name": "sh", "arguments": {"text": "a\x00b"}}))
    assert not any(isinstance(a, StartCall) for a in actions)
    answer = sent(actions)[0]
    mcpschema.check(version, answer, "tools/call")
    if version == "2025-06-18":
        assert answer["error"]["code"] == -32602 and "NUL" in answer["error"]["message"]
    else:
        assert answer["result"]["isError"] is True and "NUL" in answer["result"]["content"][0]["text"]


# --- issue 11, class 8: one accepted confirmation, one run ---------------------------------
def _accept(core: Core, params: dict[str, Any], state: str, id: int) -> list[Any]:
    return feed(core, request(id, "tools/call", {**params, "requestState": state,
                                                 "inputResponses": {"confirm": {"action": "accept"}}}))


def test_an_accepted_request_state_runs_once() -> None:
    core, ledger = make_core(), Ledger()
    params = {"_meta": modern_meta({"elicitation": {}}), "name": "deploy", "arguments": {"target": "prod"}}
    state = sent(feed(core, request(1, "tools/call", params)))[0]["result"]["requestState"]
    # Retries that only ask again or are refused do not use the state up.
    assert sent(feed(core, request(2, "tools/call", {**params, "requestState": state})))[0]["result"]["resultType"] \
        == "input_required"
    declined = feed(core, request(3, "tools/call", {**params, "requestState": state,
                                                    "inputResponses": {"confirm": {"action": "decline"}}}))
    assert not any(isinstance(a, StartCall) for a in declined)
    accepted = _accept(core, params, state, 4)
    assert isinstance(accepted[0], StartCall) and accepted[0].once is not None
    assert spend(core, accepted, ledger) == accepted
    for replay_id in (5, 6):
        replay = spend(core, _accept(core, params, state, replay_id), ledger)
        assert not any(isinstance(a, StartCall) for a in replay)
        assert sent(replay) == [{"jsonrpc": "2.0", "id": replay_id,
                                 "error": {"code": -32602, "message": "invalid or expired requestState"}}]
        assert any("already used" in a.text for a in replay if isinstance(a, Stderr))
        assert replay_id not in core.inflight
    assert [exp for _, exp in ledger.used] == [1000.0 + sealing.DEFAULT_STATE_TTL_S]


def test_a_fresh_call_carries_no_nonce() -> None:
    core = make_core()
    start = feed(core, request(1, "tools/call", {"_meta": modern_meta(), "name": "echo", "arguments": {"msg": "x"}}))
    assert isinstance(start[0], StartCall) and start[0].once is None


def test_an_accepted_request_state_creates_one_task() -> None:
    core, ledger = make_core(), Ledger()
    cfg = config.loads(TOOLS.replace(b'[tools.job]', b'[tools.job]\nconfirm = "go?"'), Path("/tmp/core.toml"))
    core.config = cfg
    caps = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
    params = {"_meta": modern_meta(caps), "name": "job", "arguments": {"n": 1}}
    state = sent(feed(core, request(1, "tools/call", params)))[0]["result"]["requestState"]
    assert [a.op for a in spend(core, _accept(core, params, state, 2), ledger) if isinstance(a, TaskOp)] == ["create"]
    replay = spend(core, _accept(core, params, state, 3), ledger)
    assert not any(isinstance(a, TaskOp) for a in replay) and sent(replay)[0]["error"]["code"] == -32602


def test_an_unusable_ledger_runs_nothing() -> None:
    core = make_core()
    params = {"_meta": modern_meta({"elicitation": {}}), "name": "deploy", "arguments": {"target": "prod"}}
    state = sent(feed(core, request(1, "tools/call", params)))[0]["result"]["requestState"]
    actions = spend(core, _accept(core, params, state, 2), signing.LedgerError("nonce ledger /x/nonces is unsafe"))
    assert not any(isinstance(a, StartCall) for a in actions)
    assert sent(actions)[0]["error"]["code"] == -32603 and "nothing ran" in sent(actions)[0]["error"]["message"]
    assert any("/x/nonces" in a.text for a in actions if isinstance(a, Stderr))


# --- issue 11, class 6: every legacy question's timer ends with the question -------------
def test_every_start_timer_gets_its_cancel_timer() -> None:
    core = make_core()
    core.config = config.loads(TOOLS + b'[tools.both]\ncommand = ["echo", "{x}"]\nconfirm = "run {x}?"\n'
                                       b'args.x = { type = "string", elicit = true }\n', Path("/tmp/core.toml"))
    init(core, "2025-11-25", {"elicitation": {}})
    started: set[str] = set()
    ended: set[str] = set()

    def track(actions: list[Any]) -> list[Any]:
        started.update(a.key for a in actions if isinstance(a, StartTimer))
        ended.update(a.key for a in actions if isinstance(a, CancelTimer))
        return actions

    def ask(id: int, name: str = "deploy", arguments: dict[str, Any] | None = None) -> str:
        out = sent(track(feed(core, request(id, "tools/call", {"name": name, "arguments": {"target": "prod"} if arguments is None else arguments}))))
        return str(out[0]["id"])

    def answer(key: str, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> list[Any]:
        body = {"error": error} if error else {"result": result}
        return track(feed(core, {"jsonrpc": "2.0", "id": key, **body}))

    answer(ask(1), {"action": "accept"})
    answer(ask(2), {"action": "decline"})
    answer(ask(3), {"action": "cancel"})
    answer(ask(4), error={"code": -1, "message": "no"})
    answer(ask(5), {"action": "something else"})
    # Two questions in a row (the argument, then the confirmation): two timers, both ended.
    second = sent(answer(ask(6, "both", {}), {"action": "accept", "content": {"x": "y"}}))[0]
    answer(str(second["id"]), {"action": "accept"})
    withdrawn = ask(7)
    track(feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}))
    fired = ask(8)
    track(core.timer(fired))                    # the timer itself ended this one
    assert len(started) == 9 and withdrawn in ended
    assert started - ended == {fired} and not core.asks


# --- issue 11, class 9: every answer to a batch item inside that batch's array ------------
def _outside_arrays(actions: list[Any]) -> list[Any]:
    return [m for m in sent(actions) if isinstance(m, dict) and "method" not in m]


def test_duplicate_ids_in_a_batch_are_answered_inside_it() -> None:
    core = make_core()
    init(core, "2025-03-26")
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    out = sent(feed(core, b"[" + ping + b"," + ping + b"]"))
    assert len(out) == 1 and sorted(("error" in m, m["id"]) for m in out[0]) == [(False, 1), (True, 1)]
    call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"msg":"x"}}}'
    actions = feed(core, b"[" + call + b"," + call.replace(b'"x"', b'"y"') + b',{"jsonrpc":"2.0","id":2,"method":"ping"}]')
    starts = [a for a in actions if isinstance(a, StartCall)]
    assert len(starts) == 1 and sent(actions) == []     # the array waits for the call
    done = sent(core.call_done(starts[0].ctx, ToolResult((Text("x\n"),))))
    assert len(done) == 1 and [("error" in m, m["id"]) for m in done[0]] == [(True, 2), (True, 2), (False, 2)]
    for message in done[0]:
        mcpschema.check("2025-03-26", message, "tools/call")


def test_ids_in_use_inside_and_outside_a_batch() -> None:
    core = make_core()
    init(core, "2025-03-26")
    alone = feed(core, request(7, "tools/call", {"name": "echo", "arguments": {"msg": "a"}}))[0]
    batched = feed(core, b'[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":8,"method":"tools/call",'
                         b'"params":{"name":"echo","arguments":{"msg":"b"}}}]')
    assert _outside_arrays(batched) == [] and sent(batched) == []
    in_batch = next(a for a in batched if isinstance(a, StartCall))
    # A lone request reusing the id the batch waits for is refused alone; the batch still gets its answer.
    assert sent(feed(core, request(8, "ping")))[0]["error"]["code"] == -32600
    assert sent(core.call_done(alone.ctx, ToolResult((Text("a"),))))[0]["id"] == 7
    array = sent(core.call_done(in_batch.ctx, ToolResult((Text("b"),))))
    assert len(array) == 1 and [(m["id"], "error" in m) for m in array[0]] == [(7, True), (8, False)]


def test_task_operations_in_a_batch_answer_inside_it() -> None:
    core = make_core()
    init(core, "2025-03-26")
    meta = modern_meta({"extensions": {TASKS_EXTENSION: {}}})
    batch = [request(1, "tasks/get", {"_meta": meta, "taskId": "t1"}), request(2, "ping"),
             request(3, "tasks/cancel", {"_meta": meta, "taskId": "t1"})]
    actions = feed(core, orjson.dumps(batch))
    ops = {a.ctx.id: a for a in actions if isinstance(a, TaskOp)}
    assert sent(actions) == [] and sorted(ops) == [1, 3]
    record = TaskRecord("t1", "working", "job", {}, 1000.0, 1000.0, 60000, 1000, "/tmp/core.toml", "d")
    assert core.task_done(ops[1], TaskFound(record)) == []
    array = sent(core.task_done(ops[3], TaskNotFound("no such task")))
    assert len(array) == 1 and [m["id"] for m in array[0]] == [2, 1, 3]


def test_a_listen_in_a_batch_answers_inside_it() -> None:
    core = make_core()
    init(core, "2025-03-26")
    batch = [request(1, "subscriptions/listen", {"_meta": modern_meta(), "notifications": {"toolsListChanged": True}}),
             request(2, "ping")]
    assert _outside_arrays(feed(core, orjson.dumps(batch))) == []
    out = sent(core.shutdown())
    assert out[0]["method"] == "notifications/cancelled" and [m["id"] for m in out[1]] == [2, 1]
    # Cancelling the listen ends its batch's wait too.
    feed(core, orjson.dumps(batch))
    array = sent(feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}))
    assert [[m["id"] for m in a] for a in array] == [[2]]


_IDS = st.sampled_from([1, 2, 3, "a"])
_ITEM = st.one_of(
    st.builds(lambda i: request(i, "ping"), _IDS),
    st.builds(lambda i: request(i, "tools/call", {"name": "echo", "arguments": {"msg": "m"}}), _IDS),
    st.just({"jsonrpc": "2.0", "method": "notifications/x"}),
    st.just({"foo": 1}))                      # broken: answered with id null
_STEP = st.one_of(st.tuples(st.just("alone"), _ITEM.filter(lambda m: "id" in m)),
                  st.tuples(st.just("batch"), st.lists(_ITEM, min_size=1, max_size=5)),
                  st.tuples(st.just("finish"), st.integers(0, 3)))


@given(st.lists(_STEP, max_size=12))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_every_request_gets_one_answer_in_the_right_place(steps: list[tuple[str, Any]]) -> None:
    """Whatever ids collide, each lone request is answered alone and each batch in one array of
    exactly one answer per request (or broken item) it held, once its slow calls finish."""
    core = make_core()
    init(core, "2025-03-26")
    running: list[StartCall] = []
    alone_ids: list[str] = []
    batch_ids: list[list[str]] = []
    out: list[Any] = []

    def take(actions: list[Any]) -> None:
        running.extend(a for a in actions if isinstance(a, StartCall))
        out.extend(sent(actions))

    for kind, value in steps:
        if kind == "alone":
            alone_ids.append(repr(value["id"]))
            take(feed(core, value))
        elif kind == "batch":
            ids = [repr(m.get("id")) for m in value if "method" not in m or "id" in m]
            batch_ids += [sorted(ids)] if ids else []
            take(feed(core, orjson.dumps(value)))
        elif running:
            take(core.call_done(running.pop(value % len(running)).ctx, ToolResult((Text("x"),))))
    while running:
        take(core.call_done(running.pop().ctx, ToolResult((Text("x"),))))
    arrays = [m for m in out if isinstance(m, list)]
    assert sorted(sorted(repr(r.get("id")) for r in a) for a in arrays) == sorted(batch_ids)
    assert sorted(repr(m["id"]) for m in out if isinstance(m, dict)) == sorted(alone_ids)
    assert not core.inflight and not core.batches


def test_every_method_a_revision_serves_has_a_handler_and_the_table_no_other() -> None:
    from mcpwrap.protocol.core import HANDLERS
    from mcpwrap.protocol.revisions import EXTENSION_METHODS, REVISIONS

    served = set().union(*(rev.methods for rev in REVISIONS.values()), *EXTENSION_METHODS.values())
    assert set(HANDLERS) == served


def test_the_table_serves_a_method_only_where_the_revision_and_its_extensions_have_it() -> None:
    core = make_core()
    init(core, "2025-06-18")
    legacy_task = sent(feed(core, request(1, "tasks/get", {"taskId": "t"})))[0]   # 2025-11-25's, not 2025-06-18's
    assert legacy_task["error"] == {"code": -32601, "message": "Method not found: tasks/get"}
    ping = sent(feed(core, request(2, "ping", {"_meta": modern_meta()})))[0]    # the session's, not 2026's
    assert ping["error"]["code"] == -32601
    undeclared = sent(feed(core, request(3, "tasks/get", {"taskId": "t", "_meta": modern_meta()})))[0]
    assert undeclared["error"]["code"] == -32021
    assert undeclared["error"]["message"] == ("this method belongs to the tasks extension; declare the "
                                              f"{TASKS_EXTENSION} extension in clientCapabilities")
    declared = feed(core, request(4, "tasks/get", {"taskId": "t", "_meta": modern_meta(
        {"extensions": {TASKS_EXTENSION: {}}})}))
    assert [type(a) for a in declared] == [TaskOp] and declared[0].op == "get"


PATHS = b"""
[tools.read]
command = ["cat", "--", "{path}"]
confirm = "Read {path}?"
args.path = { type = "string", format = "path", within = ["{cwd}/data"], default = "notes" }
"""


def test_path_arguments_are_resolved_by_the_driver_before_anything_is_asked() -> None:
    """The core reads no filesystem: it hands the call's paths (defaults filled in) to the driver and
    decides on what comes back; a refused path is never confirmed, an accepted one runs as resolved."""
    core = make_core()
    core.config = config.loads(PATHS, Path("/tmp/paths.toml"))
    init(core, "2025-03-26")
    actions = feed(core, request(1, "tools/call", {"name": "read", "arguments": {}}))
    assert [type(a) for a in actions] == [ResolvePaths] and actions[0].arguments == {"path": "notes"}
    refused = sent(core.paths_resolved(actions[0].ctx, ({"path": "/etc"}, ["path: 'notes' resolves to /etc"])))
    assert refused[0]["error"]["code"] == -32602 and "resolves to /etc" in refused[0]["error"]["message"]
    assert 1 not in core.inflight and not core.resolving
    core = make_core()
    core.config = config.loads(PATHS, Path("/tmp/paths.toml"))
    params = {"_meta": modern_meta({"elicitation": {}}), "name": "read", "arguments": {"path": "n"}}
    first = feed(core, request(2, "tools/call", params))
    asked = sent(core.paths_resolved(first[0].ctx, ({"path": "/tmp/data/n"}, [])))[0]["result"]
    assert asked["resultType"] == "input_required" and asked["inputRequests"]["confirm"]["params"]["message"] == "Read n?"
    retry = feed(core, request(3, "tools/call", {**params, "requestState": asked["requestState"],
                                                 "inputResponses": {"confirm": {"action": "accept"}}}))
    assert [type(a) for a in retry] == [ResolvePaths]      # resolved again for the run, just before it starts
    start = core.paths_resolved(retry[0].ctx, ({"path": "/tmp/data/n"}, []))
    assert isinstance(start[0], StartCall) and start[0].arguments == {"path": "/tmp/data/n"} and start[0].once


def test_a_call_cancelled_while_its_paths_are_resolved_is_forgotten() -> None:
    core = make_core()
    core.config = config.loads(PATHS, Path("/tmp/paths.toml"))
    init(core, "2025-03-26")
    resolving = feed(core, request(1, "tools/call", {"name": "read", "arguments": {}}))[0]
    feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    assert core.paths_resolved(resolving.ctx, ({"path": "/tmp/data/notes"}, [])) == [] and not core.resolving
