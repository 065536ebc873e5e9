"""`mcpwrap serve` on stdio before trio has loaded: the first answers come from here.

Importing trio (with the runner and the trio driver) is most of a cold start, while the sans-IO
`Core` answers `initialize`, `ping`, the listings and `server/discover` with no I/O. So `Front`
first answers what is already waiting on stdin (a client writes `initialize` as it spawns the
server), then, while `launch` imports the driver in a thread, serves stdin itself, synchronously,
through the `Core` the trio driver then takes over (the session carries over). A line whose
actions are more than messages and log lines (a call, a read, a task, a subscription to watch...)
is decided here and its actions wait; once the import is done, `stdio.serve` takes over in order:
the bytes not yet written, the actions decided and not yet performed, the lines read and not yet
decided, then the `LineReader` with its partial line. Nothing is lost, repeated or reordered.

EOF, a closed stdout or SIGTERM/SIGINT/SIGHUP before the hand-over end the session here as
`stdio.serve` ends it (shutdown actions, stdout flushed for at most FLUSH_S, exit 0), and trio
never runs. stdout is written non-blocking from a backlog bounded like `outbox.Outbox`: past
OUTBOX_BYTES no request is taken, so a client that never reads stdout neither blocks nor grows the
front; the backlog is the Outbox's first item at the hand-over.

This module imports nothing but `protocol/` and `serve.common`: it is on every session's way to
its first answer.
"""

from __future__ import annotations

import os
import select
import stat
import time
from collections import deque
from typing import Any

from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol.actions import Action, Send, Stderr
from mcpwrap.protocol.core import Core
from mcpwrap.serve.common import FLUSH_S, OUTBOX_BYTES, READ_CHUNK, encoded, log, received, trace_in

LOADED = b"\0"                    # the import thread's byte on the wake pipe (a signal writes its number)


class Front:
    """stdin and stdout served synchronously by `core` until trio is loaded (see the module docstring).

    What `stdio.serve` takes over: `output` (encoded, not yet written), `pending` (the actions
    decided for a line of `request_bytes` bytes, not yet performed), `lines` (read, not yet
    decided), `reader` (its partial line) unless `eof`; and `signalled`, the stop signals
    caught since, until trio's own receiver replaces the handler.
    """

    def __init__(self, core: Core, fd_in: int = 0, fd_out: int = 1) -> None:
        self.core = core
        self.fd_in, self.fd_out = fd_in, fd_out
        self.reader = jsonrpc.LineReader()
        self.lines: deque[bytes | None] = deque()
        self.pending: list[Action] = []
        self.request_bytes = 0
        self.output = bytearray()
        self.eof = False
        self.closed = False               # stdout is gone
        self.signalled = False
        self.loaded = False

    def __enter__(self) -> Front:
        """stdout non-blocking while the front writes (a regular file never blocks, and keeps its mode)."""
        self.regular = stat.S_ISREG(os.fstat(self.fd_out).st_mode)
        self.blocking = os.get_blocking(self.fd_out)
        if not self.regular:
            os.set_blocking(self.fd_out, False)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.regular:
            os.set_blocking(self.fd_out, self.blocking)   # as trio's FdStream expects to find and leave it

    def decide(self) -> None:
        """Answer the lines read, in order, until one needs the driver or stdout's backlog is full."""
        while self.lines and not self.pending and len(self.output) < OUTBOX_BYTES:
            line = self.lines.popleft()
            trace_in(line)
            actions = received(self.core, line)
            if self.core.listens or self.core.subscribed or not all(isinstance(a, (Send, Stderr)) for a in actions):
                self.pending, self.request_bytes = actions, len(line) if line else 0
                return
            self.perform(actions)

    def perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                data = encoded(action.message)
                if data is not None and not self.closed:
                    self.output += data
            elif isinstance(action, Stderr):
                log(action.text, action.level)

    def feed(self, chunk: bytes) -> None:
        if chunk:
            self.lines.extend(self.reader.feed(chunk))
        else:
            self.eof = True
            self.lines.extend(self.reader.finish())

    def caught(self, signum: int, frame: Any) -> None:
        """The handler of the stop signals, from the start until trio's receiver replaces it."""
        self.signalled = True

    def serve(self, wake: int) -> bool:
        """Until trio is loaded (True: hand over) or the session ends here (False: finish)."""
        while True:
            self.decide()
            if self.signalled or self.closed or (self.eof and not self.lines and not self.pending):
                return False
            if self.loaded:
                return True
            self._poll(wake, None, reading=not self.eof and not self.pending and len(self.output) < OUTBOX_BYTES)

    def answer_waiting(self, wake: int) -> None:
        """Answer the requests already on stdin before trio's import starts to share the GIL with us
        (a client writes `initialize` as it starts the server: it is there by now)."""
        self._poll(wake, 0, reading=True)
        self.decide()
        self._poll(wake, 0, reading=False)

    def finish(self, wake: int) -> None:
        """The session ended before the hand-over: end it as `stdio.serve` does, without trio."""
        self.pending = []                 # as a cancellation would: what was decided never starts
        self.perform(self.core.shutdown())
        deadline = time.monotonic() + FLUSH_S
        while self.output and not self.closed and (left := deadline - time.monotonic()) > 0:
            self._poll(wake, left, reading=False)

    def _poll(self, wake: int, timeout_s: float | None, reading: bool) -> None:
        poller = select.poll()
        poller.register(wake, select.POLLIN)
        if reading:
            poller.register(self.fd_in, select.POLLIN)
        if self.output and not self.closed:
            poller.register(self.fd_out, select.POLLOUT)
        for fd, _ in poller.poll(None if timeout_s is None else timeout_s * 1000):
            if fd == wake:
                self.loaded = self.loaded or LOADED in os.read(wake, 64)   # else a signal's number: see caught
            elif fd == self.fd_in:
                try:
                    self.feed(os.read(self.fd_in, READ_CHUNK))
                except OSError:
                    self.feed(b"")        # stdin is gone: as at EOF
            elif fd == self.fd_out:
                self._write()

    def _write(self) -> None:
        try:
            del self.output[:os.write(self.fd_out, self.output)]
        except BlockingIOError:
            pass
        except OSError:
            log("mcpwrap: stdout was closed by the client; shutting down", "info")
            self.closed = True
            self.output.clear()
