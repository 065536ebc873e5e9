"""Resources, prompts and completions over a core's state: their handlers and their outcomes.

`HANDLERS` maps each content method to its handler; `Core` reaches it through its own table,
after the revision and the declared capabilities allowed the method. A list or a prompt made of
text is answered at once; a read, a prompt with commands and a completion with a command become
actions (`ReadResource`, `GetPrompt`, `Complete`) whose outcomes come back through `read_done`,
`prompt_done` and `completed`. A `complete` command runs once for all the requests that ask for it
meanwhile (`completing`), and its output answers from the shared `CompletionCache` for a few
seconds after: completions are rate limited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpwrap.config.model import Prompt
from mcpwrap.protocol import asking, prompts, resources, rounds
from mcpwrap.protocol.actions import Action, Complete, Context, GetPrompt, ReadResource, Stderr
from mcpwrap.protocol.server_state import CompletionRun, ServerState
from mcpwrap.protocol.tools import ProtocolError
from mcpwrap.result import Block, Text
from mcpwrap.result import Resource as Contents

if TYPE_CHECKING:
    from mcpwrap.protocol.pages import Page

REASON_EDGE = 200                 # a failed completion's stderr line keeps this much of each end of the reason


def _list_resources(core: ServerState, ctx: Context) -> list[Action]:
    cursor = ctx.params.get("cursor")
    return [core.listed(ctx, resources.list_resources(core.config, ctx.rev, cursor, core.page_size))]


def _list_templates(core: ServerState, ctx: Context) -> list[Action]:
    cursor = ctx.params.get("cursor")
    return [core.listed(ctx, resources.list_templates(core.config, ctx.rev, cursor, core.page_size))]


def _list_prompts(core: ServerState, ctx: Context) -> list[Action]:
    cursor = ctx.params.get("cursor")
    return [core.listed(ctx, prompts.list_prompts(core.config, ctx.rev, cursor, core.page_size))]


def _read(core: ServerState, ctx: Context) -> list[Action]:
    target = resources.resolve(core.config, ctx.params.get("uri"), ctx.rev)
    core.inflight[ctx.id] = ctx
    return [ReadResource(ctx, target)]


def _get_prompt(core: ServerState, ctx: Context) -> list[Action]:
    """A prompt of text is filled in at once; one with commands is a `GetPrompt` for the driver. A missing
    required argument is asked for where a modern request can be asked (input_required), else -32602."""
    prompt, given = prompts.prompt_request(core.config, ctx.params)
    gathered, round_ = given, 0
    if ctx.modern and ("requestState" in ctx.params or "inputResponses" in ctx.params):
        gathered, round_ = prompts.resume_get(ctx, prompt, given, core.config, core.keyring_source(), core.clock())
    arguments, missing = prompts.check_arguments(prompt, gathered)
    if missing and ctx.modern and asking.can_ask(ctx.capabilities):
        question = prompts.question(prompt, missing)
        state = rounds.seal_request(ctx, prompt.name, given, core.config, core.keyring_source(), core.clock(),
                                    r=round_, g=gathered, q=question.key)
        return [core.reply(ctx, rounds.ask_result(question, state, ctx.rev), "input_required")]
    if missing:
        raise prompts.missing_error(prompt, missing)
    if all(m.text is not None for m in prompt.messages):
        blocks: list[tuple[str, Block]] = [(m.role, Text(prompts.fill(m.text or "", arguments)))
                                           for m in prompt.messages]
        return [core.reply(ctx, prompts.get_result(prompt, blocks, ctx.rev))]
    core.inflight[ctx.id] = ctx
    return [GetPrompt(ctx, prompt, arguments)]


def _complete(core: ServerState, ctx: Context) -> list[Action]:
    """From the argument's values, a fresh output of its command; else wait for its run, or start it
    (one run per key)."""
    source, prefix = prompts.completion_source(core.config, ctx.params)
    if source.command is None:
        return [core.reply(ctx, prompts.complete_result(source.values, prefix))]
    key = prompts.completion_key(core.config, source.command)
    cached = core.completions.get(key, core.clock())
    if cached is not None:
        return [core.reply(ctx, prompts.complete_result(cached, prefix))]
    running = core.completing.get(key)
    if running is not None and len(running.waiters) >= prompts.COMPLETION_WAITERS:
        raise ProtocolError(-32603, f"too many completion requests in flight: {prompts.COMPLETION_WAITERS} "
                            "already wait for this argument's complete command; try again shortly")
    core.inflight[ctx.id] = ctx
    if running is not None:
        running.waiters.append((ctx, prefix))
        return []
    running = core.completing[key] = CompletionRun(next(core.run_ids), [(ctx, prefix)])
    return [Complete(running.run, source.command)]


def _subscribe(core: ServerState, ctx: Context) -> list[Action]:
    """Legacy resources/subscribe and /unsubscribe, for file resources only."""
    uri = ctx.params.get("uri")
    target = resources.resolve(core.config, uri, ctx.rev)
    if not (isinstance(target, resources.Source) and target.uri in core.files()):
        raise ProtocolError(-32602, "updates are sent for file resources only ([resources.NAME] with 'path')",
                            {"uri": uri})
    (core.subscribed.add if ctx.method == "resources/subscribe" else core.subscribed.discard)(target.uri)
    return [core.reply(ctx, {})]


HANDLERS: dict[str, Callable[[ServerState, Context], list[Action]]] = {
    "resources/list": _list_resources,
    "resources/templates/list": _list_templates,
    "prompts/list": _list_prompts,
    "resources/read": _read,
    "prompts/get": _get_prompt,
    "completion/complete": _complete,
    "resources/subscribe": _subscribe,
    "resources/unsubscribe": _subscribe,
}


def read_done(core: ServerState, ctx: Context, target: resources.Target,
              outcome: Page | list[Contents] | None) -> list[Action]:
    """A read's outcome: a spool page (None: gone) or a resource's contents."""
    if not core.settled(ctx):
        return []
    uri = ctx.params["uri"]
    try:
        if isinstance(target, resources.OutputPage):
            result = resources.page_result(target, outcome if not isinstance(outcome, list) else None, uri, ctx.rev)
            ttl_ms, scope = 0, "private"
        else:
            contents = outcome if isinstance(outcome, list) else []
            result = {"contents": [resources.contents_json(c) for c in contents]}
            ttl_ms, scope = target.resource.cache_ttl_ms, target.resource.cache_scope
    except ProtocolError as error:
        return [core.error_reply(ctx, error)]
    hints = ctx.rev.has("result.cache_hints")
    return [core.reply(ctx, {**result, "ttlMs": ttl_ms, "cacheScope": scope} if hints else result)]


def prompt_done(core: ServerState, ctx: Context, prompt: Prompt, blocks: list[tuple[str, Block]]) -> list[Action]:
    return [core.reply(ctx, prompts.get_result(prompt, blocks, ctx.rev))] if core.settled(ctx) else []


def completed(core: ServerState, run: int, outcome: list[str] | ProtocolError) -> list[Action]:
    """A run's output lines, for every request waiting on it, kept for `COMPLETION_TTL_S`. The command is
    a helper: its failure answers no candidates (kept as long, so a broken command is rate limited
    too) and is said once on stderr; the requests do not fail."""
    key = next((k for k, running in core.completing.items() if running.run == run), None)
    if key is None:                   # stopped: nobody waits
        return []
    waiters = core.completing.pop(key).waiters
    answers: list[Action] = []
    if isinstance(outcome, ProtocolError):
        reason = " ".join(outcome.message.split())
        if len(reason) > 2 * REASON_EDGE:
            reason = f"{reason[:REASON_EDGE]} ... {reason[-REASON_EDGE:]}"
        answers.append(Stderr(f"mcpwrap: {reason}; answered with no candidates", "warning"))
        outcome = []
    core.completions.put(key, outcome, core.clock())
    for ctx, prefix in waiters:
        if core.settled(ctx):
            answers.append(core.reply(ctx, prompts.complete_result(outcome, prefix)))
    return answers

