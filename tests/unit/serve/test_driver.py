"""Attacks on the driver: nesting bombs, a client that stops reading, stderr nobody reads,
a FIFO in place of the tools file, more calls than slots, a stdout closed under us.

Each test is written against a promise of the README ("the server never dies on bad input",
"memory is bounded whatever the client does", "nothing on disk can stall the loop"); none
depends on how fast anything runs: waits are for events, timeouts only guard against hangs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
import trio.testing

from mcpwrap.config import load as config
from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol.core import Core
from mcpwrap.serve import admission, common
from mcpwrap.serve import driver as driver_module
from mcpwrap.serve.outbox import Outbox
from tests.harness import HANG_S


# --- class 1: nesting bombs, in and out ---------------------------------------------------
def test_depth_guard_is_iterative_and_exact() -> None:
    nested: Any = 1
    for _ in range(5000):                     # far past the recursion limit: must not blow the stack
        nested = [nested]
    assert jsonrpc.too_deep(nested, 100)
    assert not jsonrpc.too_deep([[1]], 2) and jsonrpc.too_deep([[[1]]], 2)
    assert jsonrpc.too_deep({"a": {"b": {}}}, 2) and not jsonrpc.too_deep({"a": {"b": 1}}, 2)


def test_decode_refuses_from_one_level_past_the_limit_whatever_the_line() -> None:
    """A line with fewer brackets than MAX_DEPTH is not walked; at the limit every bracket counts."""
    def line(lists: int, batch: bool = False, padding: str = "") -> bytes:
        message = ('{"jsonrpc":"2.0","id":1,"method":"m","params":{"p":' + "[" * lists + "]" * lists
                   + f',"s":"{padding}"}}}}')   # depth 2 + lists, and exactly as many brackets
        return (f"[{message}]" if batch else message).encode()

    limit = jsonrpc.MAX_DEPTH
    for lists in range(limit - 6, limit + 2):
        refused = isinstance(jsonrpc.decode(line(lists)), jsonrpc.Invalid)
        assert refused == (2 + lists > limit), lists
        item = jsonrpc.decode(line(lists, batch=True))
        assert isinstance(item, jsonrpc.Batch)
        assert isinstance(item.items[0], jsonrpc.Invalid) == (2 + lists > limit - 1), lists
        assert not isinstance(jsonrpc.decode(line(lists - 90, padding="[{" * 60)), jsonrpc.Invalid)


# --- class 6: a client that stops reading stdout ------------------------------------------
def test_outbox_backpressure_and_droppable_notifications() -> None:
    async def scenario() -> None:
        outbox = Outbox(limit=100)
        response = jsonrpc.encode(jsonrpc.response(1, {"text": "x" * 200}))
        progress = jsonrpc.encode(jsonrpc.notification("notifications/progress", {"progressToken": 1, "progress": 1}))
        outbox.put(response)
        assert outbox.full
        outbox.put(progress, droppable=True)      # dropped while full: it is only news
        assert outbox.dropped == 1 and len(outbox.items) == 1
        outbox.put(response)                      # answers are never dropped
        assert len(outbox.items) == 2
        with trio.move_on_after(HANG_S) as guard:
            with trio.move_on_after(0.05) as waiting:
                await outbox.room()               # full: the reader must wait
            assert waiting.cancelled_caught
        assert not guard.cancelled_caught

        written: list[bytes] = []

        class Sink:
            async def write(self, data: bytes) -> None:
                written.append(data)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(outbox.write_to, Sink())
            with trio.fail_after(HANG_S):
                await outbox.room()
                await outbox.drained()
            outbox.close()
        assert written == [response, response] and outbox.size == 0

    trio.run(scenario)


def test_outbox_writes_at_once_while_the_writer_is_idle_and_keeps_the_order() -> None:
    """What is put goes out through `write_now` at once, unless held or the writer task is in a
    write; whatever the sink does not take (a full pipe, a broken one) waits for the writer task,
    and everything reaches the client in order."""
    async def scenario() -> None:
        taken: list[bytes] = []
        room = [5]                            # bytes the pipe takes at once
        broken = [False]

        def write_now(data: bytes) -> int:
            if broken[0]:
                raise BrokenPipeError
            n = min(room[0], len(data))
            room[0] -= n
            taken.append(data[:n])
            return n

        outbox = Outbox(limit=100, write_now=write_now)
        outbox.put(b"abc")                    # written inside put: no task has run
        assert taken == [b"abc"] and not outbox.items and outbox.size == 0
        outbox.put(b"defgh")                  # only "de" fits: "fgh" waits
        outbox.put(b"ijk")
        assert list(outbox.items) == [b"fgh", b"ijk"] and outbox.size == 6
        room[0] = 100
        outbox.hold()
        outbox.put(b"lmn")                    # held: nothing leaves, not even what waited
        outbox.hold()
        outbox.release()                      # an inner release does not end the hold
        assert list(outbox.items) == [b"fgh", b"ijk", b"lmn"]
        outbox.release()
        assert b"".join(taken) == b"abcdefghijklmn" and not outbox.items and outbox.size == 0

        written: list[bytes] = []
        go = trio.Event()

        class Sink:
            async def write(self, data: bytes) -> None:
                await go.wait()
                written.append(data)

        room[0] = 0
        async with trio.open_nursery() as nursery:
            outbox.put(b"opq")                # the pipe is full: the writer task's
            nursery.start_soon(outbox.write_to, Sink())
            await trio.testing.wait_all_tasks_blocked()
            assert outbox.writing
            room[0] = 100
            outbox.put(b"rst")                # may not overtake the write in progress
            broken[0] = True
            go.set()
            with trio.fail_after(HANG_S):
                await outbox.drained()
            outbox.put(b"uvw")                # refused at once: the writer task meets the error itself
            assert list(outbox.items) == [b"uvw"]
            with trio.fail_after(HANG_S):
                await outbox.drained()
            outbox.close()
        assert b"".join(taken) == b"abcdefghijklmn" and written == [b"opq", b"rst", b"uvw"]

    trio.run(scenario)


def test_an_answer_leaves_only_after_every_action_of_its_decision(tmp_path: Path) -> None:
    """Subscribing to a file: its signature is taken before the answer is written (a client may
    edit the file as soon as it reads the answer, and that edit must be announced)."""
    (tmp_path / "notes.md").write_text("# notes\n")
    tools = config.loads(b'[resources.notes]\npath = "notes.md"\n', tmp_path / "tools.toml")
    core = Core(tools, lambda: None, lambda: 0.0)
    seen: list[dict[str, Any]] = []

    def write_now(data: bytes) -> int:
        seen.append(dict(driver.files))
        return len(data)

    async def scenario() -> None:
        nonlocal driver
        async with trio.open_nursery() as nursery:
            driver = driver_module.Driver(core, common.Options(tmp_path / "secret", tmp_path / "state"), nursery,
                                          Outbox(write_now=write_now))
            for line in [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                             "protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}},
                         {"jsonrpc": "2.0", "method": "notifications/initialized"},
                         {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
                          "params": {"uri": (tmp_path / "notes.md").as_uri()}}]:
                driver.perform(core.receive(jsonrpc.decode(json.dumps(line).encode())))
            nursery.cancel_scope.cancel()

    driver: Any = None
    trio.run(scenario)
    assert len(seen) == 2 and seen[-1] == {(tmp_path / "notes.md").as_uri(): common.file_signature(tmp_path / "notes.md")}


def test_a_free_slot_is_taken_without_a_scheduler_pass_and_a_full_one_waits_in_line() -> None:
    async def scenario() -> None:
        limiter = trio.CapacityLimiter(1)
        order: list[str] = []

        async def other() -> None:
            order.append("other task")

        async def second() -> None:
            async with admission.Held(limiter):
                order.append("second")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other)
            async with admission.Held(limiter):
                order.append("held")          # before the task started just above could run
                assert limiter.borrowed_tokens == 1
                nursery.start_soon(second)
                await trio.testing.wait_all_tasks_blocked()
                assert order == ["held", "other task"]     # the second waits for the token
        assert order == ["held", "other task", "second"] and limiter.borrowed_tokens == 0
        with trio.CancelScope() as scope:     # a call cancelled before it starts takes no token
            scope.cancel()
            async with admission.Held(limiter):
                order.append("never")
        assert scope.cancelled_caught and limiter.borrowed_tokens == 0 and "never" not in order

    trio.run(scenario)


def test_an_answer_that_cannot_be_encoded_becomes_an_error_for_its_id() -> None:
    """The last line of defence behind the depth checks: orjson cannot write 255 levels."""
    nested: Any = {}
    for _ in range(300):
        nested = [nested]
    answer = common.encodable({"jsonrpc": "2.0", "id": 7, "result": {"structuredContent": nested}})
    assert answer["id"] == 7 and answer["error"]["code"] == jsonrpc.INTERNAL_ERROR
    jsonrpc.encode(answer)                     # and that one can be written
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": nested}}
    assert common.encodable(note) is note      # a notification has no id to answer: it is not sent
