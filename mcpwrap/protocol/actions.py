"""What `Core` hands its driver: the request's `Context`, and the actions the driver carries out.

Pure data: each action is a frozen dataclass the driver performs (`Send` a message, log a line, resolve
a call's path arguments, start or cancel a call, answer a running call's question, a timer, a task-store operation, a resource read, a
prompt, a completion, an audit record) and whose outcome it reports back through the matching `Core` method.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from mcpwrap.protocol.identity import LOCAL

if TYPE_CHECKING:
    from mcpwrap.config.model import Prompt, Tool
    from mcpwrap.protocol import resources
    from mcpwrap.protocol.jsonrpc import RequestId
    from mcpwrap.protocol.revisions import Revision


@dataclass(frozen=True)
class Context:
    """One request as the core sees it: its era's revision and per-request client facts."""
    id: RequestId
    method: str
    rev: Revision
    capabilities: Mapping[str, Any]
    log_level: str | None = None          # modern: from _meta; legacy: read from the session
    progress_token: str | int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    principal: str = LOCAL                # who sent it (identity.py): what it creates is bound to this

    @property
    def modern(self) -> bool:
        return self.rev.modern


@dataclass(frozen=True)
class Send:
    """Write this message (or a batch's answers) to the client.

    `answers`: the requests it answers (each one whose answer a batch's array holds); none for a
    notification or a request of ours. An HTTP driver routes an answer to its response by them.
    """
    message: dict[str, Any] | list[dict[str, Any]]
    answers: tuple[RequestId, ...] = ()


@dataclass(frozen=True)
class Stderr:
    """A line for mcpwrap's own log."""
    text: str
    level: str = "info"                   # debug | info | warning | error, filtered by --log-level


class Once(NamedTuple):
    """The accepted `requestState` a run comes from: one use of its nonce authorises one run."""
    nonce: str
    expires_at: float


@dataclass(frozen=True)
class ResolvePaths:
    """Resolve the call's path arguments (`run.arguments.resolve_paths` on `arguments`) and hand the
    outcome, the arguments resolved and the refusals, to `Core.paths_resolved`: the core cannot read
    the filesystem, and decides on the outcome as it would have on its own."""
    ctx: Context
    tool: Tool
    arguments: dict[str, Any]


@dataclass(frozen=True)
class StartCall:
    """Run the tool with `arguments` as placed (defaults filled in, paths resolved); the outcome goes to
    `Core.call_done` or `Core.call_failed`. With `once`, the driver first records the nonce as used in
    the state directory's ledger and runs nothing when it was used already or cannot be recorded:
    `Core.once_refused` answers then."""
    ctx: Context
    tool: Tool
    arguments: dict[str, Any]
    once: Once | None = None


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
    """A task-store operation; the driver performs it and hands what it found (a `TaskOutcome`
    value) to `Core.task_done`.

    `watch` follows a task this process created, for the legacy session's status notifications;
    `answer` keeps the client's answer to a question relayed to it (`responses`) for the task.
    """
    ctx: Context
    op: str                               # create | get | result | list | cancel | update | watch | answer
    task_id: str | None = None
    tool: Tool | None = None
    arguments: dict[str, Any] | None = None
    cursor: str | None = None
    once: Once | None = None              # "create" from an accepted requestState: as `StartCall.once`
    ttl_ms: int | None = None             # create: the ttl granted (the client's, clamped to the tool's)
    askable: bool = False                 # create: a question the command asks may park it in input_required
    asks: bool = False                    # create: its supervisor asks what the call still needs (asking.py)
    relayed: frozenset[str] = frozenset()  # result: the task's questions this request already relayed
    responses: dict[str, Any] | None = None   # answer: question key -> the client's ElicitResult


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
    command: Tool


@dataclass(frozen=True)
class Audit:
    """Append this record (`protocol.audit`'s constructors) to the audit trail: a decision of the
    core's (a refusal, a confirmation asked or answered, a task created, cancelled or seen ended).
    Emitted only when the tools file (or `serve --audit`) has an audit trail."""
    record: dict[str, Any]


@dataclass(frozen=True)
class AnswerQuestion:
    """Wake the running call waiting on question `token` (`Core.question_asked`) with its outcome: the
    answer `value`, or the `refusal` that ends the call (declined, cancelled, malformed); neither when
    nobody can be asked (the rule's default, if any, answers then)."""
    token: int
    value: Any = None
    refusal: str | None = None


@dataclass(frozen=True)
class StopComplete:
    """Every request waiting on this run was cancelled: stop its command."""
    run: int


Action: TypeAlias = (Send | ResolvePaths | StartCall | CancelCall | StartTimer | CancelTimer | Stderr | TaskOp
                     | ReadResource | GetPrompt | Complete | StopComplete | Audit | AnswerQuestion)
