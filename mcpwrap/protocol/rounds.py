"""A call's rounds of questions with a client, until nothing is missing (`protocol.asking` decides what is).

A call advances through `next_step`. Legacy peers get each question as an `elicitation/create`
request; modern peers get `input_required` with a `requestState` sealed by `sealing`, which binds
the method, the tool, a digest of the arguments, the tools-file digest, the round, the answers
gathered so far and an expiry, so any process sharing the secret can resume, and the requestor's
principal (in the MAC only, never in the token): a state retried by another credential fails
verification as a tampered one does. `seal_request` and `unseal_request` are that sealing for any
request that asks (prompts/get's missing arguments too). A resumed call carries its state's nonce and
expiry (`Pending.state`) onto the action that starts it: the driver consumes them just before it runs,
so one accepted state authorises one run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mcpwrap.config.model import Config, Tool
from mcpwrap.protocol import sealing
from mcpwrap.protocol.actions import Context, Once
from mcpwrap.protocol.asking import Question, Ready, Resolution, Resolve, next_question
from mcpwrap.protocol.revisions import Revision
from mcpwrap.protocol.tools import CallRequest, ProtocolError
from mcpwrap.result import ToolResult, error_result

STATE_VERSION = 1


@dataclass(frozen=True)
class Pending:
    ctx: Context
    tool: Tool
    arguments: dict[str, Any]
    confirmed: bool = False
    as_task: bool = False
    round: int = 0
    question: Question | None = None
    original: dict[str, Any] = field(default_factory=dict)
    state: Once | None = None             # the requestState this retry came with: its nonce and expiry
    resolution: Resolution | None = None  # of the path arguments, for this round's `arguments` only


def _invalid(pending: Pending, problems: list[str]) -> ToolResult | ProtocolError:
    message = f"invalid arguments for tool '{pending.tool.name}': " + "; ".join(problems)
    if pending.ctx.rev.has("invalid_arguments.as_result"):
        return error_result(message + " (nothing ran)")
    return ProtocolError(-32602, message)


def next_step(pending: Pending) -> Question | Resolve | Ready | ToolResult | ProtocolError:
    """What the call still needs: a question, its paths resolved, a refusal, or nothing (`Ready`)."""
    step = next_question(pending.tool, pending.arguments, pending.confirmed, pending.resolution)
    return _invalid(pending, step) if isinstance(step, list) else step


def apply_answer(pending: Pending, key: str | None, answer: Mapping[str, Any]) -> Pending | ToolResult:
    """Fold one ElicitResult (to the question `key` names) into the call; decline and cancel end it."""
    action = answer.get("action")
    if action in ("decline", "cancel"):
        verb = "declined" if action == "decline" else "cancelled"
        return error_result(f"the user {verb} {'the confirmation' if key == 'confirm' else 'to provide the arguments'} "
                            f"for '{pending.tool.name}'; nothing ran")
    if action != "accept":
        return error_result("the elicitation answer was not accept, decline or cancel; nothing ran")
    if key == "confirm":
        return replace(pending, confirmed=True, round=pending.round + 1, resolution=None)
    content = answer.get("content") or {}
    if not isinstance(content, dict):
        return error_result("the elicitation answer's content is not an object; nothing ran")
    asked = [a for a in pending.tool.args if a.elicit and a.name not in pending.arguments]
    gathered = dict(pending.arguments)
    for arg in asked:
        if arg.name in content:
            gathered[arg.name] = content[arg.name]
        elif "default" in arg.schema:
            gathered[arg.name] = arg.schema["default"]     # left empty: the default, not a second question
    unanswered = [a.name for a in asked if a.name not in gathered]
    if unanswered:
        return error_result(f"the user accepted without providing {', '.join(unanswered)} for "
                            f"'{pending.tool.name}'; nothing ran")
    return replace(pending, arguments=gathered, round=pending.round + 1, resolution=None)


def seal_state(pending: Pending, question: Question, config: Config, keyring: sealing.Keys, now: float) -> str:
    return seal_request(pending.ctx, pending.tool.name, pending.original, config, keyring, now,
                        r=pending.round, g=pending.arguments, k=pending.confirmed, q=question.key)


def seal_request(ctx: Context, name: str, original: Mapping[str, Any], config: Config, keyring: sealing.Keys,
                 now: float, **progress: Any) -> str:
    """The requestState of a question asked for `ctx`'s request (its method, on the tool or prompt `name`,
    with the arguments `original`): `progress` is where it stands (`r` its round, `g` the arguments
    gathered so far, `q` the question's key, `k` confirmed), for `unseal_request` to give back."""
    claims = {"v": STATE_VERSION, "m": ctx.method, "t": name, "a": sealing.digest(original), "c": config.digest,
              **progress}
    return sealing.seal(keyring, claims, now, bound=ctx.principal)


def _differs(claims: Mapping[str, Any], method: str, name: str, original: Mapping[str, Any],
             config: Config) -> list[str]:
    """What differs between a verified state's claims (`seal_request`) and this retry, in words."""
    kind = "tool" if method == "tools/call" else "prompt"
    checks = [
        (claims.get("v") == STATE_VERSION, f"it is of state format {claims.get('v')!r}, not {STATE_VERSION}"),
        (claims.get("m") == method, f"it was issued for method {claims.get('m')!r}, not {method}"),
        (claims.get("t") == name, f"it was issued for {kind} {claims.get('t')!r}, not {name!r}"),
        (claims.get("a") == sealing.digest(original), "it was issued for other arguments than this request's"),
        (claims.get("c") == config.digest, "the tools file changed since it was issued (it was reloaded)"),
        (isinstance(claims.get("g"), dict) and isinstance(claims.get("r"), int),
         "its answers so far or its round are malformed"),
    ]
    return [words for ok, words in checks if not ok]


def ask_result(question: Question, state: str, rev: Revision) -> dict[str, Any]:
    """The input_required result asking `question`, with the requestState to send back with the answer."""
    return {"inputRequests": {question.key: question.request(rev)}, "requestState": state}


def input_responses(ctx: Context) -> dict[str, Any]:
    """A modern retry's `inputResponses` (an object, else -32602)."""
    responses = ctx.params.get("inputResponses", {})
    if not isinstance(responses, dict):
        raise ProtocolError(-32602, "inputResponses must be an object")
    return responses


def unseal_request(ctx: Context, name: str, original: Mapping[str, Any], config: Config, keyring: sealing.Keys,
                   now: float) -> sealing.Unsealed:
    """`ctx`'s requestState verified as one `seal_request` made for this very request (its method, `name`,
    `original` arguments, the tools file and the requestor), else -32602 with the reason for stderr."""
    state = ctx.params.get("requestState")
    if not isinstance(state, str):
        raise ProtocolError(-32602, "invalid or expired requestState", diagnostic="requestState is not a string")
    try:
        unsealed = sealing.unseal(keyring, state, now, bound=ctx.principal)   # another's: a bad signature
    except sealing.StateError as exc:
        raise ProtocolError(-32602, "invalid or expired requestState", diagnostic=f"requestState: {exc.reason}") from None
    differs = _differs(unsealed.claims, ctx.method, name, original, config)
    if differs:
        raise ProtocolError(-32602, "invalid or expired requestState",
                            diagnostic=f"requestState refused: {'; '.join(differs)}")
    return unsealed


def resume(ctx: Context, request: CallRequest, config: Config, keyring: sealing.Keys, now: float,
           as_task: bool) -> tuple[Pending, str | None, Mapping[str, Any] | None]:
    """A modern retry: verify requestState; the call as the state left it, the question the state
    names and the answer given to it (None: not answered yet, so the same question is asked again),
    for `apply_answer`.

    Answers without a requestState answer no question of ours: the call starts afresh, so what it
    needs is asked again (SEP-2322: a new input_required rather than an error), nothing taken on trust."""
    responses = input_responses(ctx)
    if "requestState" not in ctx.params:
        return Pending(ctx, request.tool, dict(request.arguments), as_task=as_task, original=request.arguments), None, None
    unsealed = unseal_request(ctx, request.tool.name, request.arguments, config, keyring, now)
    claims = unsealed.claims
    pending = Pending(ctx, request.tool, claims["g"], confirmed=claims.get("k") is True,
                      as_task=as_task, round=claims["r"], original=request.arguments,
                      state=Once(unsealed.nonce, unsealed.expires_at))
    key = claims.get("q")
    answer = responses.get(key) if isinstance(key, str) else None
    if answer is not None and not isinstance(answer, dict):
        raise ProtocolError(-32602, f"inputResponses.{key} must be an elicitation result object")
    return pending, key if isinstance(key, str) else None, answer
