"""The task-store effects of a server: a `TaskOp` carried out on the store, what it found returned
as a `TaskOutcome` value for the core to render; following a task for the legacy session's status
notifications. A blocked 2025-11-25 `tasks/result` comes back early (`TaskAsking`) when its task's
open questions change, for the core to relay them.

Store calls run off the event loop (`trio.to_thread`); the core decides, these only fetch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from mcpwrap.protocol.actions import TaskOp
from mcpwrap.protocol.core import Core
from mcpwrap.protocol import tasking
from mcpwrap.protocol.task_requests import (TaskAlreadyEnded, TaskAsking, TaskFound, TaskNotFound, TaskOnceRefused, TaskOutcome,
                                            TaskPage, TaskStoreFailed)
from mcpwrap.protocol.tasking import TaskLookupError, TaskRecord, TaskTerminalError
from mcpwrap.serve.effects import spend
from mcpwrap.tasks.store import MAX_RUNNING, RESULT_POLL_S, Store, TooManyTasks
from mcpwrap.tasks.supervisor import create_task

WATCH_POLL_S = 0.2           # status notifications of the legacy session


async def perform(op: TaskOp, core: Core, state_dir: Path, secret_file: Path,
                  max_running: int = MAX_RUNNING) -> TaskOutcome:
    """Carry out one task-store operation and return what it found, for `core.task_done`.

    `core` is only read (its tools file, keyring, page size, and whether a `tasks/result` still has
    a client waiting). `secret_file` is where `core.keyring_source` loads the keyring from: the
    supervisor reads it too."""
    store = Store.for_tools_file(state_dir, core.config.path)
    ctx = op.ctx
    try:
        if op.op == "create":
            assert op.tool is not None and op.ttl_ms is not None
            if op.once is not None and (spent := await trio.to_thread.run_sync(spend, state_dir, op.once)) is not True:
                return TaskOnceRefused(spent)
            tool, ttl_ms = op.tool, op.ttl_ms
            return TaskFound(await trio.to_thread.run_sync(lambda: create_task(   # the secret is read off the loop too
                store, core.config, tool, op.arguments or {}, ttl_ms, core.keyring_source(), secret_file,
                max_running, ctx.principal, op.askable, op.asks)))
        if op.op == "list":
            chosen, next_cursor = await trio.to_thread.run_sync(store.page, op.cursor, core.page_size, ctx.principal)
            return TaskPage(tuple(chosen), next_cursor)
        task_id, principal = op.task_id or "", ctx.principal   # another's task is not found, as an unknown id
        record = await trio.to_thread.run_sync(store.get, task_id, principal)
        if op.op == "cancel":
            try:
                return TaskFound(await trio.to_thread.run_sync(store.cancel, task_id, principal))
            except TaskTerminalError as exc:
                return TaskAlreadyEnded(exc.record)
        if op.op in ("update", "answer"):
            responses = dict((ctx.params.get("inputResponses") if op.op == "update" else op.responses) or {})
            return TaskFound(await trio.to_thread.run_sync(store.answer, task_id, responses, principal))
        while op.op == "result" and not record.terminal and core.task_waiting(ctx):
            if tasking.outstanding(record) != op.relayed:
                return TaskAsking(record)          # questions to relay (or withdraw): the core decides
            await trio.sleep(RESULT_POLL_S)
            record = await trio.to_thread.run_sync(store.get, task_id, principal)
        return TaskFound(record)              # get, update, and result (terminal, or nobody waits)
    except TaskLookupError as exc:
        return TaskNotFound(exc.reason)
    except TooManyTasks as exc:
        return TaskStoreFailed(str(exc))


OnChange = Callable[[TaskRecord | None, TaskRecord], None]


async def follow(state_dir: Path, tools_file: Path, task_id: str, on_change: OnChange) -> None:
    """Poll a task until it is terminal or gone (bounded by its ttl); report each visible change."""
    store = Store.for_tools_file(state_dir, tools_file)
    previous: TaskRecord | None = None
    while True:
        try:
            record = await trio.to_thread.run_sync(store.get, task_id)
        except TaskLookupError:
            return
        if previous is None or _visible(record) != _visible(previous):
            on_change(previous, record)
            previous = record
        if record.terminal:
            return
        await trio.sleep(WATCH_POLL_S)


def _visible(record: TaskRecord) -> tuple[Any, ...]:
    return (record.status, record.status_message, record.progress)
