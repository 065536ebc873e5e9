"""Task records as the protocol sees them, rendered for each era. Pure: no I/O, no trio.

`TaskRecord` is the era-neutral value `tasks/store.py` keeps on disk. Its `status`
follows the 2026 extension's meaning: a tool result with `isError: true` is
`completed` (with that result), and `failed` is kept for errors that are not
tool results (the tool vanished, the supervisor died), which carry `error`.
The 2025-11-25 view turns an `isError` completion into `failed`, as that
revision prescribes. Field names never cross eras: `ttl`/`pollInterval` and
the nested `{"task": ...}` are legacy; `ttlMs`/`pollIntervalMs`, the flat
result and `resultType` are modern.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mcpwrap.config.model import Tool
from mcpwrap.protocol import grammar
from mcpwrap.protocol.revisions import Revision
from mcpwrap.protocol.tools import (
    ProtocolError,
    invalid_params,
    progress_params,
    render_result,
)
from mcpwrap.result import (
    NO_STRUCTURED,
    MalformedOutput,
    ToolResult,
    error_result,
    parse_block,
)

RELATED_TASK = "io.modelcontextprotocol/related-task"
STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
TERMINAL = frozenset({"completed", "failed", "cancelled"})
# status -> statuses it may move to; terminal states move nowhere (a cancelled task stays cancelled)
TRANSITIONS: dict[str, frozenset[str]] = {
    "working": frozenset({"working", "input_required", "completed", "failed", "cancelled"}),
    "input_required": frozenset({"working", "input_required", "completed", "failed", "cancelled"}),
    "completed": frozenset(), "failed": frozenset(), "cancelled": frozenset(),
}
# `new_id()` (23 characters), or token_urlsafe(16) (22) as earlier versions made them; checked before
# any path is built: base64url, and never a leading '-' that would read as a command-line option
TASK_ID_LENGTHS = (22, 23)
MIN_TTL_MS = 1_000                              # a shorter requested ttl would expire before a first poll
CREATED_MESSAGE = "The operation is now in progress."
CANCELLED_MESSAGE = "The task was cancelled by request."


@dataclass(frozen=True)
class TaskRecord:
    """One task, era-neutral. Times are epoch seconds; `result` is `ToolResult.to_json()`."""
    task_id: str
    status: str
    tool: str
    arguments: dict[str, Any]
    created_at: float
    updated_at: float
    ttl_ms: int
    poll_ms: int
    tools_file: str                       # absolute path of the tools file (names the store)
    digest: str                           # SHA-256 of the tools file the call was validated against
    status_message: str | None = None
    snapshot: str | None = None           # that file's text, so the supervisor runs what was validated
    supervisor_pid: int | None = None
    supervisor_start: int | None = None   # /proc/<pid>/stat field 22: tells a reused pid apart
    progress: dict[str, Any] | None = None    # {progress, total?, message?}
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None   # {code, message}: failed without a tool result
    mac: str | None = None                # binds the creation fields to the creator's secret (tasks/store.py)
    principal: str | None = None          # who created it (identity.py), MAC-bound; None: before principals
    askable: bool = False                 # its creator declared elicitation: a question parks it in input_required
    input_requests: dict[str, Any] | None = None    # input_required: key -> the elicitation/create request
    input_responses: dict[str, Any] | None = None   # tasks/update: key -> the ElicitResult, taken by the supervisor
    asks: bool = False                    # MAC-bound: its supervisor asks for what the call lacks before running

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def expires_at(self) -> float:
        return self.created_at + self.ttl_ms / 1000

    @property
    def is_error(self) -> bool:
        return bool(self.result and self.result.get("isError"))


class TaskLookupError(LookupError):
    """No such task for a requestor: unknown, malformed or expired id (they look alike on purpose)."""

    def __init__(self, reason: str = "Task not found") -> None:
        super().__init__(reason)
        self.reason = reason


class TaskTerminalError(Exception):
    """A cancel arrived for a task that had already finished."""

    def __init__(self, record: TaskRecord) -> None:
        super().__init__(f"task {record.task_id} is already {record.status}")
        self.record = record


def new_id() -> str:
    """128 random bits (token_urlsafe(16)) behind a letter or digit, so no id reads as a command-line option."""
    return secrets.choice(string.ascii_letters + string.digits) + secrets.token_urlsafe(16)


def valid_id(task_id: Any) -> bool:
    """A task id's grammar: 22 base64url characters, or 23 of which the first is a letter or digit."""
    return grammar.token(task_id, *TASK_ID_LENGTHS) and (len(task_id) == 22 or task_id[0] not in "-_")


