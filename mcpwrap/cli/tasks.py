"""`mcpwrap tasks list|show|result|cancel|gc`: durable tasks from the shell, and `call --task`'s start.

A task is found in its tools file's store, or, given only its id, in the one store under the
state dir that holds it. None of these commands loads trio or the runner.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from mcpwrap.cli.common import (EXIT_CONFIG, EXIT_OK, EXIT_PENDING, EXIT_TOOL_ERROR, EXIT_USAGE, fail, positive,
                                print_json, print_text, secret_path, state_path)
from mcpwrap.cli.output import ProgressLine, write_binary


def tasks_list(file: str, state_dir: str | None, as_json: bool) -> None:
    from mcpwrap.tasks import views as tasks

    records = sorted(_task_store(file, state_dir).records(), key=lambda r: (r.created_at, r.task_id))
    if as_json:
        print_json([tasks.public_json(r) for r in records])
        return
    if not records:
        print("no tasks")  # stdout-ok
        return
    rows = [["ID", "STATUS", "TOOL", "CREATED", "UPDATED", "MESSAGE"]] + [
        [r.task_id, tasks.display_status(r), r.tool, tasks.local_time(r.created_at),
         tasks.local_time(r.updated_at), r.status_message or ""] for r in records]
    print(tasks.table(rows))  # stdout-ok


def tasks_show(where: str, task_id: str | None, state_dir: str | None, as_json: bool) -> None:
    from mcpwrap.tasks import views as tasks

    store, task_id = _find_task(where, task_id, state_dir)
    record = _task_record(store, task_id)
    if as_json:
        print_json(tasks.public_json(record))
    else:
        print(tasks.describe(record, store))  # stdout-ok


def tasks_result(where: str, task_id: str | None, state_dir: str | None, wait: bool, output: str | None,
                 as_json: bool) -> NoReturn:
    store, task_id = _find_task(where, task_id, state_dir)
    task_outcome(store, task_id, wait, Path(output) if output else None, as_json)


def tasks_cancel(where: str, task_id: str | None, state_dir: str | None, as_json: bool) -> None:
    from mcpwrap.protocol.tasking import TaskLookupError, TaskTerminalError
    from mcpwrap.tasks import views as tasks

    store, task_id = _find_task(where, task_id, state_dir)
    was: str | None = None
    try:
        record = store.cancel(task_id)
    except TaskLookupError as exc:
        _no_task(store, task_id, exc.reason)
    except TaskTerminalError as exc:
        if exc.record.status != "cancelled":      # finished otherwise: what was asked can no longer be done
            fail(f"task {task_id} is already {tasks.display_status(exc.record)}", EXIT_TOOL_ERROR)
        record, was = exc.record, "was already cancelled"   # already what was asked
    if was is None:
        _audit_cancel(record)
    if as_json:
        print_json(tasks.public_json(record))
    else:
        print(f"task {task_id} {was}" if was else f"cancelled {task_id}")  # stdout-ok


def _audit_cancel(record: Any) -> None:
    """`task.cancelled` in the audit trail of the tools file the task was created from (its snapshot,
    else the file now): where its supervisor writes the task's other lines. A trail given only by
    `serve --audit` is not known here. A line that cannot be written is a warning: the task is cancelled."""
    from mcpwrap.config import load as config
    from mcpwrap.protocol import audit, identity
    from mcpwrap.state.audit_log import AuditError, AuditLog

    path = Path(record.tools_file)
    try:
        trail = (config.loads(record.snapshot.encode(), path) if record.snapshot is not None
                 else config.load(path)).audit
        if trail is not None:
            AuditLog(trail.path, max_bytes=trail.max_bytes).append(
                audit.task_cancelled(audit.Caller(identity.LOCAL, "cli"), None, record.task_id))
    except (config.ConfigError, AuditError) as exc:
        sys.stderr.write(f"mcpwrap: warning: the cancellation of {record.task_id} is not in the audit trail: {exc}\n")


def tasks_gc(file: str, state_dir: str | None, as_json: bool) -> None:
    store = _task_store(file, state_dir)
    removed = store.gc()
    if as_json:
        print_json({"removed": removed, "store": str(store.root)})
    else:
        print(f"removed {removed} expired task(s) from {store.root}")  # stdout-ok


def start_task(config: Any, tool: Any, args: dict[str, Any], state_dir: str | None, secret_file: str | None) -> tuple[Any, str]:
    """Create a durable task as `serve` would for a client (signed record, detached supervisor); its
    questions park it (`call` answers them while it waits, `tasks answer` from any shell)."""
    import time

    from mcpwrap.state import signing
    from mcpwrap.tasks import store as tasks
    from mcpwrap.tasks.supervisor import create_task

    if tool.task == "never":
        fail(f"{tool.name!r} has task = \"never\": it cannot run as a task (drop --task)", EXIT_USAGE)
    store = tasks.Store.for_tools_file(state_path(state_dir), config.path)
    secret = secret_path(secret_file)
    try:
        keyring = signing.ensure_secret(secret, time.time())
        record = create_task(store, config, tool, args, int(tool.task_ttl_s * 1000), keyring, secret,
                             positive(None, "--max-tasks", tasks.MAX_RUNNING), askable=True)
    except signing.SecretFileError as exc:
        fail(str(exc), EXIT_CONFIG)
    except tasks.TooManyTasks as exc:
        fail(str(exc), EXIT_TOOL_ERROR)
    return store, record.task_id


def task_outcome(store: Any, task_id: str, wait: bool, output: Path | None, as_json: bool,
                 ask: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> NoReturn:
    """Print a task's outcome as `call` prints a result (waiting for it with `wait`, each question
    it parks on answered by `ask`: its elicitation/create request -> the ElicitResult), and exit:
    0 completed, 1 failed, cancelled or a tool error, 4 still running."""
    import time

    from mcpwrap.protocol.tasking import outstanding, stored_result
    from mcpwrap.tasks import store as tasks

    record = _task_record(store, task_id)
    progress = ProgressLine(record.tool) if wait and sys.stderr.isatty() else None
    while wait and not record.terminal:
        if ask is not None and (keys := outstanding(record)):
            if progress:
                progress.clear()
            key = min(keys)
            store.answer(task_id, {key: ask(record.input_requests[key])})
        time.sleep(tasks.RESULT_POLL_S)
        record = _task_record(store, task_id)
        if progress and record.progress:
            progress.update(record.progress["progress"], record.progress.get("total"), None)
    if progress:
        progress.clear()
    if not record.terminal:
        fail(f"task {task_id} is still {record.status}; use --wait to wait for it", EXIT_PENDING)
    if as_json:
        print_json(record.result if record.result is not None else {"status": record.status, "error": record.error})
    elif record.result is not None:
        result = stored_result(record)
        print_text(result.text)
        write_binary(result, output)
    else:
        print(f"mcpwrap: task {task_id} {record.status}: {record.status_message}", file=sys.stderr)
    raise SystemExit(EXIT_OK if record.status == "completed" and not record.is_error else EXIT_TOOL_ERROR)


def tasks_answer(where: str, task_id: str | None, state_dir: str | None, answer: str | None, as_json: bool) -> None:
    """Answer the question a parked task asks (input_required), as a tasks/update would: checked against
    its form, taken once (a question answered already, here or by a client, keeps its first answer)."""
    from mcpwrap.protocol.answers import typed
    from mcpwrap.protocol.arguments import value_problems
    from mcpwrap.tasks import views as tasks

    store, task_id = _find_task(where, task_id, state_dir)
    record = _task_record(store, task_id)
    waiting = {k: v for k, v in (record.input_requests or {}).items() if k not in (record.input_responses or {})}
    if record.status != "input_required" or not waiting:
        fail(f"task {task_id} asks nothing now (it is {tasks.display_status(record)})", EXIT_USAGE)
    key, request = next(iter(waiting.items()))
    if answer is None:
        fail(f"task {task_id} asks: {request['params']['message']}\ngive the answer with --answer VALUE", EXIT_USAGE)
    # the form's one field: a command's `answer`, or a task_asks task's argument; none: its confirmation
    field, schema = next(iter(request["params"]["requestedSchema"]["properties"].items()), ("", {"type": "boolean"}))
    value = typed(schema.get("type"), answer)
    if problems := value_problems(schema, value):
        fail(f"{answer!r} does not answer the question: {'; '.join(problems)}", EXIT_USAGE)
    record = store.answer(task_id, {key: {"action": "accept", "content": {field: value}} if field
                                    else {"action": "accept" if value is True else "decline"}})
    if as_json:
        print_json(tasks.public_json(record))
    else:
        print(f"answered {task_id}")  # stdout-ok


def _task_store(file: str, state_dir: str | None) -> Any:
    from mcpwrap.tasks import store as tasks

    return tasks.Store.for_tools_file(state_path(state_dir), Path(file))


def _find_task(where: str, task_id: str | None, state_dir: str | None) -> tuple[Any, str]:
    """The store holding the task and its id: FILE's store, or the one store under the state dir that has it."""
    from mcpwrap.protocol.tasking import valid_id
    from mcpwrap.tasks import store as tasks

    if task_id is not None:
        return _task_store(where, state_dir), task_id
    state = state_path(state_dir)
    if not valid_id(where):
        fail(f"{where!r} is not a task id (ids are 22 or 23 characters of A-Z a-z 0-9 _ -); "
             "to name a tools file, give the id after it", EXIT_USAGE)
    stores = [tasks.Store(d / "tasks") for d in sorted(state.iterdir())] if state.is_dir() else []
    found = next((s for s in stores if s.path(where).exists()), None)
    if found is None:
        fail(f"no task {where!r} in any store under {state}", EXIT_USAGE)
    return found, where


def _task_record(store: Any, task_id: str) -> Any:
    from mcpwrap.protocol.tasking import TaskLookupError

    try:
        return store.get(task_id)
    except TaskLookupError as exc:
        _no_task(store, task_id, exc.reason)


def _no_task(store: Any, task_id: str, reason: str) -> NoReturn:
    fail(f"no task {task_id!r} in {store.root} ({reason.lower()})", EXIT_USAGE)
