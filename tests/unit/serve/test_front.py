"""The front in memory: a `Front` reads a pipe and is told its import is done (the LOADED byte)
after a first part of the input; the rest goes to a stand-in driver that takes over as
`stdio.serve` does, and everything written must equal one `Core` answering the whole input line
by line. The hand-over through a real `mcpwrap serve` is tests/blackbox/stdio/test_hand_over.py.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpwrap.serve import common, launch
from mcpwrap.protocol import jsonrpc
from mcpwrap.config.load import loads
from mcpwrap.serve.common import Options
from mcpwrap.serve.front import LOADED, Front
from mcpwrap.protocol.actions import Send, StartCall, Stderr
from mcpwrap.protocol.core import Core
from mcpwrap.result import Text, ToolResult
from tests.harness import HANG_S, Server

FIXTURE = Path(__file__).parents[2] / "fixtures" / "basic.toml"
CONFIG = loads(FIXTURE.read_bytes(), FIXTURE)
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tests", "version": "1"}}
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
               "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"}}


def line(id: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        message["id"] = id
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


def call(id: int) -> bytes:
    return line(id, "tools/call", {"name": "echo", "arguments": {"msg": f"call {id}"}})


def new_core(tmp: Path) -> Core:
    return common.new_core(CONFIG, Options(tmp / "secret", tmp / "state"))


# --- in memory -------------------------------------------------------------------------------
def result_for(ctx: Any) -> ToolResult:
    return ToolResult((Text(f"ran {ctx.id}"),))


class StandIn:
    """The driver's side of the hand-over, as `stdio.serve` takes it, with calls that finish at once."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.out = bytearray()

    def perform(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self.out += common.encoded(action.message) or b""
            elif isinstance(action, StartCall):
                self.perform(self.core.call_done(action.ctx, result_for(action.ctx)))
            else:
                assert isinstance(action, Stderr), action

    def deliver(self, lines: Any) -> None:
        for item in lines:
            self.perform(self.core.receive(jsonrpc.decode_line(item)))

    def take_over(self, front: Front, rest: bytes) -> bytes:
        self.out += front.output
        self.perform(front.pending)
        self.deliver(front.lines)
        self.deliver(front.reader.feed(rest))
        self.deliver(front.reader.finish())
        return bytes(self.out)


def reference(tmp: Path, stream: bytes) -> bytes:
    """One Core answering the whole stream line by line."""
    stand_in = StandIn(new_core(tmp))
    reader = jsonrpc.LineReader()
    stand_in.deliver(reader.feed(stream))
    stand_in.deliver(reader.finish())
    return bytes(stand_in.out)


@pytest.fixture
def pipes() -> Iterator[dict[str, int]]:
    fds: dict[str, int] = {}
    fds["in_r"], fds["in_w"] = os.pipe()
    fds["out_r"], fds["out_w"] = os.pipe()
    fds["wake_r"], fds["wake_w"] = os.pipe()
    yield fds
    for fd in fds.values():
        try:
            os.close(fd)
        except OSError:
            pass


def drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


SESSION = [line(1, "initialize", INIT), line(None, "notifications/initialized"), line(2, "tools/list"),
           line(3, "ping"), call(4), line(5, "tools/list"), line(6, "ping"),
           line(7, "server/discover", {"_meta": MODERN_META}), b"{not json\n", b"\n", call(8), line(9, "ping")]


@given(st.integers(0, len(b"".join(SESSION))))
def test_hand_over_at_any_byte_equals_one_core_answering_everything(tmp_path_factory: Any, cut: int) -> None:
    tmp = tmp_path_factory.mktemp("front")
    stream = b"".join(SESSION)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    wake_r, wake_w = os.pipe()
    try:
        os.write(in_w, stream[:cut])
        os.write(wake_w, LOADED)              # the import is done once the first part is there
        with Front(new_core(tmp), in_r, out_w) as front:
            assert front.serve(wake_r)
        os.write(out_w, front.output)         # what the front answered and had not written yet (it fits)
        front.output.clear()
        written = drain(out_r)
        assert not front.eof
        assert written + StandIn(front.core).take_over(front, stream[cut:]) == reference(tmp, stream)
    finally:
        for fd in (in_r, in_w, out_r, out_w, wake_r, wake_w):
            os.close(fd)


def test_the_front_answers_what_needs_no_driver_and_stops_at_a_call(tmp_path: Path, pipes: dict[str, int]) -> None:
    half = line(7, "ping")[:10]
    os.write(pipes["in_w"], b"".join(SESSION[:7]) + half)
    os.write(pipes["wake_w"], LOADED)
    front = Front(new_core(tmp_path), pipes["in_r"], pipes["out_w"])
    assert front.serve(pipes["wake_r"])
    answered = [json.loads(x) for x in bytes(front.output).splitlines()]
    assert [m["id"] for m in answered] == [1, 2, 3]
    assert [type(a) for a in front.pending] == [StartCall] and front.pending[0].ctx.id == 4
    assert front.request_bytes == len(call(4)) - 1
    assert list(front.lines) == [line(5, "tools/list")[:-1], line(6, "ping")[:-1]]
    assert bytes(front.reader.buffer) == half


def test_eof_during_the_front_answers_flushes_and_ends_without_a_hand_over(tmp_path: Path,
                                                                             pipes: dict[str, int]) -> None:
    os.write(pipes["in_w"], line(1, "initialize", INIT) + line(2, "ping"))
    os.close(pipes["in_w"])
    front = Front(new_core(tmp_path), pipes["in_r"], pipes["out_w"])
    assert not front.serve(pipes["wake_r"])
    front.finish(pipes["wake_r"])
    assert [json.loads(x)["id"] for x in drain(pipes["out_r"]).splitlines()] == [1, 2]


BIG = loads("\n".join(f'[tools.t{i}]\ndescription = "{"x" * 400}"\ncommand = ["true"]\n' for i in range(500)).encode(),
             Path("big.toml"))
LISTS = line(1, "initialize", INIT) + b"".join(line(i, "tools/list") for i in range(2, 12))   # ~2.5 MB of answers


def big_front(tmp: Path, pipes: dict[str, int]) -> Front:
    os.write(pipes["in_w"], LISTS)
    os.close(pipes["in_w"])
    return Front(common.new_core(BIG, Options(tmp / "secret", tmp / "state")), pipes["in_r"], pipes["out_w"])


def test_a_client_that_never_reads_stdout_does_not_block_the_front(tmp_path: Path, pipes: dict[str, int]) -> None:
    """EOF is seen although stdout is full, and the flush gives up after FLUSH_S; a blocking write would
    hang here until the hang guard closes the pipe's other end."""
    out_r = pipes.pop("out_r")
    guard = threading.Timer(HANG_S, os.close, [out_r])
    guard.start()
    with big_front(tmp_path, pipes) as front:
        assert not front.serve(pipes["wake_r"])
        front.finish(pipes["wake_r"])
    guard.cancel()
    guard.join()
    if not front.closed:              # else the guard closed it: the write that hung failed with EPIPE
        os.close(out_r)
    assert not front.closed and front.output


def test_at_eof_the_front_flushes_everything_a_slow_reader_takes(tmp_path: Path, pipes: dict[str, int]) -> None:
    got = bytearray()
    reader = threading.Thread(target=read_all, args=(pipes["out_r"], got))
    reader.start()
    with big_front(tmp_path, pipes) as front:
        assert not front.serve(pipes["wake_r"])
        front.finish(pipes["wake_r"])
    os.close(pipes.pop("out_w"))
    reader.join(HANG_S)
    assert [json.loads(x)["id"] for x in bytes(got).splitlines()] == list(range(1, 12))


def read_all(fd: int, into: bytearray) -> None:
    while chunk := os.read(fd, 65536):
        into += chunk


def test_a_stop_signal_during_the_front_starts_nothing(tmp_path: Path, pipes: dict[str, int]) -> None:
    os.write(pipes["in_w"], line(1, "initialize", INIT) + call(2) + line(3, "ping"))
    front = Front(new_core(tmp_path), pipes["in_r"], pipes["out_w"])
    front.caught(signal.SIGTERM, None)
    os.write(pipes["wake_w"], bytes([signal.SIGTERM]))   # what the wakeup fd gets
    assert not front.serve(pipes["wake_r"])
    front.finish(pipes["wake_r"])
    assert front.pending == []


# --- end to end --------------------------------------------------------------------------------
def sent(server: Server, *items: tuple[int | None, str, dict[str, Any] | None]) -> bytes:
    """The lines for `items`, registered with the validating client as if sent one by one."""
    data = b""
    for id, method, params in items:
        if id is not None:
            server.pending[id] = (method, "2026-07-28" if params and "_meta" in params else server.rev or "2025-11-25")
        data += line(id, method, params)
    return data


def test_what_is_waiting_on_stdin_is_answered_before_the_import_starts(tmp_path: Path, pipes: dict[str, int],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The import thread would share the GIL with the front: it starts once the requests a client
    wrote as it spawned the server are answered and written."""
    os.write(pipes["in_w"], line(1, "initialize", INIT) + line(2, "ping") + call(3))
    written_first: list[bytes] = []

    def importer(config: Any, loaded: int, failure: list[BaseException], *gate: Any) -> None:
        written_first.append(drain(pipes["out_r"]))
        os.write(loaded, LOADED)

    monkeypatch.setattr(launch, "import_driver", importer)
    handlers = {signum: signal.getsignal(signum) for signum in common.STOP_SIGNALS}
    try:
        front = Front(new_core(tmp_path), pipes["in_r"], pipes["out_w"])
        assert launch.serve_front(front, CONFIG, lambda: None)   # handed over
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert [json.loads(x)["id"] for x in written_first[0].splitlines()] == [1, 2]
    assert [type(a) for a in front.pending] == [StartCall]


def test_a_session_that_ends_in_the_front_neither_waits_for_the_import_nor_sets_up_containment_after(
        tmp_path: Path, pipes: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """EOF right after `initialize`: the front returns while the import thread is still held, and
    that thread, once free, sets nothing up (a server cgroup made then would outlive the exit)."""
    import mcpwrap.serve
    from mcpwrap.run import process as runner

    release = threading.Event()
    set_up: list[str] = []

    class Held(importlib.abc.MetaPathFinder):
        """Holds the import thread in its import of the driver until `release`."""
        def find_spec(self, name: str, *rest: Any) -> None:
            if name == "mcpwrap.serve.stdio":
                release.wait(HANG_S)

    monkeypatch.delitem(sys.modules, "mcpwrap.serve.stdio", raising=False)   # restored, with the attribute, after
    monkeypatch.delattr(mcpwrap.serve, "stdio", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Held(), *sys.meta_path])
    monkeypatch.setattr(runner, "containment", lambda: set_up.append("containment") or "none")
    os.write(pipes["in_w"], line(1, "initialize", INIT))
    os.close(pipes["in_w"])
    handlers = {signum: signal.getsignal(signum) for signum in common.STOP_SIGNALS}
    try:
        front = Front(new_core(tmp_path), pipes["in_r"], pipes["out_w"])
        before = set(threading.enumerate())
        assert not launch.serve_front(front, CONFIG, lambda: None)
        [importer] = [t for t in set(threading.enumerate()) - before if t.name == "mcpwrap-import"]
        assert importer.is_alive()                     # returned without waiting for it
    finally:
        release.set()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    importer.join(HANG_S)
    assert not importer.is_alive() and set_up == []
    assert [json.loads(x)["id"] for x in drain(pipes["out_r"]).splitlines()] == [1]
