"""The one driver: carries out the core's actions on trio, whichever transport its messages take.

stdio (serve/stdio.py) and HTTP (serve/http.py) mirror each other by composition: each makes
`Driver`s with a `Post` of its own (stdout's `Outbox`; a `Router` over HTTP responses) and feeds
them what it reads. Nothing a peer does can grow memory or stall the loop: calls past `max_calls`
wait in the server's one waiting room (`Admission`) or are refused, each message waits for room in
its `Post`, and the tools file is re-read in a worker thread, only when it is a regular file.
"""

from __future__ import annotations

import gc
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import trio

from mcpwrap.config import load as config_module
from mcpwrap.protocol import audit
from mcpwrap.protocol.actions import (Action, AnswerQuestion, Audit, CancelCall, CancelTimer, Complete, Context, GetPrompt,
                                      ReadResource, ResolvePaths, Send, StartCall, StartTimer, Stderr, StopComplete,
                                      TaskOp)
from mcpwrap.protocol.answers import Asked
from mcpwrap.protocol.core import Core, bug_report
from mcpwrap.protocol.jsonrpc import RequestId
from mcpwrap.protocol.task_requests import TaskOutcome, TaskStoreFailed
from mcpwrap.protocol.tools import ProtocolError
from mcpwrap.result import error_result
from mcpwrap.run import process as runner
from mcpwrap.run.questions import Unanswered
from mcpwrap.run.spool import Spool
from mcpwrap.serve import effects as sources
from mcpwrap.serve.admission import Admission, Seat
from mcpwrap.serve.audit import Auditor
from mcpwrap.serve.common import STOP_SIGNALS, Options, file_signature, log, tracing, written

WATCH_INTERVAL_S = 0.5
RELOAD_SWITCH_S = 0.0005          # the GIL switch interval while a reload parses in a thread
RELEASE_SLICE = 500               # tools of a replaced config freed between two scheduler passes
NEWS = ("notifications/progress", "notifications/message")   # dropped, not queued, while the client is backed up


class Post(Protocol):
    """Where a driver's messages go: stdout's one `Outbox`, or `http_router.Router`, which puts each in the
    HTTP response it belongs to."""

    def send(self, action: Send, data: bytes, droppable: bool) -> None:
        """`data`, the line of `action.message`; `droppable` while the reader is backed up."""

    def abandon(self, request_id: RequestId) -> None:
        """A cancelled request will not be answered."""

    def hold(self) -> None:
        """Nothing leaves until the matching `release` (a decision's actions are all carried out first)."""

    def release(self) -> None: ...

    async def room(self) -> None:
        """Return once the client can take more (a call holds its slot until then)."""


