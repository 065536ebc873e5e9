"""The sans-IO server core: one message (plus state) in, actions out.

`Core.receive` takes a decoded message and returns `Action`s: messages to
send, calls to start or cancel, timers, task-store operations, resource reads,
prompt and completion commands. The driver
(`serve/stdio.py`) carries them out and reports outcomes back through the other
`Core` methods. The era of each request is decided from its body: modern
`_meta` (or a method only 2026-07-28 has) means 2026-07-28 served statelessly,
its envelope checked first; anything else belongs to this process's one legacy
session.

Every request that awaits an answer is in `inflight` until it is answered or
cancelled, so an id is "in use" exactly then. Every answer leaves through
`_routed`: an answer to a batched request goes into its batch's array, sent
once the whole batch is answered (a duplicate id inside a batch, or one in use,
is answered there too). A batch has at most `BATCH_ITEMS` messages, and the
answers it holds are kept encoded and counted in a `BatchBudget` shared by the
server's cores: an answer past the batch's or the server's bound becomes an
error for its item, so what batches hold is bounded whatever they ask for. A modern retry's `requestState` is consumed through
the injected `consume_once(nonce, expires_at, now)` just before the call (or
task) starts, so one accepted confirmation authorises one run; a replay is
-32602. Each `StartTimer` is matched by a `CancelTimer` when its question ends
before the timer fires. A `complete` command runs once for all the requests that
ask for it meanwhile (`completing`), and its output answers from the shared
`CompletionCache` for a few seconds after: completions are rate limited.

A core serves one `Identity` (`identity.py`; stdio's local user by default): every
request's `Context` carries its principal, to which the tasks it creates and the
`requestState` it is given are bound; where requestors cannot be told apart,
`tasks.list` is neither declared nor served.

The modules of calls, questions, content, tasks and the secret are imported where they are used:
the first answers (`initialize`, `ping`, the tool list), which the front gives while trio loads,
need none of them.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec

import orjson

from mcpwrap.config.model import Config, Tool
from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol import modern
from mcpwrap.protocol.actions import (Action, CancelCall, CancelTimer, Complete, Context, GetPrompt, ReadResource,
                                      Send, StartCall, StartTimer, Stderr, StopComplete, TaskOp)
from mcpwrap.protocol.identity import LOCAL_USER, Identity
from mcpwrap.protocol.jsonrpc import Batch, Invalid, Notification, Request, RequestId, Response
from mcpwrap.protocol.revisions import (CONTENT_METHODS, EXTENSION_TASK_METHODS, MODERN, TASKS_EXTENSION,
                                        Revision, declared)
from mcpwrap.protocol.session import HOLDS, Held, LegacySession, level_allows
from mcpwrap.protocol.tools import (ProtocolError, invalid_params, list_page, parse_call, progress_params,
                                    render_result)

if TYPE_CHECKING:
    from mcpwrap.config.model import Prompt
    from mcpwrap.protocol import asking, resources
    from mcpwrap.protocol.prompts import CompletionCache, CompletionKey
    from mcpwrap.protocol.tasking import TaskRecord
    from mcpwrap.result import Block, ToolResult
    from mcpwrap.result import Resource as Contents
    from mcpwrap.protocol.pages import Page
    from mcpwrap.protocol.sealing import Keys


# (nonce, expires_at, now) -> first use? An OSError: the record cannot be kept, and nothing runs.
ConsumeOnce = Callable[[str, float, float], bool]

ELICIT_TIMEOUT_S = 600.0


BATCH_ITEMS = 256                 # messages a batch may hold; a longer batch is refused whole and runs nothing
BATCH_BYTES = 4 * 1024 * 1024     # encoded answers one batch may hold while its other items are still running
HELD_BYTES = 16 * 1024 * 1024     # the same, for all the batches of a server process together


class BatchBudget:
    """The bytes of batch answers held for their siblings, counted across every `Core` that shares it.

    A server process makes one and hands it to each of its cores (one over stdio, one a session
    over HTTP), so `total` bounds them all together and `per_batch` each batch on its own.
    """

    def __init__(self, per_batch: int = BATCH_BYTES, total: int = HELD_BYTES) -> None:
        self.per_batch, self.total = per_batch, total
        self.held = 0

    def refusal(self, batch_held: int, size: int) -> str | None:
        """Why an answer of `size` bytes cannot join a batch holding `batch_held`; None: it is counted."""
        if batch_held + size > self.per_batch:
            return f"the batch's answers exceed {self.per_batch} bytes"
        if self.held + size > self.total:
            return f"the answers held for batches exceed {self.total} bytes across the server"
        self.held += size
        return None


@dataclass
class _BatchState:
    """The requests of one batch still unanswered, and the answers held until they are.

    Each answer is held encoded (its result or error as an `orjson.Fragment`, written into the
    array as is), so what it holds is what it costs: `held` bytes, counted in the budget too.
    """
    waiting: set[RequestId] = field(default_factory=set)
    answers: list[dict[str, Any]] = field(default_factory=list)
    held: int = 0


@dataclass
class _Run:
    """One running `complete` command and the requests (with their typed prefixes) it will answer."""
    run: int
    waiters: list[tuple[Context, str]]


P = ParamSpec("P")


def _answers(method: Callable[Concatenate[Core, P], list[Action]]) -> Callable[Concatenate[Core, P], list[Action]]:
    """A public outcome method: whatever it answers goes through the batch router."""
    @functools.wraps(method)
    def routed(self: Core, *args: P.args, **kwargs: P.kwargs) -> list[Action]:
        return self._routed(method(self, *args, **kwargs))
    return routed


class Core:
    def __init__(self, config: Config, keyring_source: Callable[[], Keys],
                 clock: Callable[[], float], consume_once: ConsumeOnce, page_size: int = 500,
                 budget: BatchBudget | None = None, completions: CompletionCache | None = None,
                 identity: Identity = LOCAL_USER) -> None:
        self.config = config
        self.identity = identity          # of every request this core receives (a session's, a POST's, stdio's)
        self.budget = budget or BatchBudget()
        self._completions = completions        # shared by a server's cores; made when first needed
        self.completing: dict[CompletionKey, _Run] = {}
        self.run_ids = itertools.count(1)
        self.session = LegacySession()
        self.keyring_source = keyring_source
        self.clock = clock
        self.consume_once = consume_once
        self.page_size = page_size
        self.inflight: dict[RequestId, Context] = {}
        self.listens: dict[RequestId, dict[str, Any]] = {}
        self.asks: dict[str, asking.Pending] = {}
        self.ask_ids = (f"mcpwrap-ask-{n}" for n in itertools.count(1))
        self.batches: dict[RequestId, _BatchState] = {}
        self.subscribed: set[str] = set()          # legacy resources/subscribe
        self.advertised: dict[str, Any] = {}       # the legacy session's capabilities, for list_changed

    # --- capabilities -------------------------------------------------------------------
    def capabilities(self, rev: Revision) -> dict[str, Any]:
        """Only what the tools file has: resources when it defines some or keeps output, prompts..."""
        caps: dict[str, Any] = {"tools": {"listChanged": True}, "logging": {}}
        if self.config.resources or self.config.spool.quota:
            caps["resources"] = {"listChanged": True}
            if self.files():
                caps["resources"]["subscribe"] = True
        if self.config.prompts:
            caps["prompts"] = {"listChanged": True}
        if (self.config.prompts or any(r.uri_template for r in self.config.resources)) and rev.has(
                "capability.completions"):
            caps["completions"] = {}
        if rev.has("tasks.core"):   # tasks.list only where requestors are told apart (2025-11-25 tasks, security)
            caps["tasks"] = {**({"list": {}} if self.identity.identified else {}), "cancel": {},
                             "requests": {"tools": {"call": {}}}}
        if rev.modern:
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    # --- entry point --------------------------------------------------------------------
    def receive(self, message: jsonrpc.Message) -> list[Action]:
        """The actions for one message. Nothing but a deliberate refusal leaves here: a bug met on the
        way costs only the request (or batch item) it met, answered -32603 and logged (`unexpected`)."""
        try:
            return self._receive(message)
        except Exception as exc:
            for item in message.items if isinstance(message, Batch) else (message,):
                if isinstance(item, Request):
                    self._forget(item.id)
                    self.batches.pop(item.id, None)
            return unexpected(message, exc)

    def _receive(self, message: jsonrpc.Message) -> list[Action]:
        if isinstance(message, Batch):
            return self._batch(message)
        # Refusals are about this message alone: never routed into a batch by their id.
        if isinstance(message, Invalid):
            return [Send(self._broken(message))]
        if isinstance(message, Request) and self._in_use(message.id):
            return [Send(self._id_in_use(message.id))]
        return self._routed(self._dispatch(message))

    def _dispatch(self, message: Request | Notification | Response) -> list[Action]:
        """One message's actions; a bug met on the way costs this message alone (see `unexpected`)."""
        try:
            return self._decide(message)
        except Exception as exc:
            if isinstance(message, Request):
                self._forget(message.id)
            return unexpected(message, exc)

    def _forget(self, request_id: RequestId) -> None:
        """A request a bug interrupted is no longer in progress, nor asking anything."""
        self.inflight.pop(request_id, None)
        self.listens.pop(request_id, None)
        for key in [k for k, p in self.asks.items() if p.ctx.id == request_id]:
            del self.asks[key]

    def _decide(self, message: Request | Notification | Response) -> list[Action]:
        if isinstance(message, Notification):
            return self._notification(message)
        if isinstance(message, Response):
            return self._answer(message)
        return self._request(message)

    def _in_use(self, request_id: RequestId) -> bool:
        return request_id in self.inflight or request_id in self.listens or request_id in self.batches

    def _broken(self, message: Invalid) -> dict[str, Any]:
        return self._error_message(message.id, ProtocolError(message.code, message.message), self.session.rev)

    def _id_in_use(self, request_id: RequestId) -> dict[str, Any]:
        return self._error_message(request_id, ProtocolError(
            -32600, "request id is already in use by a request in progress"), self.session.rev)

    def _batch(self, batch: Batch) -> list[Action]:
        if not self.session.rev.has("jsonrpc.batch") or any(
                isinstance(m, Request) and m.method == "initialize" for m in batch.items):
            error = ProtocolError(-32600, f"batches are not accepted in protocol revision {self.session.rev.version}")
            return [Send(self._error_message(None, error, self.session.rev))]
        if len(batch.items) > BATCH_ITEMS:
            error = ProtocolError(-32600, f"a batch may hold at most {BATCH_ITEMS} messages; nothing ran: send the "
                                  "requests separately or in smaller batches")
            return [Send(self._error_message(None, error, self.session.rev))]
        # Refusals are known at once, so they go first; the requests are registered before any runs.
        state, accepted, actions = _BatchState(), list[Request | Notification | Response](), list[Action]()
        for item in batch.items:
            if isinstance(item, Invalid):
                actions += self._keep(state, self._broken(item))
            elif isinstance(item, Request) and (self._in_use(item.id) or item.id in state.waiting):
                actions += self._keep(state, self._id_in_use(item.id))
            else:
                if isinstance(item, Request):
                    state.waiting.add(item.id)
                accepted.append(item)
        expected = bool(state.waiting)
        for request_id in state.waiting:
            self.batches[request_id] = state
        actions += [action for item in accepted for action in self._dispatch(item)]
        if not expected and state.answers:
            actions += self._sent(state)   # nothing to wait for: only refused items needed answers
        return self._routed(actions)

    def _routed(self, actions: list[Action]) -> list[Action]:
        """Responses to batched requests are held and sent together as one array."""
        out: list[Action] = []
        for action in actions:
            message = action.message if isinstance(action, Send) else None
            if isinstance(message, dict) and "method" not in message and message.get("id") in self.batches:
                state = self.batches.pop(message["id"])
                state.waiting.discard(message["id"])
                out += self._keep(state, message)
                if not state.waiting:
                    out += self._sent(state)
                continue
            out.append(action)
        return out

    def _keep(self, state: _BatchState, message: dict[str, Any]) -> list[Action]:
        """Hold one answer of a batch, encoded once; past the budget, an error for its item instead.

        The request was carried out either way: only its answer is not kept.
        """
        key = "result" if "result" in message else "error"
        try:
            data = orjson.dumps(message[key])
        except TypeError as exc:           # orjson.JSONEncodeError: too deep, a bad key, a huge int
            error = ProtocolError(-32603, f"internal error: the answer could not be encoded ({exc})")
            state.answers.append(self._error_message(message.get("id"), error, self.session.rev))
            return [Stderr(f"mcpwrap: cannot encode an answer in a batch ({exc}); answering with an error", "error")]
        size = len(data) + len(orjson.dumps(message.get("id"))) + 32    # the envelope around it
        refusal = self.budget.refusal(state.held, size)
        if refusal is None:
            state.held += size
            state.answers.append({**message, key: orjson.Fragment(data)})
        else:
            state.answers.append(self._error_message(message.get("id"), ProtocolError(-32603, (
                f"{refusal}: this answer ({size} bytes) was dropped after its request was carried out; "
                "send the requests separately")), self.session.rev))
        return []

    def _sent(self, state: _BatchState) -> list[Action]:
        """The batch's array, its held bytes given back to the budget."""
        self.budget.held -= state.held
        state.held = 0
        return [Send(state.answers)] if state.answers else []

    def end(self) -> None:
        """This core's session is over: what its unfinished batches held is given back to the budget."""
        for state in {id(s): s for s in self.batches.values()}.values():
            self.budget.held -= state.held
            state.held = 0
        self.batches.clear()

    def _drop_from_batch(self, request_id: RequestId) -> list[Action]:
        """A batched request that will never be answered (cancelled): its batch stops waiting for it."""
        state = self.batches.pop(request_id, None)
        if state is None:
            return []
        state.waiting.discard(request_id)
        return self._sent(state) if not state.waiting else []

    # --- requests -----------------------------------------------------------------------
    def _request(self, request: Request) -> list[Action]:
        is_modern = request.method != "initialize" and modern.is_modern(request.method, request.params)
        try:
            if is_modern:
                ctx = self._modern_context(request)
                actions = self._modern(ctx)
            else:
                ctx = Context(request.id, request.method, self.session.rev,
                              self.session.client_capabilities, params=request.params,
                              progress_token=_progress_token(request.params), principal=self.identity.principal)
                actions = self._legacy(ctx)
        except ProtocolError as error:
            actions = [Send(self._error_message(request.id, error, MODERN if is_modern else self.session.rev))]
            if error.diagnostic:
                actions.append(Stderr(f"mcpwrap: request {request.id!r} rejected: {error.diagnostic}", "warning"))
        return actions

    def _modern_context(self, request: Request) -> Context:
        meta = modern.read_meta(request.params)
        return Context(request.id, request.method, meta.rev, meta.capabilities, meta.log_level,
                       meta.progress_token, request.params, self.identity.principal)

    def _legacy(self, ctx: Context) -> list[Action]:
        self.session.admit(ctx.method)
        if ctx.method == "initialize":
            result = self.session.initialize(dict(ctx.params), self.config, self.capabilities)
            self.advertised, self.subscribed = result["capabilities"], set()
            return [self.reply(ctx, result)]
        self._served(ctx, self.session.rev.methods)
        if ctx.method == "ping":
            return [self.reply(ctx, {})]
        if ctx.method == "logging/setLevel":
            self.session.set_level(dict(ctx.params))
            return [self.reply(ctx, {})]
        if ctx.method == "tools/list":
            return [self.reply(ctx, list_page(self.config, ctx.rev, ctx.params.get("cursor"), self.page_size))]
        if ctx.method == "tools/call":
            return self._call(ctx)
        if ctx.method in CONTENT_METHODS:
            return self._content(ctx)
        if ctx.method in ("resources/subscribe", "resources/unsubscribe"):
            return self._subscribe(ctx)
        return self._task_request(ctx)

    def _modern(self, ctx: Context) -> list[Action]:
        if ctx.method in EXTENSION_TASK_METHODS:
            self._served(ctx, EXTENSION_TASK_METHODS)
            if not _declares_tasks(ctx):
                raise _needs_tasks_extension()
            return self._task_request(ctx)
        self._served(ctx, MODERN.methods)
        if ctx.method == "server/discover":
            return [self.reply(ctx, modern.discover(self.config, self.capabilities(ctx.rev)))]
        if ctx.method == "tools/list":
            page = list_page(self.config, ctx.rev, ctx.params.get("cursor"), self.page_size)
            return [self.reply(ctx, modern.cacheable(page))]
        if ctx.method in CONTENT_METHODS:
            return self._content(ctx)
        if ctx.method == "subscriptions/listen":
            honoured = modern.listen_filter(ctx.params)
            wanted = ctx.params["notifications"].get("resourceSubscriptions")
            files = self.files()
            if isinstance(wanted, list) and (watched := [u for u in wanted if isinstance(u, str) and u in files]):
                honoured["resourceSubscriptions"] = watched
            self.listens[ctx.id] = honoured
            return [Send(modern.tagged("notifications/subscriptions/acknowledged", ctx.id,
                                       {"notifications": honoured}))]
        return self._call(ctx)

    def _served(self, ctx: Context, methods: frozenset[str]) -> None:
        """-32601 for a method the revision lacks or the capabilities in force do not declare."""
        if ctx.method not in methods or not declared(ctx.method, self.capabilities(ctx.rev)):
            raise ProtocolError(-32601, f"Method not found: {ctx.method}")

    # --- resources, prompts, completions -------------------------------------------------
    def files(self) -> dict[str, Path]:
        """URI -> path of the file resources (the ones whose updates can be watched)."""
        return {r.uri: r.path for r in self.config.resources if r.path is not None and r.uri is not None}

    def _content(self, ctx: Context) -> list[Action]:
        from mcpwrap.protocol import prompts, resources
        from mcpwrap.result import Text

        method, params, cursor = ctx.method, ctx.params, ctx.params.get("cursor")
        if method == "resources/list":
            return [self._listed(ctx, resources.list_resources(self.config, ctx.rev, cursor, self.page_size))]
        if method == "resources/templates/list":
            return [self._listed(ctx, resources.list_templates(self.config, ctx.rev, cursor, self.page_size))]
        if method == "prompts/list":
            return [self._listed(ctx, prompts.list_prompts(self.config, ctx.rev, cursor, self.page_size))]
        if method == "resources/read":
            target = resources.resolve(self.config, params.get("uri"), ctx.rev)
            self.inflight[ctx.id] = ctx
            return [ReadResource(ctx, target)]
        if method == "prompts/get":
            prompt, arguments = prompts.parse_get(self.config, params)
            if all(m.text is not None for m in prompt.messages):
                blocks: list[tuple[str, Block]] = [(m.role, Text(prompts.fill(m.text or "", arguments)))
                                                   for m in prompt.messages]
                return [self.reply(ctx, prompts.get_result(prompt, blocks, ctx.rev))]
            self.inflight[ctx.id] = ctx
            return [GetPrompt(ctx, prompt, arguments)]
        source, prefix = prompts.completion_source(self.config, params)     # completion/complete
        if source.command is None:
            return [self.reply(ctx, prompts.complete_result(source.values, prefix))]
        return self._complete(ctx, source.command, prefix)

    @property
    def completions(self) -> CompletionCache:
        if self._completions is None:
            from mcpwrap.protocol.prompts import CompletionCache

            self._completions = CompletionCache()
        return self._completions

    def _complete(self, ctx: Context, command: tuple[str, ...], prefix: str) -> list[Action]:
        """From a fresh output of the command; else wait for its run, or start it (one run per key)."""
        from mcpwrap.protocol import prompts

        key = prompts.completion_key(self.config, command)
        cached = self.completions.get(key, self.clock())
        if cached is not None:
            return [self.reply(ctx, prompts.complete_result(cached, prefix))]
        running = self.completing.get(key)
        if running is not None and len(running.waiters) >= prompts.COMPLETION_WAITERS:
            raise ProtocolError(-32603, f"too many completion requests in flight: {prompts.COMPLETION_WAITERS} "
                                "already wait for this argument's complete command; try again shortly")
        self.inflight[ctx.id] = ctx
        if running is not None:
            running.waiters.append((ctx, prefix))
            return []
        running = self.completing[key] = _Run(next(self.run_ids), [(ctx, prefix)])
        return [Complete(running.run, command)]

    def _leave_completion(self, request_id: RequestId) -> list[Action]:
        """A cancelled request stops waiting for its completion; a run nobody waits for is stopped."""

        for key, running in self.completing.items():
            left = [(ctx, prefix) for ctx, prefix in running.waiters if ctx.id != request_id]
            if len(left) < len(running.waiters):
                running.waiters = left
                if left:
                    return []
                del self.completing[key]
                return [StopComplete(running.run)]
        return []

    def _listed(self, ctx: Context, page: dict[str, Any]) -> Send:
        return self.reply(ctx, modern.cacheable(page) if ctx.modern else page)

    def _subscribe(self, ctx: Context) -> list[Action]:
        from mcpwrap.protocol import resources

        uri = ctx.params.get("uri")
        target = resources.resolve(self.config, uri, ctx.rev)
        if not (isinstance(target, resources.Source) and target.uri in self.files()):
            raise ProtocolError(-32602, "updates are sent for file resources only ([resources.NAME] with 'path')",
                                {"uri": uri})
        (self.subscribed.add if ctx.method == "resources/subscribe" else self.subscribed.discard)(target.uri)
        return [self.reply(ctx, {})]

    def watched(self) -> dict[str, Path]:
        """URI -> path of the file resources someone subscribed to, for the driver to watch."""
        wanted = set(self.subscribed).union(*(h.get("resourceSubscriptions", ()) for h in self.listens.values()))
        return {uri: path for uri, path in self.files().items() if uri in wanted}

    def resource_changed(self, uri: str) -> list[Action]:
        actions: list[Action] = []
        if uri in self.subscribed and self.session.open:
            actions.append(Send(jsonrpc.notification("notifications/resources/updated", {"uri": uri})))
        actions += [Send(modern.tagged("notifications/resources/updated", listen_id, {"uri": uri}))
                    for listen_id, honoured in self.listens.items() if uri in honoured.get("resourceSubscriptions", ())]
        return actions

    @_answers
    def resource_read(self, ctx: Context, target: resources.Target, outcome: Page | list[Contents] | None) -> list[Action]:
        """A read's outcome: a spool page (None: gone) or a resource's contents."""
        from mcpwrap.protocol import resources

        if not self._settled(ctx):
            return []
        uri = ctx.params["uri"]
        try:
            if isinstance(target, resources.OutputPage):
                result = resources.page_result(target, outcome if not isinstance(outcome, list) else None,
                                               uri, ctx.rev)
                ttl_ms, scope = 0, "private"
            else:
                contents = outcome if isinstance(outcome, list) else []
                result = {"contents": [resources.contents_json(c) for c in contents]}
                ttl_ms, scope = target.resource.cache_ttl_ms, target.resource.cache_scope
        except ProtocolError as error:
            return [Send(self._error_message(ctx.id, error, ctx.rev))]
        return [self.reply(ctx, {**result, "ttlMs": ttl_ms, "cacheScope": scope} if ctx.modern else result)]

    @_answers
    def prompt_done(self, ctx: Context, prompt: Prompt, blocks: list[tuple[str, Block]]) -> list[Action]:
        from mcpwrap.protocol import prompts

        return [self.reply(ctx, prompts.get_result(prompt, blocks, ctx.rev))] if self._settled(ctx) else []

    @_answers
    def completed(self, run: int, outcome: list[str] | ProtocolError) -> list[Action]:
        """A run's output lines (kept for `COMPLETION_TTL_S`) or its error, for every request waiting on it."""
        from mcpwrap.protocol import prompts

        key = next((k for k, running in self.completing.items() if running.run == run), None)
        if key is None:                   # stopped: nobody waits
            return []
        waiters = self.completing.pop(key).waiters
        if not isinstance(outcome, ProtocolError):
            self.completions.put(key, outcome, self.clock())
        answers: list[Action] = []
        for ctx, prefix in waiters:
            if self._settled(ctx):
                answers.append(Send(self._error_message(ctx.id, outcome, ctx.rev)) if isinstance(outcome, ProtocolError)
                               else self.reply(ctx, prompts.complete_result(outcome, prefix)))
        return answers

    # --- tools/call pipeline ------------------------------------------------------------
    def _call(self, ctx: Context) -> list[Action]:
        from mcpwrap.protocol import asking

        request = parse_call(self.config, ctx.params)
        as_task = self._task_decision(ctx, request.tool)
        if ctx.modern and ("requestState" in ctx.params or "inputResponses" in ctx.params):
            outcome = asking.resume(ctx, request, self.config, self.keyring_source(), self.clock(), as_task)
        else:
            outcome = asking.Pending(ctx, request.tool, dict(request.arguments), as_task=as_task,
                                     original=request.arguments)
        if not isinstance(outcome, asking.Pending):      # refused (a ToolResult)
            return [self._refused(ctx, outcome, as_task)]
        return self._advance(outcome)

    def _task_decision(self, ctx: Context, tool: Tool) -> bool:
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
        if ctx.modern:
            declared = _declares_tasks(ctx)
            if tool.task == "always" and not declared:
                raise _needs_tasks_extension(f"tool '{tool.name}' runs only as a task")
            return declared and tool.task != "never"
        return False

    def _advance(self, pending: asking.Pending) -> list[Action]:
        """Ask what is still missing, or start the call (or task)."""
        from mcpwrap.protocol import asking

        ctx = pending.ctx
        step = asking.next_step(pending)
        if isinstance(step, ProtocolError):
            raise step
        if isinstance(step, asking.Question):
            return self._ask(pending, step)
        if step is not None:                            # refused (a ToolResult)
            return [self._refused(ctx, step, pending.as_task)]
        if pending.state is not None:
            self._consume(*pending.state)
        self.inflight[ctx.id] = ctx
        if pending.as_task:
            return [TaskOp(ctx, "create", tool=pending.tool, arguments=pending.arguments)]
        return [StartCall(ctx, pending.tool, pending.arguments)]

    def _consume(self, nonce: str, expires_at: float) -> None:
        """The retry's requestState authorises this run and no other, in any process sharing the ledger."""
        try:
            first = self.consume_once(nonce, expires_at, self.clock())
        except OSError as exc:
            raise ProtocolError(-32603, "the requestState could not be recorded as used; nothing ran",
                                diagnostic=str(exc)) from None
        if not first:
            raise ProtocolError(-32602, "invalid or expired requestState", diagnostic="requestState already used")

    def _ask(self, pending: asking.Pending, question: asking.Question) -> list[Action]:
        from mcpwrap.protocol import asking
        from mcpwrap.result import error_result

        ctx = pending.ctx
        if ctx.modern:
            if not asking.can_ask(ctx.capabilities):
                raise ProtocolError(-32021, f"tool '{pending.tool.name}' needs {question.purpose} from the user, "
                                    "and this request declares no elicitation capability",
                                    {"requiredCapabilities": {"elicitation": {}}})
            state = asking.seal_state(pending, question, self.config, self.keyring_source(), self.clock())
            result = {"inputRequests": {question.key: question.request(ctx.rev)}, "requestState": state}
            return [Send(jsonrpc.response(ctx.id, modern.stamp(result, self.config, "input_required")))]
        if not (ctx.rev.has("elicitation.server_request") and asking.can_ask(ctx.capabilities)):
            return [self._refused(ctx, error_result(
                f"tool '{pending.tool.name}' needs {question.purpose} from the user before it runs, but this "
                "client cannot be asked (it declared no elicitation capability); nothing ran"), pending.as_task)]
        if not question.fits(ctx.rev):
            return [self._refused(ctx, error_result(
                f"tool '{pending.tool.name}' needs {question.purpose} from the user, and a list of choices cannot "
                f"be asked for in protocol revision {ctx.rev.version} (multi-select forms came in 2025-11-25); "
                "nothing ran"), pending.as_task)]
        ask_id = next(self.ask_ids)
        self.asks[ask_id] = replace(pending, question=question)
        self.inflight[ctx.id] = ctx
        request = {"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                   "params": question.request(ctx.rev)["params"]}
        return [*self._to_client(ctx, ("ask", ask_id), request), StartTimer(ask_id, ELICIT_TIMEOUT_S)]

    def _to_client(self, ctx: Context, key: Held, message: dict[str, Any]) -> list[Action]:
        """A request or notification of ours about `ctx`, held while the legacy session is not yet
        initialized (`session.HOLDS`); the held ones whose request or question ended are dropped, so
        what waits is bounded by the requests in flight."""
        if ctx.modern or self.session.state not in HOLDS:
            return [Send(message)]
        self.session.held = {k: m for k, m in self.session.held.items() if self._live(k)}
        self.session.held[key] = message
        return []

    def _live(self, key: Held) -> bool:
        kind, ident = key
        return ident in (self.asks if kind == "ask" else self.inflight)

    def _withdraw(self, key: str, reason: str) -> list[Action]:
        """Tell the client our question `key` is over, unless it never left (held until initialized)."""
        if self.session.held.pop(("ask", key), None) is not None:
            return []
        return [Send(jsonrpc.notification("notifications/cancelled", {"requestId": key, "reason": reason}))]

    def _answer(self, response: Response) -> list[Action]:
        """A client's answer to our elicitation/create."""
        from mcpwrap.protocol import asking
        from mcpwrap.result import error_result

        key = str(response.id)
        pending = self.asks.pop(key, None)
        if pending is None:
            return []
        self.inflight.pop(pending.ctx.id, None)
        if response.error is not None:
            outcome: asking.Pending | ToolResult = error_result(
                f"the client could not ask the user: {response.error.get('message', 'error')}; nothing ran")
        else:
            outcome = asking.apply_answer(pending, pending.question.key if pending.question else None,
                                          response.result or {})
        return [CancelTimer(key), *self._continue(pending, outcome)]

    def _continue(self, pending: asking.Pending, outcome: asking.Pending | ToolResult) -> list[Action]:
        from mcpwrap.result import ToolResult

        ctx = pending.ctx
        try:
            if isinstance(outcome, ToolResult):
                return [self._refused(ctx, outcome, pending.as_task)]
            return self._advance(outcome)
        except ProtocolError as error:
            return [Send(self._error_message(ctx.id, error, ctx.rev))]

    @_answers
    def timer(self, key: str) -> list[Action]:
        from mcpwrap.result import error_result

        pending = self.asks.pop(key, None)
        if pending is None:
            return []
        self.inflight.pop(pending.ctx.id, None)
        return self._withdraw(key, "timed out") + self._continue(pending, error_result(
            f"no answer from the user within {ELICIT_TIMEOUT_S:g}s; nothing ran"))

    def _refused(self, ctx: Context, result: ToolResult, as_task: bool) -> Send:
        """A call that ends before anything ran. A 2025-11-25 task-augmented request
        expects a task or an error, never a plain tool result, so it gets the error."""
        if as_task and ctx.rev.has("tasks.core"):
            return Send(self._error_message(ctx.id, ProtocolError(-32602, result.text), ctx.rev))
        return self.reply(ctx, render_result(result, ctx.rev))

    # --- outcomes reported by the driver ------------------------------------------------
    @_answers
    def call_done(self, ctx: Context, result: ToolResult) -> list[Action]:
        return [self.reply(ctx, render_result(result, ctx.rev))] if self._settled(ctx) else []

    @_answers
    def call_failed(self, ctx: Context, error: ProtocolError) -> list[Action]:
        """A call or any task operation ended in a JSON-RPC error (unless the client cancelled it)."""
        return [Send(self._error_message(ctx.id, error, ctx.rev))] if self._settled(ctx) else []

    def progress(self, ctx: Context, progress: float, total: float | None, message: str | None) -> list[Action]:
        if ctx.progress_token is None or ctx.id not in self.inflight:
            return []
        params = progress_params(ctx.progress_token, progress, total, message, ctx.rev)
        return self._to_client(ctx, ("progress", ctx.id), jsonrpc.notification("notifications/progress", params))

    def log(self, ctx: Context, level: str, logger: str, data: Any) -> list[Action]:
        threshold = ctx.log_level if ctx.modern else self.session.log_level
        if ctx.id not in self.inflight or not level_allows(threshold, level):
            return []
        return [Send(jsonrpc.notification("notifications/message",
                                          {"level": level, "logger": logger, "data": data}))]

    def reload(self, config: Config) -> list[Action]:
        """list_changed for tools, and for resources and prompts when their lists changed (and were advertised)."""
        old, self.config = self.config, config
        actions: list[Action] = [Stderr(f"mcpwrap: reloaded {config.path}: {len(config.tools)} tool(s)")]
        lists = [("tools", "toolsListChanged", True),
                 ("resources", "resourcesListChanged", (old.resources, old.spool.quota > 0) != (
                     config.resources, config.spool.quota > 0)),
                 ("prompts", "promptsListChanged", old.prompts != config.prompts)]
        for kind, flag, changed in lists:
            if not changed:
                continue
            if self.session.open and kind in self.advertised:
                actions.append(Send(jsonrpc.notification(f"notifications/{kind}/list_changed", {})))
            actions += [Send(modern.tagged(f"notifications/{kind}/list_changed", listen_id))
                        for listen_id, honoured in self.listens.items() if honoured.get(flag)]
        return actions

    @_answers
    def shutdown(self) -> list[Action]:
        """End every listen stream: the cancellation first, then the listen result."""
        actions: list[Action] = []
        for listen_id in list(self.listens):
            del self.listens[listen_id]
            cancel = modern.tagged("notifications/cancelled", listen_id,
                                   {"requestId": listen_id, "reason": "server shutting down"})
            result = {"_meta": {modern.SUBSCRIPTION_KEY: listen_id}}
            actions += [Send(cancel), Send(jsonrpc.response(listen_id, modern.stamp(result, self.config)))]
        return actions

    # --- notifications ------------------------------------------------------------------
    def _notification(self, note: Notification) -> list[Action]:
        if note.method == "notifications/initialized":
            self.session.event(note.method)
            if self.session.state not in HOLDS:
                held, self.session.held = self.session.held, {}
                return [Send(message) for key, message in held.items() if self._live(key)]
        elif note.method == "notifications/cancelled":
            request_id = note.params.get("requestId")
            if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
                return []
            if self.listens.pop(request_id, None) is not None:
                return self._drop_from_batch(request_id)
            if self.inflight.pop(request_id, None) is not None:

                withdrawn: list[Action] = []
                for key in [k for k, p in self.asks.items() if p.ctx.id == request_id]:
                    del self.asks[key]             # withdraw our question too: the client can close its dialog
                    withdrawn += [CancelTimer(key), *self._withdraw(key, "the call was cancelled")]
                return [CancelCall(request_id), *withdrawn, *self._leave_completion(request_id),
                        *self._drop_from_batch(request_id)]
        return []

    # --- rendering ----------------------------------------------------------------------
    def reply(self, ctx: Context, result: dict[str, Any]) -> Send:
        """A result for the request's era: modern results are stamped (resultType, serverInfo)."""
        if ctx.modern:
            result = modern.stamp(result, self.config)
        return Send(jsonrpc.response(ctx.id, result))

    def _error_message(self, request_id: RequestId | None, error: ProtocolError, rev: Revision) -> dict[str, Any]:
        if error.code not in rev.error_codes:
            error = ProtocolError(-32603, error.message)
        message: dict[str, Any] = {"jsonrpc": "2.0"}
        if request_id is not None:
            message["id"] = request_id
        elif not rev.has("error.id_optional"):
            message["id"] = None          # JSON-RPC 2.0's form; these revisions define none of their own
        message["error"] = error.to_json()
        return message

    # --- tasks (store I/O happens in the driver) ----------------------------------------
    def _task_request(self, ctx: Context) -> list[Action]:

        task_id = ctx.params.get("taskId")
        if ctx.method in ("tasks/get", "tasks/result", "tasks/cancel", "tasks/update"):
            if not isinstance(task_id, str):
                raise invalid_params(f"{ctx.method} needs a string 'taskId'")
            if ctx.method == "tasks/update" and not isinstance(ctx.params.get("inputResponses"), dict):
                raise invalid_params("tasks/update needs an 'inputResponses' object")
            self.inflight[ctx.id] = ctx
            return [TaskOp(ctx, ctx.method.split("/")[1], task_id=task_id)]
        cursor = ctx.params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise invalid_params("Invalid cursor")
        self.inflight[ctx.id] = ctx
        return [TaskOp(ctx, "list", cursor=cursor)]

    # --- tasks: outcomes of TaskOps, rendered per era (records come from tasks.perform) ---
    def _settled(self, ctx: Context) -> bool:
        """The request leaves `inflight` now; False if the client cancelled it (no answer, ever)."""
        return self.inflight.pop(ctx.id, None) is not None

    @_answers
    def task_created(self, ctx: Context, record: TaskRecord) -> list[Action]:
        """The task handle; a legacy session also gets a watcher for its status notifications."""
        from mcpwrap.protocol import tasking

        if not self._settled(ctx):
            return []
        result = tasking.create_result(record, ctx.rev)
        actions: list[Action] = [Send(jsonrpc.response(ctx.id, modern.stamp(result, self.config, "task")))
                                 if ctx.modern else self.reply(ctx, result)]
        if not ctx.modern and ctx.rev.has("tasks.core"):
            actions.append(TaskOp(ctx, "watch", task_id=record.task_id))
        return actions

    @_answers
    def task_status(self, ctx: Context, record: TaskRecord) -> list[Action]:
        from mcpwrap.protocol import tasking

        if not self._settled(ctx):
            return []
        return [self.reply(ctx, tasking.modern_detailed(record, ctx.rev) if ctx.modern
                           else tasking.legacy_task(record))]

    @_answers
    def task_cancelled(self, ctx: Context, record: TaskRecord, was_terminal: bool) -> list[Action]:
        """2025-11-25 answers with the task (-32602 if it had finished); the extension only acks."""
        from mcpwrap.protocol import tasking

        if not self._settled(ctx):
            return []
        if ctx.modern:
            return [self.reply(ctx, {})]
        if was_terminal:
            return [Send(self._error_message(ctx.id, tasking.terminal_error(record), ctx.rev))]
        return [self.reply(ctx, tasking.legacy_task(record))]

    @_answers
    def task_updated(self, ctx: Context) -> list[Action]:
        return [self.reply(ctx, {})] if self._settled(ctx) else []   # mcpwrap never asks inside a task

    @_answers
    def task_page(self, ctx: Context, records: list[TaskRecord], next_cursor: str | None) -> list[Action]:
        from mcpwrap.protocol import tasking

        return [self.reply(ctx, tasking.legacy_list(records, next_cursor))] if self._settled(ctx) else []

    def task_waiting(self, ctx: Context) -> bool:
        """Whether a blocked tasks/result still has a client waiting (not cancelled)."""
        return ctx.id in self.inflight

    @_answers
    def task_payload(self, ctx: Context, record: TaskRecord) -> list[Action]:
        """tasks/result of a terminal task: the call's result (or error), unless the client cancelled."""
        from mcpwrap.protocol import tasking

        if not self._settled(ctx):
            return []
        try:
            return [self.reply(ctx, tasking.legacy_payload(record, ctx.rev))]
        except ProtocolError as error:
            return [Send(self._error_message(ctx.id, error, ctx.rev))]

    def task_changed(self, ctx: Context, previous: TaskRecord | None, current: TaskRecord) -> list[Action]:
        """A watched task moved: progress on the call's token, then notifications/tasks/status."""
        from mcpwrap.protocol import tasking

        if not self.session.open:
            return []
        actions: list[Action] = []
        before = previous.progress if previous is not None else None
        if ctx.progress_token is not None and current.progress != before:
            params = tasking.task_progress_params(current, ctx.progress_token, ctx.rev)
            if params is not None:
                actions.append(Send(jsonrpc.notification("notifications/progress", params)))
        if tasking.status_changed(previous, current):
            actions.append(Send(jsonrpc.notification("notifications/tasks/status", tasking.legacy_task(current))))
        return actions


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
        actions.append(Send(answers if isinstance(message, Batch) else answers[0]))
    return actions


def _described(message: jsonrpc.Message | None) -> str:
    if message is None:
        return "a message"
    if isinstance(message, Batch):
        return f"a batch of {len(message.items)}"
    if isinstance(message, Request):
        return f"{message.method} request {message.id!r}"
    return type(message).__name__.lower()


def _declares_tasks(ctx: Context) -> bool:
    """This modern request declared the tasks extension (capabilities are per request)."""
    extensions = ctx.capabilities.get("extensions")
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def _needs_tasks_extension(why: str = "this method belongs to the tasks extension") -> ProtocolError:
    return ProtocolError(-32021, f"{why}; declare the {TASKS_EXTENSION} extension in clientCapabilities",
                         {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})


def _progress_token(params: Mapping[str, Any]) -> str | int | None:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None

