"""The tasks/* requests over a core's state, and their outcomes rendered per era.

`request` turns a tasks/* request (2025-11-25's, or the 2026 tasks extension's) into a `TaskOp`.
A 2025-11-25 task parked on a question has it relayed to the client waiting on its `tasks/result`
(`_relay`, `relay_answered`): the question lives in the task record, so any session can relay it.
The driver performs it on the task store and hands back a `TaskOutcome` value, which `answer`
(through `Core.task_done`) renders: the driver decides nothing about the protocol, and nothing
here touches the store (`tasking` renders the records).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from mcpwrap.protocol import asking, audit, calls, jsonrpc, modern, tasking
from mcpwrap.protocol.actions import Action, Context, Send, TaskOp
from mcpwrap.protocol.jsonrpc import Response
from mcpwrap.protocol.server_state import ServerState
from mcpwrap.protocol.tasking import TaskRecord
from mcpwrap.protocol.tools import ProtocolError, invalid_params

ON_ONE_TASK = frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/update"})   # the rest: tasks/list


@dataclass(frozen=True)
class TaskFound:
    """The task the operation created, read, cancelled or waited for (for `result`: terminal,
    unless the client stopped waiting)."""
    record: TaskRecord


@dataclass(frozen=True)
class TaskAlreadyEnded:
    """A cancel found the task already finished."""
    record: TaskRecord


@dataclass(frozen=True)
class TaskPage:
    """A page of `tasks/list`, and the cursor of the next (None: the last page)."""
    records: tuple[TaskRecord, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class TaskNotFound:
    """No such task for the requestor: unknown, another principal's or expired look alike on purpose."""
    reason: str


@dataclass(frozen=True)
class TaskStoreFailed:
    """The store could not do it (too many tasks running, or an I/O failure), said for the client."""
    message: str


@dataclass(frozen=True)
class TaskOnceRefused:
    """Nothing was created: the retry's requestState nonce was used already (False), or the ledger could
    not record it as used (its OSError)."""
    spent: bool | OSError


@dataclass(frozen=True)
class TaskAsking:
    """A blocked 2025-11-25 tasks/result found the task's open questions (`tasking.outstanding`) changed
    from those the request relayed: new ones to relay, ones answered meanwhile to withdraw."""
    record: TaskRecord


TaskOutcome: TypeAlias = (TaskFound | TaskAlreadyEnded | TaskPage | TaskNotFound | TaskStoreFailed | TaskOnceRefused
                          | TaskAsking)


def request(core: ServerState, ctx: Context) -> list[Action]:
    """The handler of every tasks/* method: its parameters checked, a `TaskOp` for the driver."""
    task_id = ctx.params.get("taskId")
    if ctx.method in ON_ONE_TASK:
        if not isinstance(task_id, str):
            raise invalid_params(f"{ctx.method} needs a string 'taskId'")
        if ctx.method == "tasks/update" and not isinstance(ctx.params.get("inputResponses"), dict):
            raise invalid_params("tasks/update needs an 'inputResponses' object")
        core.inflight[ctx.id] = ctx
        return [TaskOp(ctx, ctx.method.split("/")[1], task_id=task_id)]
    cursor = ctx.params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise invalid_params("Invalid cursor")
    if cursor is not None:
        tasking.decode_cursor(cursor)     # -32602 here, before the driver opens the store
    core.inflight[ctx.id] = ctx
    return [TaskOp(ctx, "list", cursor=cursor)]


def answer(core: ServerState, op: TaskOp, outcome: TaskOutcome) -> list[Action]:
    """The answer to a performed `TaskOp` (none once the client cancelled the request)."""
    ctx = op.ctx
    if op.op == "answer":          # a relayed question's answer, kept (or not: first answer only); nothing to say
        return []
    if isinstance(outcome, TaskAsking):
        return _relay(core, op, outcome.record)
    if isinstance(outcome, TaskOnceRefused):
        return calls.once_refused(core, ctx, outcome.spent)
    if isinstance(outcome, TaskNotFound):
        return _error(core, ctx, tasking.lookup_error(outcome.reason))
    if isinstance(outcome, TaskStoreFailed):
        return _error(core, ctx, ProtocolError(-32603, outcome.message))
    if isinstance(outcome, TaskPage):
        return _page(core, ctx, list(outcome.records), outcome.next_cursor)
    if isinstance(outcome, TaskAlreadyEnded):
        return _cancelled(core, ctx, outcome.record, True)
    record = outcome.record
    if op.op == "create":          # recorded whether or not the client still waits for the handle
        assert op.tool is not None
        return [*core.audited(ctx, audit.task_created, record.task_id, op.tool, op.arguments or {}),
                *_created(core, ctx, record)]
    if op.op == "get":
        return _status(core, ctx, record)
    if op.op == "cancel":
        return [*core.audited(ctx, audit.task_cancelled, record.task_id), *_cancelled(core, ctx, record, False)]
    if op.op == "result":
        return [*core.drop_relays(ctx.id, "the task ended"), *_payload(core, ctx, record)]
    if op.op == "update":
        return [core.reply(ctx, {})] if core.settled(ctx) else []   # the answers were taken (or ignored)
    raise ValueError(f"unknown task operation {op.op!r}")