def iso(t: float) -> str:
    """RFC 3339 UTC with a Z, millisecond precision."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def requested_ttl_ms(params: Mapping[str, Any], tool: Tool) -> int:
    """The ttl granted: the client's `params.task.ttl` (2025-11-25) clamped to the tool's `task_ttl`."""
    ceiling = max(MIN_TTL_MS, int(tool.task_ttl_s * 1000))
    task = params.get("task")
    asked = task.get("ttl") if isinstance(task, dict) else None
    if not isinstance(asked, int) or isinstance(asked, bool):
        return ceiling
    return min(max(asked, MIN_TTL_MS), ceiling)


def check_task_params(params: Mapping[str, Any]) -> None:
    """`params.task` is TaskMetadata `{ttl?: integer}`; anything else is -32602."""
    task = params.get("task")
    if task is None:
        return
    ttl = task.get("ttl") if isinstance(task, dict) else None
    if not isinstance(task, dict) or (ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0)):
        raise invalid_params("'task' must be an object like {\"ttl\": <milliseconds>}")


def lookup_error(reason: str) -> ProtocolError:
    return invalid_params(f"Failed to retrieve task: {reason}")


def terminal_error(record: TaskRecord) -> ProtocolError:
    return invalid_params(f"Cannot cancel task: already in terminal status '{legacy_status(record)}'")


# --- stored result ------------------------------------------------------------------------
def stored_result(record: TaskRecord) -> ToolResult:
    """The ToolResult kept in the record (a broken record becomes an error result, not a crash)."""
    doc = record.result or {}
    try:
        blocks = tuple(parse_block(b, f"content[{i}]") for i, b in enumerate(doc.get("content", [])))
    except MalformedOutput as exc:
        return error_result(f"the stored result of task {record.task_id} is unreadable: {exc}")
    return ToolResult(content=blocks, is_error=bool(doc.get("isError")),
                      structured=doc.get("structuredContent", NO_STRUCTURED), exit_code=doc.get("exitCode"),
                      truncated=bool(doc.get("truncated")), timed_out=bool(doc.get("timedOut")))


def record_error(record: TaskRecord) -> ProtocolError:
    """The JSON-RPC error a failed (non-tool-result) or cancelled task stands for."""
    if record.status == "cancelled":
        return ProtocolError(-32603, "Task was cancelled")
    error = record.error or {}
    code = error.get("code")
    return ProtocolError(code if isinstance(code, int) and not isinstance(code, bool) else -32603,
                         str(error.get("message") or record.status_message or "Task failed"), error.get("data"))


def outstanding(record: TaskRecord) -> frozenset[str]:
    """The keys of the questions the task waits on: asked (`input_requests`), not yet answered."""
    if record.status != "input_required" or not record.input_requests:
        return frozenset()
    return frozenset(record.input_requests) - frozenset(record.input_responses or {})


# --- 2025-11-25 ---------------------------------------------------------------------------
def legacy_status(record: TaskRecord) -> str:
    """2025-11-25: a tool result with isError makes the task `failed`."""
    return "failed" if record.status == "completed" and record.is_error else record.status


def _task(record: TaskRecord, status: str, ttl_key: str, poll_key: str) -> dict[str, Any]:
    """The task object; the eras differ in the status vocabulary and the names of two fields."""
    task: dict[str, Any] = {"taskId": record.task_id, "status": status}
    if record.status_message:
        task["statusMessage"] = record.status_message
    task.update({"createdAt": iso(record.created_at), "lastUpdatedAt": iso(record.updated_at),
                 ttl_key: record.ttl_ms, poll_key: record.poll_ms})
    return task


def legacy_task(record: TaskRecord) -> dict[str, Any]:
    return _task(record, legacy_status(record), "ttl", "pollInterval")


def legacy_payload(record: TaskRecord, rev: Revision) -> dict[str, Any]:
    """tasks/result: what the tools/call would have returned, tagged with the task; raises its error."""
    if record.status == "cancelled" or (record.status == "failed" and record.result is None):
        raise record_error(record)
    result = render_result(stored_result(record), rev)
    result["_meta"] = {**result.get("_meta", {}), RELATED_TASK: {"taskId": record.task_id}}
    return result


def legacy_list(records: Sequence[TaskRecord], next_cursor: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"tasks": [legacy_task(r) for r in records]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def status_changed(previous: TaskRecord | None, current: TaskRecord) -> bool:
    """Whether a 2025-11-25 peer should hear `notifications/tasks/status` (None: as created)."""
    before = (legacy_status(previous), previous.status_message) if previous else ("working", CREATED_MESSAGE)
    return before != (legacy_status(current), current.status_message)


def task_progress_params(record: TaskRecord, token: str | int, rev: Revision) -> dict[str, Any] | None:
    """A progress notification for a running task, on the call's original token (none once terminal)."""
    progress = record.progress
    if record.terminal or not progress:
        return None
    params = progress_params(token, progress["progress"], progress.get("total"), progress.get("message"), rev)
    params["_meta"] = {RELATED_TASK: {"taskId": record.task_id}}
    return params


# --- 2026-07-28 extension -----------------------------------------------------------------
def modern_task(record: TaskRecord) -> dict[str, Any]:
    return _task(record, record.status, "ttlMs", "pollIntervalMs")


def modern_detailed(record: TaskRecord, rev: Revision) -> dict[str, Any]:
    """tasks/get: the task with its outcome inlined (`result` when completed, `error` when failed), and
    the questions it still waits on (`inputRequests`, answered ones left out)."""
    task = modern_task(record)
    if waiting := outstanding(record):
        task["inputRequests"] = {key: (record.input_requests or {})[key] for key in sorted(waiting)}
    if record.status == "completed":
        task["result"] = render_result(stored_result(record), rev)
    elif record.status == "failed":
        task["error"] = record_error(record).to_json()
    return task


def create_result(record: TaskRecord, rev: Revision) -> dict[str, Any]:
    """The answer to a tools/call that became a task (the caller stamps modern results)."""
    return modern_task(record) if rev.modern else {"task": legacy_task(record)}


# --- tasks/list pagination: cursors into the store's creation index, opaque and validated ---
def encode_cursor(key: int, position: int, task_id: str) -> str:
    """The page after the task whose index entry has `key` (`position` is where it was: a hint)."""
    return grammar.encode_cursor(2, key, position, task_id)


def decode_cursor(cursor: Any) -> tuple[int, int, str]:
    """(key, position, task id) of a cursor `encode_cursor` made; anything else is -32602."""
    fields = grammar.cursor_fields(cursor, 4) or ["", "", "", ""]
    key, position = grammar.decimal(fields[1], 20), grammar.decimal(fields[2], 12)
    if fields[0] != "2" or key is None or position is None or not valid_id(fields[3]):
        raise invalid_params("Invalid cursor")
    return key, position, fields[3]
