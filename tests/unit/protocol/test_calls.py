"""protocol/calls: the tools/call decisions — a call's name and arguments checked, the task decision per
revision, the questions asked and their answers, the start (`StartCall`, or a `TaskOp` "create")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import load as config
from mcpwrap.protocol.actions import CancelTimer, StartCall, StartTimer, TaskOp
from mcpwrap.protocol.revisions import TASKS_EXTENSION
from tests import mcpschema
from tests.harness import modern_meta
from tests.unit.protocol.test_core import TOOLS, feed, init, make_core, request, sent

TASKS = TOOLS + b"""
[tools.never]
command = ["true"]
task = "never"
[tools.always]
command = ["true"]
task = "always"
[tools.sign]
command = ["echo", "{name}", "{flag}"]
task = "optional"
task_asks = true
confirm = "Sign as {name}?"
args.name = { type = "string", elicit = true }
args.flag = { type = "boolean", elicit = true }
"""


def tasks_core() -> Any:
    core = make_core()
    core.config = config.loads(TASKS, Path("/tmp/calls.toml"))
    return core


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
@pytest.mark.parametrize(("params", "words"), [
    ({"name": "nosuch", "arguments": {}}, "Unknown tool: nosuch"),
    ({"name": 7}, "string 'name'"),
    ({"name": "echo", "arguments": ["hi"]}, "must be an object"),
])
def test_a_call_that_names_no_tool_or_gives_no_object_is_32602_and_starts_nothing(
        version: str, params: dict[str, Any], words: str) -> None:
    core = make_core()
    init(core, version)
    actions = feed(core, request(1, "tools/call", params))
    assert not any(isinstance(a, (StartCall, TaskOp)) for a in actions)
    answer = sent(actions)[0]
    mcpschema.check(version, answer, "tools/call")
    assert answer["error"]["code"] == -32602 and words in answer["error"]["message"]
    assert 1 not in core.inflight


def test_null_arguments_are_no_arguments() -> None:
    core = make_core()
    init(core)
    start = feed(core, request(1, "tools/call", {"name": "ask", "arguments": None}))
    assert not any(isinstance(a, StartCall) for a in start)     # `name` is still missing: it is asked for


def test_arguments_that_break_the_schema_start_nothing_and_say_which() -> None:
    core = make_core()
    init(core, "2025-11-25")
    actions = feed(core, request(1, "tools/call", {"name": "echo", "arguments": {"msg": 3}}))
    assert not any(isinstance(a, StartCall) for a in actions)
    answer = sent(actions)[0]
    mcpschema.check("2025-11-25", answer, "tools/call")
    text = answer["result"]["content"][0]["text"] if "result" in answer else answer["error"]["message"]
    assert "msg" in text


def test_2025_11_25_task_decision_follows_the_tool_and_the_request() -> None:
    core = tasks_core()
    init(core, "2025-11-25")
    never = sent(feed(core, request(1, "tools/call", {"name": "never", "task": {}})))[0]
    assert never["error"]["code"] == -32601 and "does not support task execution" in never["error"]["message"]
    always = sent(feed(core, request(2, "tools/call", {"name": "always"})))[0]
    assert always["error"]["code"] == -32601 and "must be called as a task" in always["error"]["message"]
    created = feed(core, request(3, "tools/call", {"name": "job", "arguments": {"n": 1}, "task": {"ttl": 5000}}))
    assert [type(a) for a in created] == [TaskOp]
    assert created[0].op == "create" and created[0].arguments == {"n": 1} and created[0].ttl_ms == 5000
    plain = feed(core, request(4, "tools/call", {"name": "job", "arguments": {"n": 1}}))
    assert [type(a) for a in plain] == [StartCall]
    assert {1, 2} .isdisjoint(core.inflight) and {3, 4} <= set(core.inflight)


def test_the_tasks_extension_decides_by_what_the_request_declares() -> None:
    core = tasks_core()
    declared = modern_meta({"extensions": {TASKS_EXTENSION: {}}})
    created = feed(core, request(1, "tools/call", {"_meta": declared, "name": "job", "arguments": {"n": 2}}))
    assert isinstance(created[0], TaskOp) and created[0].op == "create"
    never = feed(core, request(2, "tools/call", {"_meta": declared, "name": "never"}))
    assert isinstance(never[0], StartCall)                    # declared, but this tool never runs as a task
    undeclared = feed(core, request(3, "tools/call", {"_meta": modern_meta(), "name": "job", "arguments": {"n": 2}}))
    assert isinstance(undeclared[0], StartCall)
    refused = sent(feed(core, request(4, "tools/call", {"_meta": modern_meta(), "name": "always"})))[0]
    mcpschema.check("2026-07-28", refused, "tools/call")
    assert "error" in refused and "runs only as a task" in str(refused["error"])


def test_an_extension_task_that_lacks_answers_is_created_at_once_to_ask_them_itself() -> None:
    """A 2026-07-28 task call with elicited arguments missing: no input_required round before the task, the
    task is created with the arguments as given and `asks` (its supervisor parks it on what is missing)."""
    core = tasks_core()
    declared = modern_meta({"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}})
    created = feed(core, request(1, "tools/call", {"_meta": declared, "name": "sign", "arguments": {"flag": True}}))
    assert [type(a) for a in created] == [TaskOp]
    assert created[0].op == "create" and created[0].asks and created[0].askable
    assert created[0].arguments == {"flag": True}
    ready = feed(core, request(2, "tools/call", {"_meta": declared, "name": "job", "arguments": {"n": 1}}))
    assert isinstance(ready[0], TaskOp) and not ready[0].asks     # nothing to ask: the task just runs
    mute = modern_meta({"extensions": {TASKS_EXTENSION: {}}})       # cannot be asked: refused as before
    refused = sent(feed(core, request(3, "tools/call", {"_meta": mute, "name": "sign", "arguments": {}})))[0]
    assert refused["error"]["code"] == -32021


def test_legacy_task_calls_and_plain_calls_still_ask_before_anything_starts() -> None:
    core = tasks_core()
    init(core, "2025-11-25", {"elicitation": {}})
    legacy = sent(feed(core, request(1, "tools/call", {"name": "sign", "arguments": {}, "task": {}})))[0]
    assert legacy["method"] == "elicitation/create"
    plain = sent(feed(core, request(2, "tools/call", {"_meta": modern_meta({"elicitation": {}}), "name": "sign",
                                                      "arguments": {}})))[0]
    assert plain["result"]["resultType"] == "input_required"
    declared = modern_meta({"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}})
    core.config = config.loads(TASKS.replace(b"task_asks = true\n", b""), Path("/tmp/calls.toml"))
    asked_first = sent(feed(core, request(3, "tools/call", {"_meta": declared, "name": "sign", "arguments": {}})))[0]
    assert asked_first["result"]["resultType"] == "input_required"   # without task_asks: rounds, then the task


def test_a_question_the_client_could_not_ask_ends_the_call_refused() -> None:
    core = make_core()
    init(core, "2025-11-25", {"elicitation": {}})
    actions = feed(core, request(1, "tools/call", {"name": "deploy", "arguments": {"target": "prod"}}))
    ask = sent(actions)[0]
    assert StartTimer(ask["id"], 600.0) in actions
    out = feed(core, {"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -1, "message": "no user here"}})
    assert out[0] == CancelTimer(ask["id"]) and not any(isinstance(a, StartCall) for a in out)
    answer = sent(out)[0]
    assert answer["id"] == 1 and answer["result"]["isError"] is True
    assert "could not ask the user: no user here" in answer["result"]["content"][0]["text"]
    assert 1 not in core.inflight
    assert feed(core, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}}) == []   # asked once


def test_an_elicited_argument_is_asked_for_and_the_answer_starts_the_call_with_it() -> None:
    core = make_core()
    init(core, "2025-11-25", {"elicitation": {}})
    ask = sent(feed(core, request(1, "tools/call", {"name": "ask", "arguments": {}})))[0]
    assert ask["method"] == "elicitation/create" and "name" in ask["params"]["requestedSchema"]["properties"]
    out = feed(core, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "ada"}}})
    start = next(a for a in out if isinstance(a, StartCall))
    assert start.arguments == {"name": "ada", "count": 1} and start.ctx.id == 1


def test_a_question_over_a_revision_that_cannot_ask_refuses_with_a_result() -> None:
    core = make_core()
    init(core, "2025-03-26", {"elicitation": {}})
    answer = sent(feed(core, request(1, "tools/call", {"name": "ask", "arguments": {}})))[0]
    assert answer["result"]["isError"] is True and "nothing ran" in answer["result"]["content"][0]["text"]