def _relay(core: ServerState, op: TaskOp, record: TaskRecord) -> list[Action]:
    """2025-11-25: a parked task's questions go to the client waiting on its tasks/result, each as an
    `elicitation/create` tagged with the task (`related-task`); its answer (`relay_answered`) is kept in
    the task record, the first answer only, whichever session or replica gave it. A question answered
    meanwhile is withdrawn. A client that cannot be asked is sent nothing: the question waits for
    another answer (`tasks answer`, another session) or its `ask_timeout`. Then the wait goes on."""
    ctx = op.ctx
    if ctx.id not in core.inflight:
        return []
    waiting = tasking.outstanding(record)
    actions = [*core.drop_relays(ctx.id, "the question was answered", keep=waiting)]
    if ctx.rev.has("elicitation.server_request") and asking.can_ask(ctx.capabilities):
        for key in sorted(waiting - op.relayed):
            question = (record.input_requests or {})[key]
            params = question.get("params") if isinstance(question, dict) else None
            ask_id = next(core.ask_ids)
            core.relays[ask_id] = (ctx, record.task_id, key)
            actions += core.to_client(ctx, ("ask", ask_id), {
                "jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                "params": {**(params if isinstance(params, dict) else {}),
                           "_meta": {tasking.RELATED_TASK: {"taskId": record.task_id}}}})
    return [*actions, TaskOp(ctx, "result", task_id=record.task_id, relayed=waiting)]


def relay_answered(core: ServerState, response: Response) -> list[Action]:
    """The client's answer to a relayed question goes to the task's record (`TaskOp` "answer"); an
    error leaves the question open for another answer or its ask_timeout."""
    ctx, task_id, key = core.relays.pop(str(response.id))
    if response.error is not None or not isinstance(response.result, dict):
        return []
    return [TaskOp(ctx, "answer", task_id=task_id, responses={key: response.result})]


def _error(core: ServerState, ctx: Context, error: ProtocolError) -> list[Action]:
    return [core.error_reply(ctx, error)] if core.settled(ctx) else []


def _created(core: ServerState, ctx: Context, record: TaskRecord) -> list[Action]:
    """The task handle; a legacy session also gets a watcher for its status notifications."""
    if not core.settled(ctx):
        return []
    result = tasking.create_result(record, ctx.rev)
    actions: list[Action] = [Send(jsonrpc.response(ctx.id, modern.stamp(result, core.config, "task")), (ctx.id,))
                             if ctx.modern else core.reply(ctx, result)]
    if not ctx.modern and ctx.rev.has("tasks.core"):
        actions.append(TaskOp(ctx, "watch", task_id=record.task_id))
    return actions


def _status(core: ServerState, ctx: Context, record: TaskRecord) -> list[Action]:
    if not core.settled(ctx):
        return []
    return [core.reply(ctx, tasking.modern_detailed(record, ctx.rev) if ctx.modern else tasking.legacy_task(record))]


def _cancelled(core: ServerState, ctx: Context, record: TaskRecord, was_terminal: bool) -> list[Action]:
    """2025-11-25 answers with the task (-32602 if it had finished); the extension only acks."""
    if not core.settled(ctx):
        return []
    if ctx.modern:
        return [core.reply(ctx, {})]
    if was_terminal:
        return [core.error_reply(ctx, tasking.terminal_error(record))]
    return [core.reply(ctx, tasking.legacy_task(record))]


def _page(core: ServerState, ctx: Context, records: list[TaskRecord], next_cursor: str | None) -> list[Action]:
    return [core.reply(ctx, tasking.legacy_list(records, next_cursor))] if core.settled(ctx) else []


def _payload(core: ServerState, ctx: Context, record: TaskRecord) -> list[Action]:
    """tasks/result of a terminal task: the call's result (or error), unless the client cancelled."""
    if not core.settled(ctx):
        return []
    try:
        return [core.reply(ctx, tasking.legacy_payload(record, ctx.rev))]
    except ProtocolError as error:
        return [core.error_reply(ctx, error)]


def changed(core: ServerState, ctx: Context, previous: TaskRecord | None, current: TaskRecord) -> list[Action]:
    """A watched task moved: progress on the call's token, then notifications/tasks/status (its end
    is in the audit trail by its supervisor's hand, whoever watches)."""
    actions: list[Action] = []
    if not core.session.open:
        return actions
    before = previous.progress if previous is not None else None
    if ctx.progress_token is not None and current.progress != before:
        params = tasking.task_progress_params(current, ctx.progress_token, ctx.rev)
        if params is not None:
            actions.append(Send(jsonrpc.notification("notifications/progress", params)))
    if tasking.status_changed(previous, current):
        actions.append(Send(jsonrpc.notification("notifications/tasks/status", tasking.legacy_task(current))))
    return actions
