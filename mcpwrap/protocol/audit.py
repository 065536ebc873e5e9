"""The audit trail's events: what a driver records of a call, a confirmation, a refusal, a task.
Pure, no I/O: the line format and its chain are `state.audit_chain`, the writer `state.audit_log`.

The event constructors take plain values and return the record without its chain fields (the
writer adds those). An argument marked `secret = true` in the tools file is replaced by
`REDACTED` in `arguments`, and so is every argv element its value filled (found by templating
the argv again with the value masked: `protocol.argv`). A refusal of an unknown tool records
only the arguments' names: no tools-file entry says which are secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcpwrap.config.model import Tool
from mcpwrap.protocol.argv import ArgumentError, build_argv
from mcpwrap.result import ToolResult

REDACTED = "[redacted]"
EVENTS = ("call.start", "call.end", "confirm.asked", "confirm.answered", "question.asked", "question.answered",
          "refused", "task.created", "task.cancelled", "task.finished")
Refusal = Literal["unknown", "denied", "invalid", "unanswered", "limit", "unaudited"]
Record = dict[str, Any]


@dataclass(frozen=True)
class Caller:
    """Who asked, over what: the identity as `identity.label` names it, "stdio" or "http", the session if any."""
    identity: str
    transport: str
    session: str | None = None


def _event(kind: str, caller: Caller | None, request_id: Any, **fields: Any) -> Record:
    record: Record = {"event": kind, **fields}
    if caller is not None:
        record.update(identity=caller.identity, transport=caller.transport, session=caller.session)
    if request_id is not None:
        record["request_id"] = request_id
    return record


def _masked(value: Any) -> Any:
    return [REDACTED] * len(value) if isinstance(value, list) else REDACTED


def redacted_arguments(tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments with each one marked `secret` replaced (an array keeps its length)."""
    secret = {a.name for a in tool.args if a.secret}
    return {k: _masked(v) if k in secret else v for k, v in arguments.items()}


def redacted_argv(tool: Tool, arguments: Mapping[str, Any], argv: Sequence[str]) -> list[str]:
    """`argv` (what ran, a wrapper's prefix included) with each element a secret argument filled
    replaced by its masked rendering; when the template cannot be rendered again, every element
    holding a secret value's text is replaced whole (more than needed, never less)."""
    if not any(a.secret and a.name in arguments for a in tool.args):
        return list(argv)
    try:
        real, shown = build_argv(tool, arguments), build_argv(tool, redacted_arguments(tool, arguments))
    except ArgumentError:
        real, shown = [], []
    if len(real) == len(shown):
        masks = {r: s for r, s in zip(real, shown) if r != s}
        return [masks.get(element, element) for element in argv]
    values = [str(v) for a in tool.args if a.secret and a.name in arguments
              for v in (arguments[a.name] if isinstance(arguments[a.name], list) else [arguments[a.name]])]
    return [REDACTED if any(v and v in element for v in values) else element for element in argv]


def call_start(caller: Caller, request_id: Any, tool: Tool, arguments: Mapping[str, Any], argv: Sequence[str],
               cwd: str, containment: str, sandbox: str | None) -> Record:
    """A call about to run (written before its process is spawned): what runs, where, confined how."""
    return _event("call.start", caller, request_id, tool=tool.name, arguments=redacted_arguments(tool, arguments),
                  argv=redacted_argv(tool, arguments, argv), cwd=cwd, containment=containment, sandbox=sandbox)


def call_end(caller: Caller, request_id: Any, tool: str, exit_status: int | None, signal: int | None,
             duration_s: float, bytes_out: int, truncated: bool, is_error: bool, cancelled: bool = False) -> Record:
    """A call's outcome: how its process ended (`signal` when killed), how long, how much output;
    `cancelled` when the client (or the server's shutdown) stopped it."""
    record = _event("call.end", caller, request_id, tool=tool, exit_status=exit_status, signal=signal,
                    duration_s=round(duration_s, 6), bytes_out=bytes_out, truncated=truncated, is_error=is_error)
    if cancelled:
        record["cancelled"] = True
    return record


