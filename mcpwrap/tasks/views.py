"""What `mcpwrap tasks ...` shows of a task record: the JSON for scripts, a table and a block for people."""

from __future__ import annotations

import time
from typing import Any

import orjson

from mcpwrap.protocol import tasking
from mcpwrap.protocol.tasking import TaskRecord
from mcpwrap.tasks.store import Store, process_start


def public_json(record: TaskRecord) -> dict[str, Any]:
    """The record for people and scripts (`--json`): no snapshot, times in RFC 3339."""
    return {"taskId": record.task_id, "status": record.status, "statusMessage": record.status_message,
            "tool": record.tool, "arguments": record.arguments, "createdAt": tasking.iso(record.created_at),
            "lastUpdatedAt": tasking.iso(record.updated_at), "expiresAt": tasking.iso(record.expires_at),
            "ttlMs": record.ttl_ms, "pollIntervalMs": record.poll_ms, "progress": record.progress,
            "supervisorPid": record.supervisor_pid, "toolsFile": record.tools_file,
            "result": record.result, "error": record.error}


def display_status(record: TaskRecord) -> str:
    return "completed (error)" if record.status == "completed" and record.is_error else record.status


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def local_time(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def describe(record: TaskRecord, store: Store) -> str:
    """`mcpwrap tasks show`: one aligned key/value block."""
    rows = [["task", record.task_id], ["status", display_status(record)],
            ["message", record.status_message or ""], ["tool", record.tool],
            ["arguments", orjson.dumps(record.arguments).decode()], ["created", local_time(record.created_at)],
            ["updated", local_time(record.updated_at)], ["expires", local_time(record.expires_at)]]
    if record.progress:
        p = record.progress
        figures = f"{p['progress']:g}" + (f"/{p['total']:g}" if p.get("total") is not None else "")
        line = p.get("message") or ""
        rows.append(["progress", figures if figures in line else f"{figures} {line}".rstrip()])
    if record.supervisor_pid is not None:
        alive = process_start(record.supervisor_pid) == record.supervisor_start
        rows.append(["supervisor", f"pid {record.supervisor_pid} ({'running' if alive else 'exited'})"])
    if record.result is not None:
        rows.append(["exit code", str(record.result.get("exitCode"))])
    if record.error is not None:
        rows.append(["error", f"{record.error.get('code')} {record.error.get('message')}"])
    log = store.path(record.task_id, ".log")
    if log.exists():
        rows.append(["log", str(log)])
    return table(rows)
