"""The sans-IO server core: one message (plus state) in, actions out.

`Core.receive` takes a decoded message and returns `Action`s: messages to
send, calls to start or cancel, timers, task-store operations, resource reads,
prompt and completion commands. The driver
(`serve/driver.py`, on stdio and over HTTP) carries them out and reports outcomes back through the other
`Core` methods. The era of each request is decided from its body: modern
`_meta` (or a method only 2026-07-28 has) means 2026-07-28 served statelessly,
its envelope checked first; anything else belongs to this process's one legacy
session. Either way one table, `HANDLERS`, names each method's handler; the
request's revision (`rev.methods`, the extensions it has) and the capabilities in
force decide first whether the method is served at all (`Core._served`).

Every answer leaves through `_routed`: an answer to a batched request goes into
its batch's array, sent once the whole batch is answered (a duplicate id inside a
batch, or one in use, is answered there too). A batch has at most `BATCH_ITEMS`
messages, and the answers it holds are kept encoded and counted in a
`BatchBudget` shared by the server's cores: an answer past the batch's or the
server's bound becomes an error for its item, so what batches hold is bounded
whatever they ask for.

A core serves one `Identity` (`identity.py`; stdio's local user by default): every
request's `Context` carries its principal, to which the tasks it creates and the
`requestState` it is given are bound; where requestors cannot be told apart,
`tasks.list` is neither declared nor served.

The handlers of calls, content and tasks (`calls.py`, `content.py`, `task_requests.py`)
are imported where they are first used: the first answers (`initialize`, `ping`, the
tool list), which the front gives while trio loads, need none of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec

from mcpwrap.config.model import Config
from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol import modern
from mcpwrap.protocol.actions import Action, CancelCall, CancelTimer, Context, Send, Stderr, StopComplete, TaskOp
from mcpwrap.protocol.jsonrpc import Batch, Invalid, Notification, Request, RequestId, Response
from mcpwrap.protocol.safety_net import bug_report, unexpected
from mcpwrap.protocol.revisions import (CONTENT_METHODS, CORE_TASK_METHODS, EXTENSION_METHODS,
                                        EXTENSION_TASK_METHODS, MODERN, declared)
from mcpwrap.protocol.server_state import (BATCH_BYTES, BATCH_ITEMS, HELD_BYTES, BatchBudget, BatchState,
                                           ServerState, declares_extension, needs_extension)
from mcpwrap.protocol.session import HOLDS, level_allows
from mcpwrap.protocol.tools import ProtocolError, list_page, progress_params, render_result, result_error

if TYPE_CHECKING:
    from mcpwrap.config.model import Prompt
    from mcpwrap.protocol import asking
    from mcpwrap.protocol import resources
    from mcpwrap.protocol.answers import Asked
    from mcpwrap.protocol.task_requests import TaskOutcome
    from mcpwrap.protocol.tasking import TaskRecord
    from mcpwrap.result import Block, ToolResult
    from mcpwrap.result import Resource as Contents
    from mcpwrap.protocol.pages import Page

__all__ = ["BATCH_BYTES", "BATCH_ITEMS", "HANDLERS", "HELD_BYTES", "BatchBudget", "Core",
           "bug_report", "unexpected"]

Handler = Callable[["Core", Context], list[Action]]
P = ParamSpec("P")


def _answers(method: Callable[Concatenate[Core, P], list[Action]]) -> Callable[Concatenate[Core, P], list[Action]]:
    """A public outcome method: whatever it answers goes through the batch router."""
    @functools.wraps(method)
    def routed(self: Core, *args: P.args, **kwargs: P.kwargs) -> list[Action]:
        return self._routed(method(self, *args, **kwargs))
    return routed


class Core(ServerState):
    """One server's protocol state machine: `receive` decides, the outcome methods take the driver's reports."""

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
            return [Send(self._broken(message), () if message.id is None else (message.id,))]
        if isinstance(message, Request) and self._in_use(message.id):
            return [Send(self._id_in_use(message.id), (message.id,))]
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
        self.resolving.pop(request_id, None)
        for key in [k for k, p in self.asks.items() if p.ctx.id == request_id]:
            del self.asks[key]
        self.relays = {k: r for k, r in self.relays.items() if r[0].id != request_id}

    def _decide(self, message: Request | Notification | Response) -> list[Action]:
        if isinstance(message, Notification):
            return self._notification(message)
        if isinstance(message, Response):
            return self._answer(message)
        return self._request(message)

    def _in_use(self, request_id: RequestId) -> bool:
        return request_id in self.inflight or request_id in self.listens or request_id in self.batches

    def _broken(self, message: Invalid) -> dict[str, Any]:
        return self.error_message(message.id, ProtocolError(message.code, message.message), self.session.rev)

    def _id_in_use(self, request_id: RequestId) -> dict[str, Any]:
        return self.error_message(request_id, ProtocolError(
            -32600, "request id is already in use by a request in progress"), self.session.rev)

    def _batch(self, batch: Batch) -> list[Action]:
        if not self.session.rev.has("jsonrpc.batch") or any(
                isinstance(m, Request) and m.method == "initialize" for m in batch.items):
            error = ProtocolError(-32600, f"batches are not accepted in protocol revision {self.session.rev.version}")
            return [Send(self.error_message(None, error, self.session.rev), _requested(batch))]
        if len(batch.items) > BATCH_ITEMS:
            error = ProtocolError(-32600, f"a batch may hold at most {BATCH_ITEMS} messages; nothing ran: send the "
                                  "requests separately or in smaller batches")
            return [Send(self.error_message(None, error, self.session.rev), _requested(batch))]
        # Refusals are known at once, so they go first; the requests are registered before any runs.
        state, accepted, actions = BatchState(), list[Request | Notification | Response](), list[Action]()
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

    # --- requests -----------------------------------------------------------------------
    def _request(self, request: Request) -> list[Action]:
        is_modern = request.method != "initialize" and modern.is_modern(request.method, request.params)
        try:
            ctx = self._modern_context(request) if is_modern else self._legacy_context(request)
            self._served(ctx)
            actions = HANDLERS[ctx.method](self, ctx)
        except ProtocolError as error:
            actions = self.refusal(request.id, error, MODERN if is_modern else self.session.rev)
        return actions

    def _modern_context(self, request: Request) -> Context:
        meta = modern.read_meta(request.params)
        return Context(request.id, request.method, meta.rev, meta.capabilities, meta.log_level,
                       meta.progress_token, request.params, self.identity.principal)

    def _legacy_context(self, request: Request) -> Context:
        """The session's revision and capabilities; the session's state admits the method first."""
        ctx = Context(request.id, request.method, self.session.rev, self.session.client_capabilities,
                      params=request.params, progress_token=_progress_token(request.params),
                      principal=self.identity.principal)
        self.session.admit(ctx.method)
        return ctx

    def _served(self, ctx: Context) -> None:
        """-32601 for a method the revision lacks or the capabilities in force do not declare; -32021
        for a method of an extension (where the revision has them) the request does not declare."""
        extension = next((name for name, methods in EXTENSION_METHODS.items() if ctx.method in methods),
                         None) if ctx.rev.has("request.extensions") else None
        methods = EXTENSION_METHODS[extension] if extension else ctx.rev.methods
        if ctx.method not in methods or not declared(ctx.method, self.capabilities(ctx.rev)):
            raise ProtocolError(-32601, f"Method not found: {ctx.method}")
        if extension and not declares_extension(ctx, extension):
            raise needs_extension(extension, f"this method belongs to the {extension.rsplit('/', 1)[-1]} extension")

    # --- outcomes reported by the driver ------------------------------------------------
    @_answers
    def call_done(self, ctx: Context, result: ToolResult) -> list[Action]:
        """A call's result, or the JSON-RPC error its exit status stands for (`result_error`)."""
        if not self.settled(ctx):
            return []
        error = result_error(result)
        return [self.error_reply(ctx, error) if error else self.reply(ctx, render_result(result, ctx.rev))]

    @_answers
    def call_failed(self, ctx: Context, error: ProtocolError) -> list[Action]:
        """A call or any task operation ended in a JSON-RPC error (unless the client cancelled it)."""
        return [self.error_reply(ctx, error)] if self.settled(ctx) else []

    @_answers
    def paths_resolved(self, ctx: Context, resolution: asking.Resolution) -> list[Action]:
        """The outcome of a `ResolvePaths` (`run.arguments.resolve_paths`): the call goes on, or ends refused."""
        from mcpwrap.protocol import calls

        return calls.resolved(self, ctx, resolution)

    @_answers
    def once_refused(self, ctx: Context, spent: bool | OSError) -> list[Action]:
        """A `StartCall` whose requestState nonce was used already (False) or could not be recorded as
        used (the ledger's OSError): nothing ran, the request gets the error."""
        from mcpwrap.protocol import calls

        return calls.once_refused(self, ctx, spent)

    def progress(self, ctx: Context, progress: float, total: float | None, message: str | None) -> list[Action]:
        if ctx.progress_token is None or ctx.id not in self.inflight:
            return []
        params = progress_params(ctx.progress_token, progress, total, message, ctx.rev)
        return self.to_client(ctx, ("progress", ctx.id), jsonrpc.notification("notifications/progress", params))

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
            answer = jsonrpc.response(listen_id, modern.stamp(result, self.config))
            actions += [Send(cancel), Send(answer, (listen_id,))]
        return actions

    @_answers
    def timer(self, key: str) -> list[Action]:
        """Our question `key` timed out: its call ends, refused."""
        from mcpwrap.protocol import calls

        return calls.timed_out(self, key)

    @_answers
    def question_asked(self, ctx: Context, token: int, asked: Asked) -> list[Action]:
        """The call `ctx` is running and its command asked `asked`: the question goes to the client, or
        an `AnswerQuestion` says at once that nobody can be asked."""
        from mcpwrap.protocol import calls

        return calls.question_asked(self, ctx, token, asked)

    def question_over(self, token: int) -> list[Action]:
        """The call stopped waiting for its question `token` (it ended, or the question timed out)."""
        from mcpwrap.protocol import calls

        return calls.question_over(self, token)

    def _answer(self, response: Response) -> list[Action]:
        """A client's answer to our elicitation/create: about a call, or a task's relayed question."""
        from mcpwrap.protocol import calls, task_requests

        if str(response.id) in self.relays:
            return task_requests.relay_answered(self, response)
        return calls.answered(self, response)

    # --- resources, prompts, completions: outcomes and watches ---------------------------
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
        from mcpwrap.protocol import content

        return content.read_done(self, ctx, target, outcome)

    @_answers
    def prompt_done(self, ctx: Context, prompt: Prompt, blocks: list[tuple[str, Block]]) -> list[Action]:
        from mcpwrap.protocol import content

        return content.prompt_done(self, ctx, prompt, blocks)

    @_answers
    def completed(self, run: int, outcome: list[str] | ProtocolError) -> list[Action]:
        """A run's output lines (kept for `COMPLETION_TTL_S`) or its error, for every request waiting on it."""
        from mcpwrap.protocol import content

        return content.completed(self, run, outcome)

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

    # --- tasks: outcomes of TaskOps (store I/O happens in the driver) ----------------------
    @_answers
    def task_done(self, op: TaskOp, outcome: TaskOutcome) -> list[Action]:
        """The answer to a task-store operation the driver performed, from what it found."""
        from mcpwrap.protocol import task_requests

        return task_requests.answer(self, op, outcome)

    def task_waiting(self, ctx: Context) -> bool:
        """Whether a blocked tasks/result still has a client waiting (not cancelled)."""
        return ctx.id in self.inflight

    def task_changed(self, ctx: Context, previous: TaskRecord | None, current: TaskRecord) -> list[Action]:
        """A watched task moved: progress on the call's token, then notifications/tasks/status."""
        from mcpwrap.protocol import task_requests

        return task_requests.changed(self, ctx, previous, current)

    # --- notifications ------------------------------------------------------------------
    def _notification(self, note: Notification) -> list[Action]:
        handler = NOTIFICATIONS.get(note.method)
        return handler(self, note) if handler is not None else []


