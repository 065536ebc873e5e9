"""The tasks/* requests over a core's state, and their outcomes rendered per era.

`request` turns a tasks/* request (2025-11-25's, or the 2026 tasks extension's) into a `TaskOp`:
the task store's I/O happens in the driver, which hands the records back to the `Core` outcome
methods that call the functions here (`tasking` renders the records).
"""

from __future__ import annotations

from mcpwrap.protocol import jsonrpc, modern, tasking
from mcpwrap.protocol.actions import Action, Context, Send, TaskOp
from mcpwrap.protocol.server_state import ServerState
from mcpwrap.protocol.tasking import TaskRecord
from mcpwrap.protocol.tools import ProtocolError, invalid_params

ON_ONE_TASK = frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/update"})   # the rest: tasks/list


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
    core.inflight[ctx.id] = ctx
    return [TaskOp(ctx, "list", cursor=cursor)]


def created(core: ServerState, ctx: Context, record: TaskRecord) -> list[Action]:
    """The task handle; a legacy session also gets a watcher for its status notifications."""
    if not core.settled(ctx):
        return []
    result = tasking.create_result(record, ctx.rev)
    actions: list[Action] = [Send(jsonrpc.response(ctx.id, modern.stamp(result, core.config, "task")), (ctx.id,))
                             if ctx.modern else core.reply(ctx, result)]
    if not ctx.modern and ctx.rev.has("tasks.core"):
        actions.append(TaskOp(ctx, "watch", task_id=record.task_id))
    return actions


def status(core: ServerState, ctx: Context, record: TaskRecord) -> list[Action]:
    if not core.settled(ctx):
        return []
    return [core.reply(ctx, tasking.modern_detailed(record, ctx.rev) if ctx.modern else tasking.legacy_task(record))]


def cancelled(core: ServerState, ctx: Context, record: TaskRecord, was_terminal: bool) -> list[Action]:
    """2025-11-25 answers with the task (-32602 if it had finished); the extension only acks."""
    if not core.settled(ctx):
        return []
    if ctx.modern:
        return [core.reply(ctx, {})]
    if was_terminal:
        return [core.error_reply(ctx, tasking.terminal_error(record))]
    return [core.reply(ctx, tasking.legacy_task(record))]


def page(core: ServerState, ctx: Context, records: list[TaskRecord], next_cursor: str | None) -> list[Action]:
    return [core.reply(ctx, tasking.legacy_list(records, next_cursor))] if core.settled(ctx) else []


def payload(core: ServerState, ctx: Context, record: TaskRecord) -> list[Action]:
    """tasks/result of a terminal task: the call's result (or error), unless the client cancelled."""
    if not core.settled(ctx):
        return []
    try:
        return [core.reply(ctx, tasking.legacy_payload(record, ctx.rev))]
    except ProtocolError as error:
        return [core.error_reply(ctx, error)]


def changed(core: ServerState, ctx: Context, previous: TaskRecord | None, current: TaskRecord) -> list[Action]:
    """A watched task moved: progress on the call's token, then notifications/tasks/status."""
    if not core.session.open:
        return []
    actions: list[Action] = []
    before = previous.progress if previous is not None else None
    if ctx.progress_token is not None and current.progress != before:
        params = tasking.task_progress_params(current, ctx.progress_token, ctx.rev)
        if params is not None:
            actions.append(Send(jsonrpc.notification("notifications/progress", params)))
    if tasking.status_changed(previous, current):
        actions.append(Send(jsonrpc.notification("notifications/tasks/status", tasking.legacy_task(current))))
    return actions
