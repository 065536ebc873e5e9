"""The actions of calls, questions, content and tasks: what `Core` hands its driver beyond
messages (`Send`) and log lines (`Stderr`).

`core` names them (`core.StartCall` and the like) and makes them when first named: creating a
dataclass costs a quarter to half a millisecond, and the first answers, which the front gives while
trio loads, need none of these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpwrap.config import Prompt, Tool
    from mcpwrap.jsonrpc import RequestId
    from mcpwrap.protocol import resources
    from mcpwrap.protocol.core import Context


@dataclass(frozen=True)
class StartCall:
    """Run the tool; the outcome goes to `Core.call_done` or `Core.call_failed`."""
    ctx: Context
    tool: Tool
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CancelCall:
    """The client cancelled this request: stop its call."""
    id: RequestId


@dataclass(frozen=True)
class StartTimer:
    """Call `Core.timer(key)` after this long, unless a CancelTimer comes first."""
    key: str
    seconds: float


@dataclass(frozen=True)
class CancelTimer:
    """The question a StartTimer guarded has ended: drop the timer with it."""
    key: str


@dataclass(frozen=True)
class TaskOp:
    """A task-store operation; `tasks.perform` reports back through the `Core.task_*` methods.

    `watch` follows a task this process created, for the legacy session's status notifications.
    """
    ctx: Context
    op: str                               # create | get | result | list | cancel | update | watch
    task_id: str | None = None
    tool: Tool | None = None
    arguments: dict[str, Any] | None = None
    cursor: str | None = None


@dataclass(frozen=True)
class ReadResource:
    """Read a file, run a resource's command or read a spool page; reported to `Core.resource_read`."""
    ctx: Context
    target: resources.Target


@dataclass(frozen=True)
class GetPrompt:
    """Resolve a prompt's resource and command messages; reported to `Core.prompt_done`."""
    ctx: Context
    prompt: Prompt
    arguments: dict[str, str]


@dataclass(frozen=True)
class Complete:
    """Run a `complete` command once for every request waiting on `run`; its output lines (or its
    `ProtocolError`) are reported to `Core.completed(run, ...)`."""
    run: int
    command: tuple[str, ...]


@dataclass(frozen=True)
class StopComplete:
    """Every request waiting on this run was cancelled: stop its command."""
    run: int
