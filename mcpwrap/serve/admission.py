"""The server's one waiting room for calls: `--max-calls` slots and a bounded queue behind them.

Every driver, session and POST of a process shares one `Admission`; a call (or a resource read,
prompt or completion) takes a `Seat`, waits for a slot holding its request's bytes, and leaves
however it ends.
"""

from __future__ import annotations

import trio

QUEUED_PER_SLOT = 64              # calls that may wait for a slot, per slot of --max-calls (4,096 at the default)
WAITING_BYTES = 32 * 1024 * 1024  # request bytes the waiting calls may hold; a waiting call costs ~5 KiB besides


class Held:
    """`async with Held(limiter)`: a free token is taken without the scheduler pass trio's
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

    def enter(self, request_bytes: int) -> Seat | None:
        """A place for one more, holding `request_bytes` while it waits; None past the waiting room."""
        waits = self.admitted >= self.max_calls
        size = request_bytes if waits else 0
        if waits and (self.admitted >= self.max_calls * (1 + QUEUED_PER_SLOT)
                      or self.waiting_bytes + size > WAITING_BYTES):
            return None
        self.admitted += 1                # counted now: the next request may arrive before this one runs
        self.waiting_bytes += size
        return Seat(self, size)

    def refusal(self) -> str:
        return (f"mcpwrap is at its limit: {self.max_calls} calls are running and {self.admitted - self.max_calls} "
                f"are waiting with {self.waiting_bytes} bytes of requests (--max-calls); nothing ran, try again later")


class Seat:
    """`async with seat`: wait for a slot (the request's bytes stop counting once it has one), hold
    it, and leave the waiting room at the end however it ends."""

    def __init__(self, admission: Admission, size: int) -> None:
        self.admission, self.size = admission, size
        self.held = Held(admission.slots)

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
