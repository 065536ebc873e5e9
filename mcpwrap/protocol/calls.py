"""The tools/call pipeline over a core's state: parse, decide task or call, ask, start.

A call is parsed and its task decision made (`task_decision`, the revision's rule); then
`advance` asks the user what is still missing (an `elicitation/create` of ours over a legacy
session, an `input_required` result for a modern request) or starts it: `StartCall`, or a
`TaskOp` "create" when it runs as a task. A call of the tasks extension to a `task_asks` tool whose
client can be asked becomes its task at once, with the arguments as given: the task asks what is missing itself
(`asks`: its supervisor parks it in input_required, one inputRequest per missing argument). A call with path arguments first has them resolved by
the driver (`ResolvePaths`, answered through `resolved`), each round, before anything is asked or
started. A modern retry's `requestState` nonce travels on the starting action (`once`): the driver
records it as used just before the call (or task) starts and, when it was used already or cannot
be recorded, hands that back (`once_refused`): one accepted confirmation authorises one run, a
replay is -32602. Each `StartTimer` of a question is matched by a `CancelTimer` when the question
ends before the timer fires.

While a call runs, its command may ask a question (`question_asked`): over a legacy session whose
client declared elicitation it goes out as our `elicitation/create`, and the client's answer wakes
the call (`AnswerQuestion`); anyone else cannot be asked, which the call is told at once. The
call's own `ask_timeout` bounds the wait (`question_over` withdraws a question it gave up on).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mcpwrap.config.model import Tool
from mcpwrap.protocol import answers, asking, audit, rounds, tasking
from mcpwrap.protocol.actions import (Action, AnswerQuestion, CancelTimer, Context, ResolvePaths, StartCall,
                                      StartTimer, Stderr, TaskOp)
from mcpwrap.protocol.jsonrpc import Response
from mcpwrap.protocol.revisions import TASKS_EXTENSION
from mcpwrap.protocol.server_state import ServerState, declares_extension, needs_extension
from mcpwrap.protocol.tools import ProtocolError, parse_call, render_result
from mcpwrap.result import ToolResult, error_result

ELICIT_TIMEOUT_S = 600.0


def call(core: ServerState, ctx: Context) -> list[Action]:
    """The handler of tools/call: a fresh call, or a modern retry carrying the user's answers. With an
    audit trail, a call refused with an error is recorded (`refused`: unknown, or invalid)."""
    try:
        return _call(core, ctx)
    except ProtocolError as error:
        if core.config.audit is None:
            raise
        name = ctx.params.get("name")
        tool = core.config.tool(name) if isinstance(name, str) else None
        given = ctx.params.get("arguments")
        return [*core.refusal(ctx.id, error, ctx.rev),
                *core.audited(ctx, audit.refused, "invalid" if tool else "unknown", tool or str(name),
                              given if isinstance(given, dict) else {}, error.message)]


def _call(core: ServerState, ctx: Context) -> list[Action]:
    request = parse_call(core.config, ctx.params)
    as_task = task_decision(ctx, request.tool)
    actions: list[Action] = []
    if ctx.modern and ("requestState" in ctx.params or "inputResponses" in ctx.params):
        pending, key, answer = rounds.resume(ctx, request, core.config, core.keyring_source(), core.clock(), as_task)
        outcome: rounds.Pending | ToolResult = pending
        if answer is not None:
            actions = _answer_audit(core, pending, key, answer)
            outcome = rounds.apply_answer(pending, key, answer)
    else:
        outcome = rounds.Pending(ctx, request.tool, dict(request.arguments), as_task=as_task,
                                 original=request.arguments)
    if not isinstance(outcome, rounds.Pending):      # refused (a ToolResult)
        return actions + _refused(core, ctx, request.tool, outcome, as_task, "unanswered")
    return actions + _advance(core, outcome)


def _answer_audit(core: ServerState, pending: rounds.Pending, key: str | None, answer: object) -> list[Action]:
    """`confirm.answered` when the answer is to the confirmation (accept, decline or cancel)."""
    if key != "confirm":
        return []
    action = answer.get("action") if isinstance(answer, dict) else None
    return core.audited(pending.ctx, audit.confirm_answered, pending.tool.name, str(action))


def task_decision(ctx: Context, tool: Tool) -> bool:
    """Whether this call becomes a task; raises the revision's error when it cannot run."""
    if ctx.rev.has("tasks.core"):
        from mcpwrap.protocol import tasking

        tasking.check_task_params(ctx.params)
        asked = isinstance(ctx.params.get("task"), dict)
        if asked and tool.task == "never":
            raise ProtocolError(-32601, f"tool '{tool.name}' does not support task execution")
        if not asked and tool.task == "always":
            raise ProtocolError(-32601, f"tool '{tool.name}' must be called as a task (execution.taskSupport is required)")
        return asked
    if ctx.rev.has("request.extensions"):
        declared = declares_extension(ctx, TASKS_EXTENSION)
        if tool.task == "always" and not declared:
            raise needs_extension(TASKS_EXTENSION, f"tool '{tool.name}' runs only as a task")
        return declared and tool.task != "never"
    return False


