"""The only seam between trio and the protocol: read, decide, act, one writer.

Lines come from stdin through `LineReader`; `Core` decides; this module
carries the actions out: one writer task owns stdout, each tool call runs in
its own cancel scope under one nursery, timers and the tools-file watcher are
tasks of the same nursery. EOF or SIGTERM/SIGINT cancels the calls (the
runner kills their process groups), ends listen streams, flushes the writer
and returns.
"""

from __future__ import annotations

import math
import os
import signal
import stat
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from mcpwrap import config as config_module
from mcpwrap import jsonrpc, runner, signing
from mcpwrap.protocol.core import (Action, CancelCall, Context, Core, Send, StartCall, StartTimer,
                                   Stderr, TaskOp)
from mcpwrap.protocol.tools import ProtocolError
from mcpwrap.result import error_result

WATCH_INTERVAL_S = 0.5
READ_CHUNK = 65536


LEVELS = ("debug", "info", "warning", "error")
_threshold = LEVELS.index("info")


def log(text: str, level: str = "info") -> None:
    """mcpwrap's own messages: stderr only, at or above --log-level."""
    if LEVELS.index(level) >= _threshold:
        print(text, file=sys.stderr, flush=True)


def tracing() -> bool:
    """--log-level debug: only then is a trace line worth formatting (it costs on every message)."""
    return _threshold == 0


@dataclass
class Options:
    secret_file: Path
    state_dir: Path
    watch: bool = True
    log_level: str = "info"               # debug also traces every message and tool stderr line


