"""The only seam between trio and the protocol: read, decide, act, one writer.

`serve` takes stdio over from `front.Front`, which answered what it could while this
module was imported. Lines come from stdin through `LineReader`; `Core` decides; this module
carries the actions out: one `Outbox` owns stdout (it writes at once when nothing
is waiting, else its writer task does, in order), each tool call runs in
its own cancel scope under one nursery (as do resource reads, prompts and
completions that need a file or a command), timers and the tools-file watcher
(which also watches subscribed file resources) are tasks of the same nursery. EOF, a closed stdout or SIGTERM/SIGINT cancels the
calls (the runner kills their process groups), ends listen streams, flushes
the writer for a bounded time and returns.

Nothing a peer does can grow memory or stall the loop: stdout is a bounded
`Outbox` (the reader waits for room before it takes the next request, and
progress/log notifications are dropped while it is full), mcpwrap's own log
lines go through a bounded queue to a thread, calls past `max_calls` wait in
the server's one waiting room (`Admission`, shared with every HTTP session and
POST) bounded in number and in the bytes of their requests and are refused
past it, the tools file is re-read in a worker thread and only when
it is a regular file.
"""

from __future__ import annotations

import gc
import os
import stat
import sys
import time
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import trio

from mcpwrap.config import load as config_module
from mcpwrap.protocol.actions import (Action, CancelCall, CancelTimer, Complete, Context, GetPrompt, ReadResource,
                                      ResolvePaths, Send, StartCall, StartTimer, Stderr, StopComplete, TaskOp)
from mcpwrap.protocol.core import Core, bug_report
from mcpwrap.protocol.tools import ProtocolError
from mcpwrap.result import error_result
from mcpwrap.run import process as runner
from mcpwrap.run.spool import Spool
from mcpwrap.serve import effects as sources
from mcpwrap.serve.front import (FLUSH_S, OUTBOX_BYTES, READ_CHUNK, STOP_SIGNALS, Front, Options, encoded,
                                 file_signature, log, received, trace_in, tracing)

WATCH_INTERVAL_S = 0.5
QUEUED_PER_SLOT = 64              # calls that may wait for a slot, per slot of --max-calls (4,160 at the default)
WAITING_BYTES = 32 * 1024 * 1024  # request bytes the waiting calls may hold; a waiting call costs ~5 KiB besides
RELOAD_SWITCH_S = 0.0005          # the GIL switch interval while a reload parses in a thread
RELEASE_SLICE = 500               # tools of a replaced config freed between two scheduler passes
NEWS = ("notifications/progress", "notifications/message")   # dropped, not queued, while stdout is backed up


class _Output:
    """stdout as one ordered byte sink; regular files are written directly (epoll refuses them)."""

    def __init__(self, fd: int) -> None:
        self.fd = os.dup(fd)
        self.stream = None if stat.S_ISREG(os.fstat(self.fd).st_mode) else trio.lowlevel.FdStream(self.fd)

    async def write(self, data: bytes) -> None:
        if self.stream is None:
            os.write(self.fd, data)
        else:
            await self.stream.send_all(data)

    def write_now(self, data: bytes) -> int:
        """As much of `data` as stdout takes without waiting (a pipe's fd is non-blocking; a file takes all)."""
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0


class Sink(Protocol):
    """Where an Outbox writes: stdout here, an HTTP response in serve/http.py."""
    async def write(self, data: bytes) -> None: ...