def _advance(core: ServerState, pending: rounds.Pending) -> list[Action]:
    """Ask what is still missing, have the paths resolved, or start the call (or task)."""
    ctx = pending.ctx
    step = rounds.next_step(pending)
    if isinstance(step, ProtocolError):
        raise step
    if isinstance(step, asking.Question):
        if not (pending.as_task and ctx.modern and pending.tool.task_asks and asking.can_ask(ctx.capabilities)):
            return _ask(core, pending, step)
        core.inflight[ctx.id] = ctx           # the task asks itself, parked in input_required
        return [_create(pending, pending.arguments, asks=True)]
    if isinstance(step, ToolResult):                # refused
        return _refused(core, ctx, pending.tool, step, pending.as_task, "invalid")
    core.inflight[ctx.id] = ctx
    if isinstance(step, asking.Resolve):
        core.resolving[ctx.id] = pending
        return [ResolvePaths(ctx, pending.tool, step.arguments)]
    if pending.as_task:
        return [_create(pending, step.arguments)]
    return [StartCall(ctx, pending.tool, step.arguments, pending.state)]


def _create(pending: rounds.Pending, arguments: dict[str, Any], asks: bool = False) -> TaskOp:
    """The task to create for the call. `asks`: with what is still missing not asked yet (a tasks
    extension call whose client can be asked): its supervisor asks it, as the task's inputRequests."""
    ctx = pending.ctx
    return TaskOp(ctx, "create", tool=pending.tool, arguments=arguments, once=pending.state,
                  ttl_ms=tasking.requested_ttl_ms(ctx.params, pending.tool), asks=asks,
                  askable=asking.can_ask(ctx.capabilities) and (ctx.modern or ctx.rev.has("elicitation.server_request")))


def resolved(core: ServerState, ctx: Context, resolution: asking.Resolution) -> list[Action]:
    """The driver resolved the call's path arguments: the decision goes on with the outcome."""
    pending = core.resolving.pop(ctx.id, None)
    if pending is None or not core.settled(ctx):     # cancelled meanwhile
        return []
    return _carry_on(core, pending, replace(pending, resolution=resolution))


def once_refused(core: ServerState, ctx: Context, spent: bool | OSError) -> list[Action]:
    """A call (or task) from an accepted requestState did not start: the ledger could not keep the
    record of its nonce (an OSError; `LedgerError` is one), or the nonce was used already."""
    if isinstance(spent, OSError):
        error = ProtocolError(-32603, "the requestState could not be recorded as used; nothing ran",
                              diagnostic=str(spent))
    else:
        error = ProtocolError(-32602, "invalid or expired requestState", diagnostic="requestState already used")
    answer = [core.error_reply(ctx, error)] if core.settled(ctx) else []
    given = ctx.params.get("arguments")
    return [*answer, Stderr(f"mcpwrap: request {ctx.id!r} rejected: {error.diagnostic}", "warning"),
            *core.audited(ctx, audit.refused, "invalid", str(ctx.params.get("name")),
                          given if isinstance(given, dict) else {}, f"{error.message}: {error.diagnostic}")]


def _ask(core: ServerState, pending: rounds.Pending, question: asking.Question) -> list[Action]:
    ctx = pending.ctx
    if ctx.modern:
        if not asking.can_ask(ctx.capabilities):
            raise ProtocolError(-32021, f"tool '{pending.tool.name}' needs {question.purpose} from the user, "
                                "and this request declares no elicitation capability",
                                {"requiredCapabilities": {"elicitation": {}}})
        state = rounds.seal_state(pending, question, core.config, core.keyring_source(), core.clock())
        return [*_asked_audit(core, pending, question),
                core.reply(ctx, rounds.ask_result(question, state, ctx.rev), "input_required")]
    if not (ctx.rev.has("elicitation.server_request") and asking.can_ask(ctx.capabilities)):
        return _refused(core, ctx, pending.tool, error_result(
            f"tool '{pending.tool.name}' needs {question.purpose} from the user before it runs, but this "
            "client cannot be asked (it declared no elicitation capability); nothing ran"), pending.as_task, "unanswered")
    if not question.fits(ctx.rev):
        return _refused(core, ctx, pending.tool, error_result(
            f"tool '{pending.tool.name}' needs {question.purpose} from the user, and a list of choices cannot "
            f"be asked for in protocol revision {ctx.rev.version} (multi-select forms came in 2025-11-25); "
            "nothing ran"), pending.as_task, "unanswered")
    ask_id = next(core.ask_ids)
    core.asks[ask_id] = replace(pending, question=question)
    core.inflight[ctx.id] = ctx
    request = {"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
               "params": question.request(ctx.rev)["params"]}
    return [*_asked_audit(core, pending, question), *core.to_client(ctx, ("ask", ask_id), request),
            StartTimer(ask_id, ELICIT_TIMEOUT_S)]