@dataclass(eq=False)                      # one per stdio server, HTTP session or modern POST: identity is equality
class Driver:
    """Carries out the core's actions on trio, for every transport: `post` is where its messages go.

    Each tool call runs in its own cancel scope under `nursery` (as do resource reads, prompts and
    completions that need a file or a command), admitted by the server's waiting room; timers,
    task operations and the tools-file watcher (which also watches subscribed file resources) are
    tasks of the same nursery. Every outcome goes back to the core as a value.
    """
    core: Core
    options: Options
    nursery: trio.Nursery
    post: Post
    scopes: dict[Any, trio.CancelScope] = field(default_factory=dict)
    timers: dict[str, trio.CancelScope] = field(default_factory=dict)
    limiters: dict[str, trio.CapacityLimiter] = field(default_factory=dict)
    request_bytes: int = 0                # the size of the request line (or HTTP body) being decided
    files: dict[str, tuple[int, ...] | None] = field(default_factory=dict)   # watched resource -> signature
    admission: Admission | None = None    # the server's waiting room; None: one of this driver's own
    auditor: Auditor | None = None        # the server's audit writer; None: no audit trail
    waiting: dict[int, tuple[trio.Event, list[AnswerQuestion]]] = field(default_factory=dict)   # running calls' questions

    def __post_init__(self) -> None:
        self.room = self.admission or Admission(self.options.max_calls)
        self.trail = self.auditor or Auditor(None)
        self._spool: Spool | None = None

    @property
    def spool(self) -> Spool:
        """The output spool of the current tools file (a reload may change its quota or TTL)."""
        config = self.core.config
        if self._spool is None or (self._spool.quota, self._spool.ttl_s) != (config.spool.quota, config.spool.ttl_s):
            self._spool = Spool.for_tools_file(self.options.state_dir, config.path, config.spool.quota,
                                               config.spool.ttl_s, owner=self.core.identity.principal)
        return self._spool

    def perform(self, actions: list[Action]) -> None:
        """Carry out one decision's actions; its messages leave once all are carried out."""
        self.post.hold()                 # the messages leave once every action is carried out
        try:
            for action in actions:
                try:
                    self._perform([action])
                except Exception as exc:   # a bug must cost the request it met, not the server
                    self._perform(self._failed(action, exc))
        finally:
            self.post.release()

    def _failed(self, action: Action, exc: Exception) -> list[Action]:
        """An action that could not be carried out: one line logged (the traceback at debug), and its
        request (if any) answered -32603."""
        ctx = getattr(action, "ctx", None)
        request = f" for request {ctx.id!r}" if isinstance(ctx, Context) else ""
        log(bug_report(f"carrying out {type(action).__name__}{request}", exc), "error")
        log("mcpwrap: " + traceback.format_exc(), "debug")
        if not isinstance(ctx, Context):
            return []
        return self.core.call_failed(ctx, ProtocolError(-32603, "internal error: the request could not be "
                                                                "carried out (see the server's log)"))

    def _perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._send(action)
            elif isinstance(action, ResolvePaths):
                self.perform(self.core.paths_resolved(action.ctx, sources.resolved(action)))
            elif isinstance(action, StartCall):
                self._start_call(action)
            elif isinstance(action, CancelCall):
                self.post.abandon(action.id)
                scope = self.scopes.get(action.id)
                if scope is not None:
                    scope.cancel()
            elif isinstance(action, StartTimer):
                scope = self.timers[action.key] = trio.CancelScope()   # registered now: an answer may come first
                self.nursery.start_soon(self._timer, action.key, action.seconds, scope)
            elif isinstance(action, CancelTimer):
                timer = self.timers.pop(action.key, None)
                if timer is not None:
                    timer.cancel()
            elif isinstance(action, Stderr):
                log(action.text, action.level)
            elif isinstance(action, Audit):
                self.trail.post(action.record)
            elif isinstance(action, TaskOp):
                self.nursery.start_soon(self._task_op, action)
            elif isinstance(action, (ReadResource, GetPrompt, Complete)):
                self._start_content(action)
            elif isinstance(action, AnswerQuestion):
                if (waiter := self.waiting.get(action.token)) is not None:
                    waiter[1].append(action)
                    waiter[0].set()
            elif isinstance(action, StopComplete):
                scope = self.scopes.get(("complete", action.run))
                if scope is not None:
                    scope.cancel()
        if self.core.subscribed or self.core.listens:
            self._baseline()

    def _baseline(self) -> None:
        """A newly watched file's signature, taken when it is subscribed (a stat), so no change is missed."""
        for uri, path in self.core.watched().items():
            if uri not in self.files:
                self.files[uri] = file_signature(path)

    def _start_content(self, action: ReadResource | GetPrompt | Complete) -> None:
        """Admitted like a call (it takes a slot), or refused with the same words.

        Its cancel scope is registered now (a completion's by its run, which may outlive the request
        that started it), so a cancel that comes before the task starts still stops it.
        """
        seat = self.room.enter(self.request_bytes)
        if seat is None:
            self.perform(self._content_failed(action, ProtocolError(-32603, self.room.refusal())))
            return
        key = ("complete", action.run) if isinstance(action, Complete) else action.ctx.id
        scope = self.scopes[key] = trio.CancelScope()
        self.nursery.start_soon(self._content_op, action, seat, key, scope)

    async def _content_op(self, action: ReadResource | GetPrompt | Complete, seat: Seat, key: Any,
                          scope: trio.CancelScope) -> None:
        """A resource read, prompt or completion that needs a file or a command; cancellable like a call."""
        actions: list[Action] = []
        with scope:
            try:
                async with seat:
                    actions = await self._content(action)
            except ProtocolError as error:
                actions = self._content_failed(action, error)
            except Exception as exc:  # a bug must cost one request, not the server
                log("mcpwrap: internal error:\n" + traceback.format_exc(), "error")
                actions = self._content_failed(action, ProtocolError(-32603, f"internal error: {exc}"))
            finally:
                if self.scopes.get(key) is scope:
                    del self.scopes[key]
            await self.post.room()
        if not scope.cancelled_caught:
            self.perform(actions)

    async def _content(self, action: ReadResource | GetPrompt | Complete) -> list[Action]:
        if isinstance(action, ReadResource):
            outcome = await sources.read(action.target, self.spool)
            return self.core.resource_read(action.ctx, action.target, outcome)
        if isinstance(action, GetPrompt):
            blocks = await sources.prompt_blocks(self.core.config, action.prompt, action.arguments, self.spool,
                                                 action.ctx.rev)
            return self.core.prompt_done(action.ctx, action.prompt, blocks)
        return self.core.completed(action.run, await sources.complete(action.command))

    def _content_failed(self, action: ReadResource | GetPrompt | Complete, error: ProtocolError) -> list[Action]:
        """The error for the request (for a completion, for every request waiting on its run)."""
        if isinstance(action, Complete):
            return self.core.completed(action.run, error)
        return self.core.call_failed(action.ctx, error)

    def _send(self, action: Send) -> None:
        out = written(action.message)
        if out is None:
            return
        message, data = out
        self.post.send(action if message is action.message else Send(message, action.answers), data,
                       isinstance(message, dict) and message.get("method") in NEWS)

    def _start_call(self, action: StartCall) -> None:
        """Run now, or wait for one of max_calls slots; past the server's waiting room, refuse clearly.
        A call from an accepted requestState spends its nonce first."""
        if action.once is not None and (spent := sources.spend(self.options.state_dir, action.once)) is not True:
            self.perform(self.core.once_refused(action.ctx, spent))
            return
        seat = self.room.enter(self.request_bytes)
        if seat is None:
            refusal = self.room.refusal()
            if self.trail.log is not None:
                self.trail.post(audit.refused(self.core.caller(action.ctx), action.ctx.id, "limit", action.tool,
                                              action.arguments, refusal))
            self.perform(self.core.call_done(action.ctx, error_result(refusal)))
            return
        self.nursery.start_soon(self._run_call, action.ctx, action.tool, action.arguments, seat)

    def _limiter(self, tool: config_module.Tool) -> trio.CapacityLimiter | None:
        if tool.concurrency is None:
            return None
        limiter = self.limiters.get(tool.name)
        if limiter is None or limiter.total_tokens != tool.concurrency:
            limiter = self.limiters[tool.name] = trio.CapacityLimiter(tool.concurrency)
        return limiter

    async def _run_call(self, ctx: Context, tool: config_module.Tool, arguments: dict[str, Any], seat: Seat) -> None:
        with trio.CancelScope() as scope:
            self.scopes[ctx.id] = scope
            try:
                async with seat:
                    limiter = self._limiter(tool)
                    if limiter is not None:
                        async with limiter:
                            result = await self._execute(ctx, tool, arguments)
                    else:
                        result = await self._execute(ctx, tool, arguments)
                    await self.post.room()   # hold the slot until stdout can take the answer
            finally:
                self.scopes.pop(ctx.id, None)
        if not scope.cancelled_caught:
            self.perform(self.core.call_done(ctx, result))

    async def _execute(self, ctx: Context, tool: config_module.Tool, arguments: dict[str, Any]) -> Any:
        watch = _CallAudit(self.trail, self.core.caller(ctx), ctx.id, tool, arguments) if self.trail.log else None
        result = None
        try:
            result = await runner.run(
                tool, arguments,
                on_stderr=lambda line: self._tool_stderr(ctx, tool, line),
                on_progress=lambda p, t, m: self.perform(self.core.progress(ctx, p, t, m)),
                on_warning=lambda text: log(f"mcpwrap: {text}", "warning"), spool=self.spool,
                before_spawn=watch.start if watch else None,
                on_question=lambda asked: self._question(ctx, asked))
        except runner.ArgumentError as exc:
            result = error_result(f"{exc}; nothing ran")
        except Exception as exc:  # a bug must cost one call, not the server
            log("mcpwrap: internal error in a tool call:\n" + traceback.format_exc(), "error")
            result = error_result(f"internal error while running '{tool.name}': {exc}")
        finally:
            if watch is not None:
                watch.end(result)
        return result

    async def _question(self, ctx: Context, asked: Asked) -> Any:
        """Ask the client the running call's question (`Core.question_asked`) and wait for the
        `AnswerQuestion` its answer becomes: the answer, None when nobody can be asked, `Unanswered`."""
        token = id(asked)                   # the question lives until this returns: its id is unique meanwhile
        event, outcome = self.waiting[token] = (trio.Event(), [])
        try:
            self.perform(self.core.question_asked(ctx, token, asked))
            await event.wait()
        finally:
            del self.waiting[token]
            if not outcome:
                self.perform(self.core.question_over(token))
        if outcome[0].refusal is not None:
            raise Unanswered(outcome[0].refusal)
        return outcome[0].value

    def _tool_stderr(self, ctx: Context, tool: config_module.Tool, line: str) -> None:
        if tracing():
            log(f"mcpwrap [{tool.name}] {line}", "debug")
        self.perform(self.core.log(ctx, "info", tool.name, line))

    async def _timer(self, key: str, seconds: float, scope: trio.CancelScope) -> None:
        with scope:
            try:
                await trio.sleep(seconds)
            finally:
                self.timers.pop(key, None)
        if not scope.cancelled_caught:
            self.perform(self.core.timer(key))

    async def _task_op(self, op: TaskOp) -> None:
        from mcpwrap.serve import tasks

        if op.op == "watch":
            await self._watch_task(op)
            return
        actions: list[Action] = []
        with trio.CancelScope() as scope:
            if op.op == "result":
                self.scopes[op.ctx.id] = scope      # notifications/cancelled for it ends the wait
            outcome: TaskOutcome
            try:
                outcome = await tasks.perform(op, self.core, self.options.state_dir, self.options.secret_file,
                                              self.options.max_tasks)
            except Exception as exc:
                log("mcpwrap: task store error:\n" + traceback.format_exc(), "error")
                outcome = TaskStoreFailed(f"task store error: {exc}")
            finally:
                if op.op == "result":
                    self.scopes.pop(op.ctx.id, None)
            actions = self.core.task_done(op, outcome)
            await self.post.room()
        if not scope.cancelled_caught:
            self.perform(actions)

    async def _watch_task(self, op: TaskOp) -> None:
        """Follow a task this process created (bounded by its ttl) for notifications/tasks/status."""
        from mcpwrap.serve import tasks

        try:
            await tasks.follow(self.options.state_dir, self.core.config.path, op.task_id or "",
                               lambda before, after: self.perform(self.core.task_changed(op.ctx, before, after)))
        except Exception:
            log("mcpwrap: cannot follow task status:\n" + traceback.format_exc(), "error")

    async def watch(self, path: Path, last: tuple[int, ...] | None) -> None:
        """Reload the tools file when it changes; the reading and checking happen off the event loop.

        `last` is the file's signature taken before the first request was read, so no change is missed.
        """
        while True:
            await trio.sleep(WATCH_INTERVAL_S)
            await self._watch_files()
            current = await trio.to_thread.run_sync(file_signature, path, abandon_on_cancel=True)
            if current == last:
                continue
            last = current
            if current is None:
                log(f"mcpwrap: {path} is gone; keeping the last good tools until it comes back", "warning")
                continue
            try:
                new = await trio.to_thread.run_sync(self._reloaded, path, abandon_on_cancel=True)
            except config_module.ConfigError as exc:
                log(f"mcpwrap: {path} changed but is invalid; keeping the last good tools:\n{exc}", "warning")
                continue
            except Exception as exc:  # a file the loader was not made for (RecursionError...) costs the reload only
                log(f"mcpwrap: {path} changed but cannot be loaded ({type(exc).__name__}: {exc}); "
                    "keeping the last good tools", "warning")
                continue
            if new.digest != self.core.config.digest:
                old_tools = list(self.core.config.tools)
                self.trail.use(new.audit)
                self.perform(self.core.reload(new))
                del new
                while old_tools:          # freed a slice at a time: 10,000 tools at once held the loop ~25 ms
                    del old_tools[-RELEASE_SLICE:]
                    await trio.sleep(0)

    def _reloaded(self, path: Path) -> config_module.Config:
        """In a worker thread: the whole new config, name index included, so the swap on the loop is O(1).

        The switch interval is shortened meanwhile: the loop waits that long for the GIL, and
        loading 10,000 tools takes a second of it. The collector is off meanwhile and what the load
        made is frozen, as at start-up: a million new objects left young made the next collection
        scan them all, holding the loop 30-50 ms (no cycle among them: a replaced config is freed
        by reference counts, frozen or not).
        """
        interval = sys.getswitchinterval()
        sys.setswitchinterval(RELOAD_SWITCH_S)
        collecting = gc.isenabled()
        gc.disable()
        try:
            new = self.options.applied(config_module.load(path))
            new.tool("")                  # builds the name index here, not on the first call
            gc.freeze()
            return new
        finally:
            if collecting:
                gc.enable()
            sys.setswitchinterval(interval)

    async def _watch_files(self) -> None:
        """notifications/resources/updated for each subscribed file resource that changed."""
        watched = self.core.watched()
        for uri in set(self.files) - set(watched):
            del self.files[uri]
        if not watched:
            return
        now = await trio.to_thread.run_sync(lambda: {u: file_signature(p) for u, p in watched.items()},
                                            abandon_on_cancel=True)
        for uri, signature in now.items():
            if uri in self.files and self.files[uri] != signature:
                self.perform(self.core.resource_changed(uri))
            self.files[uri] = signature