class SecretSource:
    """The shared keyring, loaded once on first need (or at start when a tool asks questions)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keyring: signing.Keyring | None = None

    def __call__(self) -> signing.Keyring:
        if self.keyring is None:
            self.keyring = signing.ensure_secret(self.path, time.time())
        return self.keyring


def _needs_secret(config: config_module.Config) -> bool:
    return any(t.confirm or any(a.elicit for a in t.args) for t in config.tools)


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


async def _read_chunks(fd: int, on_chunk: Callable[[bytes], None]) -> None:
    dup = os.dup(fd)
    if stat.S_ISREG(os.fstat(dup).st_mode):
        with open(dup, "rb", buffering=0) as f:
            while chunk := f.read(READ_CHUNK):
                on_chunk(chunk)
                await trio.sleep(0)
        return
    stream = trio.lowlevel.FdStream(dup)
    async with stream:
        while True:
            try:
                chunk = await stream.receive_some(READ_CHUNK)
            except (trio.BrokenResourceError, OSError):
                return
            if not chunk:
                return
            on_chunk(chunk)


@dataclass
class Driver:
    core: Core
    options: Options
    nursery: trio.Nursery
    outgoing: trio.MemorySendChannel[bytes]
    scopes: dict[Any, trio.CancelScope] = field(default_factory=dict)
    limiters: dict[str, trio.CapacityLimiter] = field(default_factory=dict)

    def perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                data = jsonrpc.encode(action.message)
                if tracing():
                    log("mcpwrap -> " + data.decode().rstrip(), "debug")
                self.outgoing.send_nowait(data)
            elif isinstance(action, StartCall):
                self.nursery.start_soon(self._run_call, action.ctx, action.tool, action.arguments)
            elif isinstance(action, CancelCall):
                scope = self.scopes.get(action.id)
                if scope is not None:
                    scope.cancel()
            elif isinstance(action, StartTimer):
                self.nursery.start_soon(self._timer, action.key, action.seconds)
            elif isinstance(action, Stderr):
                log(action.text, action.level)
            elif isinstance(action, TaskOp):
                self.nursery.start_soon(self._task_op, action)

    def _limiter(self, tool: config_module.Tool) -> trio.CapacityLimiter | None:
        if tool.concurrency is None:
            return None
        limiter = self.limiters.get(tool.name)
        if limiter is None or limiter.total_tokens != tool.concurrency:
            limiter = self.limiters[tool.name] = trio.CapacityLimiter(tool.concurrency)
        return limiter

    async def _run_call(self, ctx: Context, tool: config_module.Tool, arguments: dict[str, Any]) -> None:
        with trio.CancelScope() as scope:
            self.scopes[ctx.id] = scope
            try:
                limiter = self._limiter(tool)
                if limiter is not None:
                    async with limiter:
                        result = await self._execute(ctx, tool, arguments)
                else:
                    result = await self._execute(ctx, tool, arguments)
            finally:
                self.scopes.pop(ctx.id, None)
        if not scope.cancelled_caught:
            self.perform(self.core.call_done(ctx, result))

    async def _execute(self, ctx: Context, tool: config_module.Tool, arguments: dict[str, Any]) -> Any:
        try:
            return await runner.run(
                tool, arguments,
                on_stderr=lambda line: self._tool_stderr(ctx, tool, line),
                on_progress=lambda p, t, m: self.perform(self.core.progress(ctx, p, t, m)))
        except runner.ArgumentError as exc:
            return error_result(f"{exc}; nothing ran")
        except Exception as exc:  # a bug must cost one call, not the server
            log("mcpwrap: internal error in a tool call:\n" + traceback.format_exc(), "error")
            return error_result(f"internal error while running '{tool.name}': {exc}")

    def _tool_stderr(self, ctx: Context, tool: config_module.Tool, line: str) -> None:
        if tracing():
            log(f"mcpwrap [{tool.name}] {line}", "debug")
        self.perform(self.core.log(ctx, "info", tool.name, line))

    async def _timer(self, key: str, seconds: float) -> None:
        await trio.sleep(seconds)
        self.perform(self.core.timer(key))

    async def _task_op(self, op: TaskOp) -> None:
        from mcpwrap import tasks

        if op.op == "watch":
            await self._watch_task(op)
            return
        def failed(error: ProtocolError) -> list[Action]:
            # a blocking tasks/result is in flight (a cancel may have ended it); other ops are not
            return self.core.call_failed(op.ctx, error) if op.op == "result" else [self.core.error(op.ctx, error)]

        actions: list[Action] = []
        with trio.CancelScope() as scope:
            if op.op == "result":
                self.scopes[op.ctx.id] = scope      # notifications/cancelled for it ends the wait
            try:
                actions = await tasks.perform(op, self.core, self.options.state_dir)
            except ProtocolError as error:
                actions = failed(error)
            except Exception as exc:
                log("mcpwrap: task store error:\n" + traceback.format_exc(), "error")
                actions = failed(ProtocolError(-32603, f"task store error: {exc}"))
            finally:
                if op.op == "result":
                    self.scopes.pop(op.ctx.id, None)
        if not scope.cancelled_caught:
            self.perform(actions)

    async def _watch_task(self, op: TaskOp) -> None:
        """Follow a task this process created (bounded by its ttl) for notifications/tasks/status."""
        from mcpwrap import tasks

        try:
            await tasks.follow(self.options.state_dir, self.core.config.path, op.task_id or "",
                               lambda before, after: self.perform(self.core.task_changed(op.ctx, before, after)))
        except Exception:
            log("mcpwrap: cannot follow task status:\n" + traceback.format_exc(), "error")

    async def watch(self, path: Path) -> None:
        def signature() -> tuple[int, int, int] | None:
            try:
                st = os.stat(path)
            except OSError:
                return None
            return (st.st_mtime_ns, st.st_size, st.st_ino)

        last = signature()
        while True:
            await trio.sleep(WATCH_INTERVAL_S)
            current = signature()
            if current == last:
                continue
            last = current
            if current is None:
                log(f"mcpwrap: {path} is gone; keeping the last good tools until it comes back", "warning")
                continue
            try:
                new = config_module.load(path)
            except config_module.ConfigError as exc:
                log(f"mcpwrap: {path} changed but is invalid; keeping the last good tools:\n{exc}", "warning")
                continue
            if new.digest != self.core.config.digest:
                self.perform(self.core.reload(new))


async def _writer(incoming: trio.MemoryReceiveChannel[bytes], output: _Output) -> None:
    async with incoming:
        async for data in incoming:
            try:
                await output.write(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return                                    # the reader of stdout is gone


async def serve(config: config_module.Config, options: Options) -> int:
    secret = SecretSource(options.secret_file)
    if _needs_secret(config):
        secret()                          # refuse to start on a bad secret file, before any request
    core = Core(config, secret, time.time)
    output = _Output(1)
    send, receive = trio.open_memory_channel[bytes](math.inf)
    async with trio.open_nursery() as outer:
        outer.start_soon(_writer, receive, output)
        async with trio.open_nursery() as nursery:
            driver = Driver(core, options, nursery, send)
            if options.watch:
                nursery.start_soon(driver.watch, config.path)
            nursery.start_soon(_stop_on_signal, nursery.cancel_scope)
            reader = jsonrpc.LineReader()

            def deliver(lines: list[bytes | None]) -> None:
                for line in lines:
                    if tracing():
                        log("mcpwrap <- " + (line or b"(oversized line)").decode("utf-8", "replace"), "debug")
                    driver.perform(core.receive(jsonrpc.decode_line(line)))

            await _read_chunks(0, lambda chunk: deliver(reader.feed(chunk)))
            deliver(reader.finish())
            nursery.cancel_scope.cancel()             # EOF: cancel calls, timers, the watcher
        driver.perform(core.shutdown())
        send.close()
    return 0


async def _stop_on_signal(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _ in signals:
            scope.cancel()
            return


def run(config: config_module.Config, options: Options) -> int:
    global _threshold
    _threshold = LEVELS.index(options.log_level)
    return trio.run(serve, config, options)