# --- the handlers of the methods Core serves itself ---------------------------------------
def _initialize(core: Core, ctx: Context) -> list[Action]:
    result = core.session.initialize(dict(ctx.params), core.config, core.capabilities)
    core.advertised, core.subscribed = result["capabilities"], set()
    return [core.reply(ctx, result)]


def _ping(core: Core, ctx: Context) -> list[Action]:
    return [core.reply(ctx, {})]


def _set_level(core: Core, ctx: Context) -> list[Action]:
    core.session.set_level(dict(ctx.params))
    return [core.reply(ctx, {})]


def _list_tools(core: Core, ctx: Context) -> list[Action]:
    return [core.listed(ctx, list_page(core.config, ctx.rev, ctx.params.get("cursor"), core.page_size))]


def _discover(core: Core, ctx: Context) -> list[Action]:
    return [core.reply(ctx, modern.discover(core.config, core.capabilities(ctx.rev)))]


def _listen(core: Core, ctx: Context) -> list[Action]:
    """A modern listen stream: the filter honoured is acknowledged, the stream stays open."""
    honoured = modern.listen_filter(ctx.params)
    wanted = ctx.params["notifications"].get("resourceSubscriptions")
    files = core.files()
    if isinstance(wanted, list) and (watched := [u for u in wanted if isinstance(u, str) and u in files]):
        honoured["resourceSubscriptions"] = watched
    core.listens[ctx.id] = honoured
    return [Send(modern.tagged("notifications/subscriptions/acknowledged", ctx.id, {"notifications": honoured}))]


