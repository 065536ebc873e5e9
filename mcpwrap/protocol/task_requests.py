"""The tasks/* requests over a core's state, and their outcomes rendered per era.

`request` turns a tasks/* request (2025-11-25's, or the 2026 tasks extension's) into a `TaskOp`.
The driver performs it on the task store and hands back a `TaskOutcome` value, which `answer`
(through `Core.task_done`) renders: the driver decides nothing about the protocol, and nothing
here touches the store (`tasking` renders the records).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from mcpwrap.protocol import audit, calls, jsonrpc, modern, tasking
from mcpwrap.protocol.actions import Action, Context, Send, TaskOp
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


TaskOutcome: TypeAlias = TaskFound | TaskAlreadyEnded | TaskPage | TaskNotFound | TaskStoreFailed | TaskOnceRefused


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
        return _payload(core, ctx, record)
    if op.op == "update":
        return [core.reply(ctx, {})] if core.settled(ctx) else []   # the answers were taken (or ignored)
    raise ValueError(f"unknown task operation {op.op!r}")


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