class Outbox:
    """stdout's backlog, bounded in bytes, with backpressure instead of growth.

    Responses and our own requests always queue: their number is bounded by the
    calls allowed to run. Progress and log notifications are dropped while the
    backlog is full. The reader waits for `room` before it takes the next
    request, so a client that stops reading stdout stops being served instead
    of growing the server.

    With `write_now` (a sink's write that never waits), what is queued is written at once while
    the writer task is not in a write, saving its two scheduler passes; what the sink does not
    take at once (or refuses: a broken stdout) stays queued for the writer task, in order.
    Between `hold` and `release` nothing is written at once: the driver carries out all the
    actions of a decision before any of its messages leaves (a subscribed file's signature is
    taken before the answer that tells the client it may edit the file).
    """

    def __init__(self, limit: int = OUTBOX_BYTES, write_now: Callable[[bytes], int] | None = None) -> None:
        self.limit = limit
        self.write_now = write_now
        self.items: deque[bytes] = deque()
        self.size = 0                      # queued or being written
        self.writing = False               # the writer task is in a write: nothing may overtake it
        self.holding = 0                   # holds not yet released
        self.closed = False
        self.dropped = 0
        self.next_warning = 0.0
        self.lot = trio.lowlevel.ParkingLot()     # waiting for room, or for the backlog to drain
        self.work = trio.lowlevel.ParkingLot()    # the writer task, waiting for something to write

    @property
    def full(self) -> bool:
        return self.size >= self.limit

    def put(self, data: bytes, droppable: bool = False) -> None:
        if self.closed:
            return
        if self.full and droppable:
            self.dropped += 1
            return
        self.items.append(data)
        self.size += len(data)
        if not self.holding:
            self._flush()
        if self.full and time.monotonic() >= self.next_warning:
            self.next_warning = time.monotonic() + 60
            log(f"mcpwrap: the client is not reading stdout; holding back ({self.size} bytes waiting, "
                f"{self.dropped} progress/log notification(s) dropped so far)", "info")

    def hold(self) -> None:
        self.holding += 1

    def release(self) -> None:
        self.holding -= 1
        if not self.holding and self.items:
            self._flush()

    def _flush(self) -> None:
        """The queue written at once as far as `write_now` takes it; the writer task is woken for the rest."""
        if self.write_now is not None and not self.writing:
            try:
                while self.items:
                    data = self.items[0]
                    written = self.write_now(data)
                    self.size -= written
                    if written < len(data):
                        self.items[0] = data[written:]
                        break
                    self.items.popleft()
            except OSError:
                pass                       # the writer task meets the same error and shuts the server down
            if self.lot:                   # someone waits for room or for the backlog to drain
                self.lot.unpark_all()
        if self.items:
            self.work.unpark_all()

    async def room(self) -> None:
        while self.full and not self.closed:
            await self.lot.park()

    async def drained(self) -> None:
        while self.size:
            await self.lot.park()

    def close(self) -> None:
        """No more messages: the writer ends once the backlog is written."""
        self.closed = True
        self.lot.unpark_all()
        self.work.unpark_all()

    async def write_to(self, output: Sink) -> None:
        """The writer task: returns when closed and empty, or when stdout breaks."""
        while True:
            while not self.items:
                if self.closed:
                    return
                await self.work.park()
            data = self.items.popleft()
            self.writing = True
            try:
                await output.write(data)
            finally:
                self.writing = False
                self.size -= len(data)
                self.lot.unpark_all()


