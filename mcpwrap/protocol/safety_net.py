"""What a bug met in the protocol core costs: the request it met, answered -32603, and one log line.

`Core.receive` turns an exception it meets while deciding a message into `unexpected`'s actions,
and the drivers do the same for what escapes it; `bug_report` is the line they log.
"""

from __future__ import annotations

from pathlib import Path

from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol.actions import Action, Send, Stderr
from mcpwrap.protocol.jsonrpc import Batch, Request

def bug_report(what: str, exc: BaseException) -> str:
    """The one log line that names a bug: what it cost, the exception (a group's only one, unwrapped), where."""
    import traceback

    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    place = f" at {Path(where[0].filename).name}:{where[0].lineno}" if where else ""
    return f"mcpwrap: internal error {what}: {type(exc).__name__}: {exc}{place}".replace("\n", " ")


def unexpected(message: jsonrpc.Message | None, exc: Exception) -> list[Action]:
    """What a bug met while deciding `message` becomes: -32603 for each request it carries (so each is
    still answered once) and one line for mcpwrap's log. Drivers use it for what escapes `Core.receive`."""
    items = message.items if isinstance(message, Batch) else (message,)
    requests = [m for m in items if isinstance(m, Request)]
    answers = [{"jsonrpc": "2.0", "id": r.id, "error": {"code": jsonrpc.INTERNAL_ERROR, "message": (
        f"internal error: {r.method} failed unexpectedly; nothing more was done (see the server's log)")}}
               for r in requests]
    actions: list[Action] = [Stderr(bug_report(f"on {_described(message)}", exc), "error")]
    if answers:
        actions.append(Send(answers if isinstance(message, Batch) else answers[0], tuple(r.id for r in requests)))
    return actions


def _described(message: jsonrpc.Message | None) -> str:
    if message is None:
        return "a message"
    if isinstance(message, Batch):
        return f"a batch of {len(message.items)}"
    if isinstance(message, Request):
        return f"{message.method} request {message.id!r}"
    return type(message).__name__.lower()
