"""A bounded, ordered byte backlog in front of one sink (stdout, or one HTTP response).

Backpressure instead of growth: past `limit` bytes the reader waits (`room`) and droppable
messages are dropped; one writer task writes in order, and a sink that takes bytes without waiting
is written at once while the writer is idle.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import trio

from mcpwrap.serve.common import OUTBOX_BYTES, log

if TYPE_CHECKING:
    from mcpwrap.protocol.actions import Send
    from mcpwrap.protocol.jsonrpc import RequestId


class Sink(Protocol):
    """Where an Outbox writes: stdout (serve/stdio.py), an HTTP response (serve/http.py)."""
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

    It is also stdio's `driver.Post`: every message goes to the one sink, and none is abandoned
    (a cancelled request simply gets no answer).
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

    def send(self, action: Send, data: bytes, droppable: bool) -> None:
        """`driver.Post`'s: the message's line, to the one sink."""
        self.put(data, droppable)

    def abandon(self, request_id: RequestId) -> None:
        """`driver.Post`'s: nothing waits for an answer here but the client."""

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
