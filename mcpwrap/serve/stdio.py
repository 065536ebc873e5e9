"""`mcpwrap serve` on stdio under trio: stdin read, the one `Driver` posting to stdout.

`serve` takes stdio over from `front.Front`, which answered what it could while this module was
imported. Lines come from stdin through `LineReader`; `Core` decides; the `Driver` carries the
actions out, its messages into one `Outbox` that owns stdout (it writes at once when nothing is
waiting, else its writer task does, in order). EOF, a closed stdout or SIGTERM/SIGINT/SIGHUP
(SIGHUP reopens the audit trail instead, when there is one) cancels the calls (the runner kills their process groups), ends listen streams, flushes the
writer for a bounded time and returns.

stdout is bounded: the reader waits for room before it takes the next request, and progress/log
notifications are dropped while it is full.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable, Iterable

import trio

from mcpwrap.config import model as config_module
from mcpwrap.serve.audit import Auditor
from mcpwrap.serve.common import FLUSH_S, READ_CHUNK, Options, log, received, trace_in
from mcpwrap.serve.driver import Driver, stop_on_signal
from mcpwrap.serve.front import Front
from mcpwrap.serve.outbox import Outbox


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

    trail = Auditor(core.config.audit)
    async with trio.open_nursery() as outer:
        outer.start_soon(write_out)
        with serving:
            async with trio.open_nursery() as nursery:
                driver = Driver(core, options, nursery, outbox, auditor=trail)   # stdio: one driver, stdout its post
                if options.watch:
                    nursery.start_soon(driver.watch, config.path, signature)
                nursery.start_soon(stop_on_signal, nursery.cancel_scope, lambda: front.signalled, trail)
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
        await trail.closed()                              # what the calls' ends queued is written first
        outbox.close()
        with trio.move_on_after(FLUSH_S):
            await outbox.drained()
        outer.cancel_scope.cancel()               # a client that stopped reading stdout is not waited for
    return 0