def call_ended(caller: Caller, request_id: Any, tool: str, result: ToolResult | None, duration_s: float) -> Record:
    """`call_end` from a call's result (a negative exit code is the signal that killed it); without
    one, the call was cancelled."""
    if result is None:
        return call_end(caller, request_id, tool, None, None, duration_s, 0, False, True, cancelled=True)
    code = result.exit_code
    return call_end(caller, request_id, tool, code if code is None or code >= 0 else None,
                    -code if code is not None and code < 0 else None, result.duration_s, result.bytes_out,
                    result.truncated, result.is_error)


def sandbox_words(tool: Tool) -> str | None:
    """The tool's `sandbox` in a few words for `call.start` (None: it has none)."""
    box = tool.sandbox
    if box is None:
        return None
    return (f"landlock: read {len(box.read)} path(s), write {len(box.write)}, network "
            f"{'allowed' if box.network else 'denied'}, {'required' if box.required else 'best effort'}")


def confirm_asked(caller: Caller, request_id: Any, tool: Tool, arguments: Mapping[str, Any], question: str) -> Record:
    return _event("confirm.asked", caller, request_id, tool=tool.name,
                  arguments=redacted_arguments(tool, arguments), question=question)


def confirm_answered(caller: Caller, request_id: Any, tool: str, answer: str) -> Record:
    """The user's answer as the client gave it: "accept", "decline" or "cancel"."""
    return _event("confirm.answered", caller, request_id, tool=tool, answer=answer)


def question_asked(caller: Caller, request_id: Any, tool: str, prompt: str, question: str) -> Record:
    """A running command asked (its `ask` rule's prompt matched), in a session whose client may be asked."""
    return _event("question.asked", caller, request_id, tool=tool, prompt=prompt, question=question)


def question_answered(caller: Caller, request_id: Any, tool: str, answer: str) -> Record:
    """How a running command's question was met: "accept", "decline", "cancel", "error", or "nobody"
    (the client cannot be asked); never the answer itself, which may be a secret."""
    return _event("question.answered", caller, request_id, tool=tool, answer=answer)


def refused(caller: Caller, request_id: Any, reason: Refusal, tool: Tool | str, arguments: Mapping[str, Any],
            detail: str) -> Record:
    """Nothing ran: an unknown tool (only the names of its arguments), one `allow` denies, invalid
    arguments, a question the user (or client) did not answer (`unanswered`: declined, cancelled,
    timed out, cannot be asked), a limit, or (`unaudited`) a call.start that could not be written."""
    if isinstance(tool, str):
        return _event("refused", caller, request_id, reason=reason, tool=tool, argument_names=sorted(arguments),
                      detail=detail)
    return _event("refused", caller, request_id, reason=reason, tool=tool.name,
                  arguments=redacted_arguments(tool, arguments), detail=detail)


def task_created(caller: Caller, request_id: Any, task_id: str, tool: Tool, arguments: Mapping[str, Any]) -> Record:
    return _event("task.created", caller, request_id, task_id=task_id, tool=tool.name,
                  arguments=redacted_arguments(tool, arguments))


def task_cancelled(caller: Caller | None, request_id: Any, task_id: str) -> Record:
    """A cancellation asked for (by the local user's `mcpwrap tasks cancel`: identity local, transport "cli")."""
    return _event("task.cancelled", caller, request_id, task_id=task_id)


def task_finished(task_id: str, tool: str, status: str, exit_status: int | None, is_error: bool) -> Record:
    """A task seen ended (completed, failed, cancelled) by the server that audits it."""
    return _event("task.finished", None, None, task_id=task_id, tool=tool, status=status,
                  exit_status=exit_status, is_error=is_error)