class _Held:
    """`async with _Held(limiter)`: a free token is taken without the scheduler pass trio's
    `acquire` always makes (a cancelled caller still stops there); otherwise it waits in line."""

    def __init__(self, limiter: trio.CapacityLimiter) -> None:
        self.limiter = limiter

    async def __aenter__(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self.limiter.acquire_nowait()
        except trio.WouldBlock:
            await self.limiter.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.limiter.release()


class Admission:
    """The server's one waiting room, shared by every driver, session and POST of the process.

    `slots` lets `max_calls` calls (and resource reads, prompts, completions) run at once; past
    them up to `max_calls * QUEUED_PER_SLOT` wait, as long as their requests hold at most
    `WAITING_BYTES` (a batch's request counts for each of its calls, an HTTP body as a line);
    the next one is refused. A waiting call costs its request and a parked task, no descriptor.
    """

    def __init__(self, max_calls: int) -> None:
        self.max_calls = max_calls
        self.slots = trio.CapacityLimiter(max_calls)
        self.admitted = 0                 # running or waiting for a slot
        self.waiting_bytes = 0            # request bytes of those waiting

    def enter(self, request_bytes: int) -> _Seat | None:
        """A place for one more, holding `request_bytes` while it waits; None past the waiting room."""
        waits = self.admitted >= self.max_calls
        size = request_bytes if waits else 0
        if waits and (self.admitted >= self.max_calls * (1 + QUEUED_PER_SLOT)
                      or self.waiting_bytes + size > WAITING_BYTES):
            return None
        self.admitted += 1                # counted now: the next request may arrive before this one runs
        self.waiting_bytes += size
        return _Seat(self, size)

    def refusal(self) -> str:
        return (f"mcpwrap is at its limit: {self.max_calls} calls are running and {self.admitted - self.max_calls} "
                f"are waiting with {self.waiting_bytes} bytes of requests (--max-calls); nothing ran, try again later")


class _Seat:
    """`async with seat`: wait for a slot (the request's bytes stop counting once it has one), hold
    it, and leave the waiting room at the end however it ends."""

    def __init__(self, admission: Admission, size: int) -> None:
        self.admission, self.size = admission, size
        self.held = _Held(admission.slots)

    async def __aenter__(self) -> None:
        try:
            await self.held.__aenter__()
        except BaseException:             # cancelled while waiting
            self.leave()
            raise
        self.admission.waiting_bytes -= self.size
        self.size = 0

    async def __aexit__(self, *exc: object) -> None:
        self.leave()
        await self.held.__aexit__(*exc)

    def leave(self) -> None:
        self.admission.admitted -= 1
        self.admission.waiting_bytes -= self.size
        self.size = 0


async def _read_chunks(fd: int, on_chunk: Callable[[bytes], Awaitable[None]]) -> None:
    dup = os.dup(fd)
    if stat.S_ISREG(os.fstat(dup).st_mode):
        with open(dup, "rb", buffering=0) as f:
            while chunk := f.read(READ_CHUNK):
                await on_chunk(chunk)
                await trio.sleep(0)
        return
    # Waits for input before reading it: after a request the reader parks at once, instead of
    # yielding, trying a read that finds nothing and only then parking (the stream keeps the
    # fd non-blocking, and restores it at the end).
    async with trio.lowlevel.FdStream(dup):
        while True:
            try:
                await trio.lowlevel.wait_readable(dup)
                chunk = os.read(dup, READ_CHUNK)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not chunk:
                return
            await on_chunk(chunk)


@dataclass
class Driver:
    core: Core
    options: Options
    nursery: trio.Nursery
    outbox: Outbox
    scopes: dict[Any, trio.CancelScope] = field(default_factory=dict)
    timers: dict[str, trio.CancelScope] = field(default_factory=dict)
    limiters: dict[str, trio.CapacityLimiter] = field(default_factory=dict)
    request_bytes: int = 0                # the size of the request line (or HTTP body) being decided
    files: dict[str, tuple[int, ...] | None] = field(default_factory=dict)   # watched resource -> signature
    admission: Admission | None = None    # the server's waiting room; None: one of this driver's own

    def __post_init__(self) -> None:
        self.room = self.admission or Admission(self.options.max_calls)
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
        self.outbox.hold()                 # the messages leave once every action is carried out
        try:
            for action in actions:
                try:
                    self._perform([action])
                except Exception as exc:   # a bug must cost the request it met, not the server
                    self._perform(self._failed(action, exc))
        finally:
            self.outbox.release()

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
                self._send(action.message)
            elif isinstance(action, ResolvePaths):
                self.perform(self.core.paths_resolved(action.ctx, sources.resolved(action)))
            elif isinstance(action, StartCall):
                self._start_call(action)
            elif isinstance(action, CancelCall):
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
            elif isinstance(action, TaskOp):
                self.nursery.start_soon(self._task_op, action)
            elif isinstance(action, (ReadResource, GetPrompt, Complete)):
                self._start_content(action)
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

    async def _content_op(self, action: ReadResource | GetPrompt | Complete, seat: _Seat, key: Any,
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
            await self.outbox.room()
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

    def _send(self, message: dict[str, Any] | list[dict[str, Any]]) -> None:
        data = encoded(message)
        if data is not None:
            self.outbox.put(data, isinstance(message, dict) and message.get("method") in NEWS)

    def _start_call(self, action: StartCall) -> None:
        """Run now, or wait for one of max_calls slots; past the server's waiting room, refuse clearly.
        A call from an accepted requestState spends its nonce first."""
        if action.once is not None and (spent := sources.spend(self.options.state_dir, action.once)) is not True:
            self.perform(self.core.once_refused(action.ctx, spent))
            return
        seat = self.room.enter(self.request_bytes)
        if seat is None:
            self.perform(self.core.call_done(action.ctx, error_result(self.room.refusal())))
            return
        self.nursery.start_soon(self._run_call, action.ctx, action.tool, action.arguments, seat)

    def _limiter(self, tool: config_module.Tool) -> trio.CapacityLimiter | None:
        if tool.concurrency is None:
            return None
        limiter = self.limiters.get(tool.name)
        if limiter is None or limiter.total_tokens != tool.concurrency:
            limiter = self.limiters[tool.name] = trio.CapacityLimiter(tool.concurrency)
        return limiter

    async def _run_call(self, ctx: Context, tool: config_module.Tool, arguments: dict[str, Any], seat: _Seat) -> None:
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
                    await self.outbox.room()   # hold the slot until stdout can take the answer
            finally:
                self.scopes.pop(ctx.id, None)
        if not scope.cancelled_caught:
            self.perform(self.core.call_done(ctx, result))

    async def _execute(self, ctx: Context, tool: config_module.Tool, arguments: dict[str, Any]) -> Any:
        try:
            return await runner.run(
                tool, arguments,
                on_stderr=lambda line: self._tool_stderr(ctx, tool, line),
                on_progress=lambda p, t, m: self.perform(self.core.progress(ctx, p, t, m)),
                on_warning=lambda text: log(f"mcpwrap: {text}", "warning"), spool=self.spool)
        except runner.ArgumentError as exc:
            return error_result(f"{exc}; nothing ran")
        except Exception as exc:  # a bug must cost one call, not the server
            log("mcpwrap: internal error in a tool call:\n" + traceback.format_exc(), "error")
            return error_result(f"internal error while running '{tool.name}': {exc}")

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
            try:
                actions = await tasks.perform(op, self.core, self.options.state_dir, self.options.secret_file,
                                              self.options.max_tasks)
            except ProtocolError as error:
                actions = self.core.call_failed(op.ctx, error)
            except Exception as exc:
                log("mcpwrap: task store error:\n" + traceback.format_exc(), "error")
                actions = self.core.call_failed(op.ctx, ProtocolError(-32603, f"task store error: {exc}"))
            finally:
                if op.op == "result":
                    self.scopes.pop(op.ctx.id, None)
            await self.outbox.room()
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
            new = self.options.toolset.apply(config_module.load(path))
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


async def serve(config: config_module.Config, options: Options, front: Front,
                signature: tuple[int, ...] | None) -> int:
    """Serve stdio on from where `front` stopped; `signature`: the tools file's, taken before it read anything."""
    core = front.core
    output = _Output(1)
    outbox = Outbox(write_now=output.write_now)
    if front.output:
        outbox.put(bytes(front.output))   # first: answers the front decided before the hand-over
    serving = trio.CancelScope()

    async def write_out() -> None:
        try:
            await outbox.write_to(output)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            log("mcpwrap: stdout was closed by the client; shutting down", "info")
            outbox.close()
            serving.cancel()              # nobody can hear us: stop serving, as on EOF

    async with trio.open_nursery() as outer:
        outer.start_soon(write_out)
        with serving:
            async with trio.open_nursery() as nursery:
                driver = Driver(core, options, nursery, outbox)   # stdio: one driver, its own room
                if options.watch:
                    nursery.start_soon(driver.watch, config.path, signature)
                nursery.start_soon(_stop_on_signal, nursery.cancel_scope, lambda: front.signalled)
                reader = front.reader

                async def deliver(lines: Iterable[bytes | None]) -> None:
                    for line in lines:
                        await outbox.room()       # a client that does not read stdout is not served more
                        trace_in(line)
                        driver.request_bytes = len(line) if line else 0
                        driver.perform(received(core, line))

                async def on_chunk(chunk: bytes) -> None:
                    await deliver(reader.feed(chunk))

                driver.request_bytes = front.request_bytes
                driver.perform(front.pending)
                await deliver(front.lines)
                if not front.eof:
                    await _read_chunks(0, on_chunk)
                    await deliver(reader.finish())
                nursery.cancel_scope.cancel()             # EOF: cancel calls, timers, the watcher
        driver.perform(core.shutdown())
        outbox.close()
        with trio.move_on_after(FLUSH_S):
            await outbox.drained()
        outer.cancel_scope.cancel()               # a client that stopped reading stdout is not waited for
    return 0


async def _stop_on_signal(scope: trio.CancelScope, caught: Callable[[], bool] = lambda: False) -> None:
    """Cancel `scope` on SIGTERM/SIGINT/SIGHUP, or at once for one `caught` before this receiver was open."""
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        if not caught():
            async for _ in signals:
                break
        scope.cancel()
