"""serve.admission: `max_calls` slots, a waiting room bounded by count and by request bytes, and a seat
that gives its place and bytes back however its call ends (black-box: tests/blackbox/stdio/test_admission.py)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from mcpwrap.serve.admission import QUEUED_PER_SLOT, WAITING_BYTES, Admission, Seat


def test_only_waiting_calls_hold_their_bytes_and_the_room_is_bounded_by_count() -> None:
    room = Admission(1)
    running = room.enter(10**9)                       # takes a slot at once: its bytes do not wait
    assert running is not None and room.waiting_bytes == 0
    waiting = [room.enter(1) for _ in range(QUEUED_PER_SLOT)]
    assert all(waiting) and room.waiting_bytes == QUEUED_PER_SLOT
    assert room.enter(1) is None and "1 calls are running and 64 are waiting" in room.refusal()
    for seat in (running, *waiting):
        assert seat is not None
        seat.leave()
    assert room.admitted == 0 and room.waiting_bytes == 0


def test_the_waiting_room_is_bounded_by_the_bytes_its_requests_hold() -> None:
    room = Admission(1)
    assert room.enter(0) is not None
    assert room.enter(WAITING_BYTES) is not None
    assert room.enter(1) is None                      # one byte past the bound
    assert room.admitted == 2 and room.waiting_bytes == WAITING_BYTES


def test_a_seat_cancelled_while_waiting_leaves_and_a_seated_one_stops_counting_its_bytes() -> None:
    room = Admission(1)

    async def wait_for(seat: Seat, seated: list[int]) -> None:
        async with seat:
            seated.append(room.waiting_bytes)       # seated: its request no longer waits

    async def main() -> None:
        first, second, third = room.enter(0), room.enter(100), room.enter(50)
        assert first is not None and second is not None and third is not None
        seated: list[int] = []
        async with trio.open_nursery() as nursery:
            async with first:
                cancelled = trio.CancelScope()
                nursery.start_soon(lambda: run_in(cancelled, wait_for(second, seated)))
                nursery.start_soon(wait_for, third, seated)
                await trio.testing.wait_all_tasks_blocked()
                assert room.admitted == 3 and room.waiting_bytes == 150
                cancelled.cancel()                    # the second gives up while it waits
                await trio.testing.wait_all_tasks_blocked()
                assert room.admitted == 2 and room.waiting_bytes == 50
        assert seated == [0] and room.admitted == 0 and room.waiting_bytes == 0

    async def run_in(scope: trio.CancelScope, waiting: Any) -> None:
        with scope:
            await waiting

    trio.run(main)