def _asked_audit(core: ServerState, pending: rounds.Pending, question: asking.Question) -> list[Action]:
    """`confirm.asked` when the question is the confirmation."""
    if question.key != "confirm":
        return []
    return core.audited(pending.ctx, audit.confirm_asked, pending.tool, pending.arguments, question.message)


def question_asked(core: ServerState, ctx: Context, token: int, asked: answers.Asked) -> list[Action]:
    """A running call's question: to the client as `elicitation/create`, or nobody can be asked."""
    audited = core.audited(ctx, audit.question_asked, asked.tool, asked.prompt, asked.rule.message)
    if (ctx.modern or ctx.id not in core.inflight or not ctx.rev.has("elicitation.server_request")
            or not asking.can_ask(ctx.capabilities)):
        return [*audited, *core.audited(ctx, audit.question_answered, asked.tool, "nobody"), AnswerQuestion(token)]
    ask_id = next(core.ask_ids)
    core.questions[ask_id] = (ctx, token, asked.tool)
    request = {"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create", "params": asked.request()["params"]}
    return [*audited, *core.to_client(ctx, ("ask", ask_id), request)]


def question_over(core: ServerState, token: int) -> list[Action]:
    """The call no longer waits for its question `token`: it is withdrawn, if it is still out."""
    key = next((key for key, (_, waiting, _) in core.questions.items() if waiting == token), None)
    if key is None:
        return []
    del core.questions[key]
    return core.withdraw(key, "the command no longer waits for the answer")


def _question_answered(core: ServerState, key: str, response: Response) -> list[Action]:
    ctx, token, tool = core.questions.pop(key)
    action = (response.result or {}).get("action") if response.error is None else "error"
    audited = core.audited(ctx, audit.question_answered, tool, action if action in ("accept", "decline", "cancel") else "error")
    if response.error is not None:
        message = response.error.get("message", "error")
        return [*audited, AnswerQuestion(token, refusal=f"the client could not ask the user: {message}")]
    ok, value = answers.from_elicitation(response.result or {})
    return [*audited, AnswerQuestion(token, value) if ok else AnswerQuestion(token, refusal=value)]


def answered(core: ServerState, response: Response) -> list[Action]:
    """A client's answer to our elicitation/create: the call goes on with it, or ends refused."""
    key = str(response.id)
    if key in core.questions:
        return _question_answered(core, key, response)
    pending = core.asks.pop(key, None)
    if pending is None:
        return []
    core.inflight.pop(pending.ctx.id, None)
    question = pending.question.key if pending.question else None
    if response.error is not None:
        outcome: rounds.Pending | ToolResult = error_result(
            f"the client could not ask the user: {response.error.get('message', 'error')}; nothing ran")
        audited = _answer_audit(core, pending, question, {"action": "error"})
    else:
        outcome = rounds.apply_answer(pending, question, response.result or {})
        audited = _answer_audit(core, pending, question, response.result or {})
    return [CancelTimer(key), *audited, *_carry_on(core, pending, outcome)]


def timed_out(core: ServerState, key: str) -> list[Action]:
    """Our question `key` had no answer in time: it is withdrawn and its call ends refused."""
    pending = core.asks.pop(key, None)
    if pending is None:
        return []
    core.inflight.pop(pending.ctx.id, None)
    return core.withdraw(key, "timed out") + _carry_on(core, pending, error_result(
        f"no answer from the user within {ELICIT_TIMEOUT_S:g}s; nothing ran"))


def _carry_on(core: ServerState, pending: rounds.Pending, outcome: rounds.Pending | ToolResult) -> list[Action]:
    ctx = pending.ctx
    try:
        if isinstance(outcome, ToolResult):
            return _refused(core, ctx, pending.tool, outcome, pending.as_task, "unanswered")
        return _advance(core, outcome)
    except ProtocolError as error:
        return [core.error_reply(ctx, error),
                *core.audited(ctx, audit.refused, "invalid", pending.tool, pending.arguments, error.message)]


def _refused(core: ServerState, ctx: Context, tool: Tool, result: ToolResult, as_task: bool,
             reason: audit.Refusal) -> list[Action]:
    """A call that ends before anything ran (and its `refused` audit record). A 2025-11-25
    task-augmented request expects a task or an error, never a plain tool result, so it gets the error."""
    audited = core.audited(ctx, audit.refused, reason, tool, ctx.params.get("arguments") or {}, result.text)
    if as_task and ctx.rev.has("tasks.core"):
        return [core.error_reply(ctx, ProtocolError(-32602, result.text)), *audited]
    return [core.reply(ctx, render_result(result, ctx.rev)), *audited]