def _call(core: Core, ctx: Context) -> list[Action]:
    from mcpwrap.protocol import calls

    return calls.call(core, ctx)


def _content(core: Core, ctx: Context) -> list[Action]:
    from mcpwrap.protocol import content

    return content.HANDLERS[ctx.method](core, ctx)


def _task(core: Core, ctx: Context) -> list[Action]:
    from mcpwrap.protocol import task_requests

    return task_requests.request(core, ctx)


# method -> its handler, for every method of every revision; `Core._served` gates it first.
HANDLERS: dict[str, Handler] = {
    "initialize": _initialize,
    "ping": _ping,
    "logging/setLevel": _set_level,
    "tools/list": _list_tools,
    "tools/call": _call,
    "server/discover": _discover,
    "subscriptions/listen": _listen,
    **dict.fromkeys(CONTENT_METHODS | {"resources/subscribe", "resources/unsubscribe"}, _content),
    **dict.fromkeys(CORE_TASK_METHODS | EXTENSION_TASK_METHODS, _task),
}


def _initialized(core: Core, note: Notification) -> list[Action]:
    """The legacy session is open: what was held for it leaves, unless its request or question ended."""
    core.session.event(note.method)
    if core.session.state in HOLDS:
        return []
    held, core.session.held = core.session.held, {}
    return [Send(message) for key, message in held.items() if core.live(key)]