@dataclass
class _CallAudit:
    """One call's `call.start` (written before the spawn: awaited, flushed, when `audit_required`)
    and its `call.end` (once `call.start` was written), for the server's audit trail."""
    trail: Auditor
    caller: audit.Caller
    request_id: Any
    tool: config_module.Tool
    arguments: dict[str, Any]
    started: float | None = None

    async def start(self, argv: list[str], cwd: str) -> str | None:
        """`runner.run`'s `before_spawn`: the refusal when the line is required and cannot be written."""
        record = audit.call_start(self.caller, self.request_id, self.tool, self.arguments, argv, cwd,
                                  runner.containment(), audit.sandbox_words(self.tool))
        if self.trail.required:
            failure = await self.trail.write(record)
            if failure is not None:
                self.trail.post(audit.refused(self.caller, self.request_id, "unaudited", self.tool,
                                              self.arguments, failure))
                return f"not run: the audit log could not be written: {failure}"
        else:
            self.trail.post(record)
        self.started = trio.current_time()
        return None

    def end(self, result: Any) -> None:
        """`call.end` from the result; without one (cancelled), what is known."""
        if self.started is not None:
            self.trail.post(audit.call_ended(self.caller, self.request_id, self.tool.name, result,
                                             trio.current_time() - self.started))


async def stop_on_signal(scope: trio.CancelScope, caught: Callable[[], bool] = lambda: False,
                         trail: Auditor | None = None) -> None:
    """Cancel `scope` on SIGTERM/SIGINT/SIGHUP, or at once for one `caught` before this receiver was open.
    While there is an audit trail, SIGHUP reopens it instead (logrotate)."""
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        if not caught():
            async for signum in signals:
                if signum == signal.SIGHUP and trail is not None and trail.log is not None:
                    trail.reopen()
                    continue
                break
        scope.cancel()
