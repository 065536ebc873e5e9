"""protocol/task_requests: a tasks/* request becomes one `TaskOp` (its parameters checked first, nothing
touches the store), and the `TaskOutcome` the driver hands back is rendered for the request's era."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mcpwrap.protocol.actions import Send, TaskOp
from mcpwrap.protocol.task_requests import (TaskAlreadyEnded, TaskAsking, TaskFound, TaskNotFound, TaskOnceRefused, TaskPage,
                                            TaskStoreFailed)
from mcpwrap.protocol.tasking import TaskRecord
from mcpwrap.protocol.revisions import TASKS_EXTENSION
from tests import mcpschema
from tests.harness import modern_meta
from tests.unit.protocol.test_core import feed, init, make_core, request, sent

RECORD = TaskRecord("t1", "working", "job", {"n": 1}, 1000.0, 1000.0, 60000, 1000, "/tmp/core.toml", "d")
DONE = replace(RECORD, status="completed", result={"content": [{"type": "text", "text": "1\n"}], "isError": False})


def op_for(core: Any, id: int, method: str, params: dict[str, Any] | None = None) -> TaskOp:
    actions = feed(core, request(id, method, params))
    assert [type(a) for a in actions] == [TaskOp] and id in core.inflight
    return actions[0]


@pytest.mark.parametrize(("method", "params", "words"), [
    ("tasks/get", {}, "string 'taskId'"),
    ("tasks/result", {"taskId": 3}, "string 'taskId'"),
    ("tasks/cancel", None, "string 'taskId'"),
    ("tasks/list", {"cursor": 5}, "Invalid cursor"),
    ("tasks/list", {"cursor": "not-ours"}, "cursor"),
])
def test_bad_parameters_are_32602_before_the_store_is_asked(method: str, params: Any, words: str) -> None:
    core = make_core()
    init(core, "2025-11-25")
    actions = feed(core, request(1, method, params))
    assert not any(isinstance(a, TaskOp) for a in actions) and 1 not in core.inflight
    answer = sent(actions)[0]
    assert answer["error"]["code"] == -32602 and words in answer["error"]["message"]


def test_each_request_names_its_operation_and_task() -> None:
    core = make_core()
    init(core, "2025-11-25")
    got = op_for(core, 1, "tasks/get", {"taskId": "t1"})
    assert (got.op, got.task_id) == ("get", "t1")
    assert op_for(core, 2, "tasks/result", {"taskId": "t1"}).op == "result"
    assert op_for(core, 3, "tasks/cancel", {"taskId": "t1"}).op == "cancel"
    listed = op_for(core, 4, "tasks/list")
    assert listed.op == "list" and listed.cursor is None


def test_outcomes_are_answered_in_the_2025_11_25_shapes() -> None:
    core = make_core()
    init(core, "2025-11-25")
    got = sent(core.task_done(op_for(core, 1, "tasks/get", {"taskId": "t1"}), TaskFound(RECORD)))[0]
    mcpschema.check("2025-11-25", got, "tasks/get")
    assert got["result"]["taskId"] == "t1" and got["result"]["status"] == "working"
    missing = sent(core.task_done(op_for(core, 2, "tasks/get", {"taskId": "x"}), TaskNotFound("no such task")))[0]
    assert missing["error"] == {"code": -32602, "message": "Failed to retrieve task: no such task"}
    failed = sent(core.task_done(op_for(core, 3, "tasks/get", {"taskId": "t1"}), TaskStoreFailed("disk full")))[0]
    assert failed["error"] == {"code": -32603, "message": "disk full"}
    page = sent(core.task_done(op_for(core, 4, "tasks/list"), TaskPage((RECORD, DONE), "next")))[0]
    mcpschema.check("2025-11-25", page, "tasks/list")
    assert [t["taskId"] for t in page["result"]["tasks"]] == ["t1", "t1"] and page["result"]["nextCursor"] == "next"
    payload = sent(core.task_done(op_for(core, 5, "tasks/result", {"taskId": "t1"}), TaskFound(DONE)))[0]
    assert payload["result"]["content"] == [{"type": "text", "text": "1\n"}]
    assert payload["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": "t1"}
    cancelled = sent(core.task_done(op_for(core, 6, "tasks/cancel", {"taskId": "t1"}), TaskFound(RECORD)))[0]
    assert cancelled["result"]["taskId"] == "t1"
    ended = sent(core.task_done(op_for(core, 7, "tasks/cancel", {"taskId": "t1"}), TaskAlreadyEnded(DONE)))[0]
    assert ended["error"]["code"] == -32602 and "already in terminal status 'completed'" in ended["error"]["message"]
    assert not {1, 2, 3, 4, 5, 6, 7} & set(core.inflight)


def test_a_created_task_is_a_handle_and_a_watch_over_a_legacy_session() -> None:
    core = make_core()
    init(core, "2025-11-25")
    create = feed(core, request(1, "tools/call", {"name": "job", "arguments": {"n": 1}, "task": {}}))[0]
    assert isinstance(create, TaskOp) and create.op == "create"
    actions = core.task_done(create, TaskFound(RECORD))
    handle = sent(actions)[0]
    mcpschema.check("2025-11-25", handle, "tools/call")
    assert handle["result"]["task"]["taskId"] == "t1"
    assert [(a.op, a.task_id) for a in actions if isinstance(a, TaskOp)] == [("watch", "t1")]


def test_the_extension_acknowledges_a_cancel_and_its_update() -> None:
    core = make_core()
    meta = {"_meta": modern_meta({"extensions": {TASKS_EXTENSION: {}}})}
    cancel = op_for(core, 1, "tasks/cancel", {**meta, "taskId": "t1"})
    acked = sent(core.task_done(cancel, TaskFound(RECORD)))[0]
    mcpschema.check("2026-07-28", acked, "tasks/cancel", strict=False)   # strict closes the allOf: _meta
    assert "taskId" not in acked["result"] and "status" not in acked["result"]
    refused = sent(feed(core, request(2, "tasks/update", {**meta, "taskId": "t1"})))[0]
    assert refused["error"]["code"] == -32602 and "inputResponses" in refused["error"]["message"]
    update = op_for(core, 3, "tasks/update", {**meta, "taskId": "t1", "inputResponses": {}})
    assert update.op == "update" and "result" in sent(core.task_done(update, TaskFound(RECORD)))[0]


def test_a_replayed_request_state_creates_no_task() -> None:
    core = make_core()
    init(core, "2025-11-25")
    create = feed(core, request(1, "tools/call", {"name": "job", "arguments": {"n": 1}, "task": {}}))[0]
    answer = sent(core.task_done(create, TaskOnceRefused(False)))[0]
    assert answer["error"]["code"] == -32602 and "invalid or expired requestState" in answer["error"]["message"]


def test_a_request_cancelled_meanwhile_is_not_answered() -> None:
    core = make_core()
    init(core, "2025-11-25")
    op = op_for(core, 1, "tasks/get", {"taskId": "t1"})
    feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    assert core.task_done(op, TaskFound(RECORD)) == []
    assert core.task_done(op, TaskNotFound("gone")) == []


def test_a_watched_task_says_its_status_once_it_changes() -> None:
    core = make_core()
    init(core, "2025-11-25")
    create = feed(core, request(1, "tools/call", {"name": "job", "arguments": {"n": 1}, "task": {}}))[0]
    core.task_done(create, TaskFound(RECORD))
    assert sent(core.task_changed(create.ctx, RECORD, RECORD)) == []
    notes = [m for m in sent(core.task_changed(create.ctx, RECORD, DONE)) if isinstance(m, dict)]
    assert [m["method"] for m in notes] == ["notifications/tasks/status"]
    assert notes[0]["params"]["status"] == "completed"
    assert all(isinstance(a, Send) for a in core.task_changed(create.ctx, RECORD, DONE))


# --- 2025-11-25: a parked task's questions relayed to the client waiting on tasks/result -------------
QUESTION = {"method": "elicitation/create", "params": {"message": "Apply?", "requestedSchema": {
    "type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"]}}}
PARKED = replace(RECORD, status="input_required", input_requests={"ask-1": QUESTION})


def test_a_parked_task_s_question_is_relayed_on_tasks_result_and_its_answer_kept_for_the_task() -> None:
    core = make_core()
    init(core, "2025-11-25", {"elicitation": {}})
    waiting = op_for(core, 1, "tasks/result", {"taskId": "t1"})
    actions = core.task_done(waiting, TaskAsking(PARKED))
    (asked,) = sent(actions)
    mcpschema.check("2025-11-25", asked)
    assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "Apply?"
    assert asked["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": "t1"}
    (again,) = [a for a in actions if isinstance(a, TaskOp)]
    assert (again.op, again.relayed) == ("result", frozenset({"ask-1"})) and 1 in core.inflight
    response = {"action": "accept", "content": {"answer": True}}
    (kept,) = feed(core, {"jsonrpc": "2.0", "id": asked["id"], "result": response})
    assert (kept.op, kept.task_id, kept.responses) == ("answer", "t1", {"ask-1": response})
    assert core.task_done(kept, TaskFound(RECORD)) == [] and 1 in core.inflight   # tasks/result still waits
    assert feed(core, {"jsonrpc": "2.0", "id": asked["id"], "result": response}) == []   # once


def test_a_question_answered_elsewhere_is_withdrawn_and_a_client_that_cannot_be_asked_is_sent_none() -> None:
    core = make_core()
    init(core, "2025-11-25", {"elicitation": {}})
    waiting = op_for(core, 1, "tasks/result", {"taskId": "t1"})
    actions = core.task_done(waiting, TaskAsking(PARKED))
    (asked,), (again,) = sent(actions), [a for a in actions if isinstance(a, TaskOp)]
    (withdrawn,) = sent(core.task_done(again, TaskAsking(RECORD)))
    assert withdrawn == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": asked["id"], "reason": "the question was answered"}}
    mute = make_core()
    init(mute, "2025-11-25")
    actions = mute.task_done(op_for(mute, 1, "tasks/result", {"taskId": "t1"}), TaskAsking(PARKED))
    assert sent(actions) == [] and [a.relayed for a in actions if isinstance(a, TaskOp)] == [frozenset({"ask-1"})]