def _cancelled(core: Core, note: Notification) -> list[Action]:
    """The client gave up a request: a listen ends; a call is cancelled, with our questions about it."""
    request_id = note.params.get("requestId")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return []
    if core.listens.pop(request_id, None) is not None:
        return core._drop_from_batch(request_id)
    if core.inflight.pop(request_id, None) is None:
        return []
    core.resolving.pop(request_id, None)
    withdrawn: list[Action] = []
    for key in [k for k, p in core.asks.items() if p.ctx.id == request_id]:
        del core.asks[key]             # withdraw our question too: the client can close its dialog
        withdrawn += [CancelTimer(key), *core.withdraw(key, "the call was cancelled")]
    withdrawn += core.drop_relays(request_id, "the request was cancelled")
    return [CancelCall(request_id), *withdrawn, *core._leave_completion(request_id),
            *core._drop_from_batch(request_id)]


# notification method -> its handler; any other notification is ignored.
NOTIFICATIONS: dict[str, Callable[[Core, Notification], list[Action]]] = {
    "notifications/initialized": _initialized,
    "notifications/cancelled": _cancelled,
}


def _progress_token(params: Mapping[str, Any]) -> str | int | None:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def _requested(batch: Batch) -> tuple[RequestId, ...]:
    """The ids of a batch's requests: what an answer to the batch as a whole answers."""
    return tuple(m.id for m in batch.items if isinstance(m, Request))
