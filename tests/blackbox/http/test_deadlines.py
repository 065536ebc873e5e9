"""`serve --http` against clients that stop moving, leave half-way, or are refused a batch.

Raw sockets stand in for the clients, so every byte on the wire is the test's: a body that
stalls after its headers, one that trickles too slowly, one whose connection closes before
its end, a client that never reads a large answer. The body-reading rule itself (progress per
interval) is checked in-process on trio's virtual clock, so it does not depend on speed.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mcpwrap.serve import http_gate as http_module
from tests.harness import HANG_S, modern_meta, until
from tests.httpharness import HttpServer, modern_headers

TOOLS = """\
[server]
name = "deadlines"
version = "1.0.0"

[tools.touch]
description = "Appends a line to a file"
command = ["sh", "-c", "echo run >> \\"$1\\"", "sh", "{path}"]
args.path = { type = "string" }

[tools.big]
description = "Prints eight million x"
shell = "head -c 8000000 /dev/zero | tr '\\\\0' x"
max_output = "16MiB"
"""


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    return path


def modern_call(name: str, arguments: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    params = {"name": name, "arguments": arguments, "_meta": modern_meta()}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    return body, modern_headers("tools/call", params)


def head(server: HttpServer, headers: dict[str, str], length: int | None = None) -> bytes:
    """A POST's request line and headers; chunked when no length is given."""
    lines = [f"POST {server.path} HTTP/1.1", f"Host: {server.host}:{server.port}", "Content-Type: application/json",
             "Accept: application/json, text/event-stream",
             f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def connect(server: HttpServer, receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(HANG_S)
    sock.connect((server.host, server.port))
    return sock


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


# --- class 4: a body must keep arriving (the rule, on a virtual clock) ---------------------
def read_paced(chunks: list[tuple[float, bytes]], timeout: float, limit: int = 1 << 20) -> tuple[Any, float]:
    """`_read_body` over a client that waits before each chunk and then stalls; its result and when it came."""
    async def main() -> tuple[Any, float]:
        pending = iter(chunks)

        async def receive() -> dict[str, Any]:
            step = next(pending, None)
            if step is None:
                await trio.sleep_forever()
                raise AssertionError("unreachable")
            await trio.sleep(step[0])
            return {"type": "http.request", "body": step[1], "more_body": step[1] != b""}

        start = trio.current_time()
        result = await http_module.read_body(receive, limit, timeout)
        return result, trio.current_time() - start

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_slow_body_that_keeps_moving_is_read_whole() -> None:
    """A bad link: a steady trickle at the minimum progress, far longer in all than the timeout."""
    step = http_module.BODY_PROGRESS
    chunks = [(29.0, b"x" * step) for _ in range(20)] + [(29.0, b"")]
    body, took = read_paced(chunks, 30.0)
    assert body == b"x" * step * 20 and took > 20 * 29


@pytest.mark.parametrize("chunks", [
    [(0.0, b"{")],                                        # one byte, then nothing
    [(1.0, b"x")] * 1000,                                 # a byte a second: moving, but below the minimum
    [(0.0, b"x" * (http_module.BODY_PROGRESS + 1)), (0.0, b"x")],   # progress once, then a stall
], ids=["stalled", "crawling", "stalled-later"])
def test_a_body_that_stops_moving_is_refused_with_408(chunks: list[tuple[float, bytes]]) -> None:
    refusal, took = read_paced(chunks, 30.0)
    assert isinstance(refusal, http_module.binding.Refusal) and refusal.status == 408
    assert took <= 60.0


def test_a_body_cut_short_by_a_disconnect_is_no_request() -> None:
    async def main() -> Any:
        events = iter([{"type": "http.request", "body": b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                        "more_body": True}, {"type": "http.disconnect"}])

        async def receive() -> dict[str, Any]:
            return next(events)

        return await http_module.read_body(receive, 1 << 20, 30.0)

    assert trio.run(main) is None


# --- class 4: over the wire -----------------------------------------------------------------
def test_a_stalled_body_gets_408_and_its_connection_is_closed(tools: Path, tmp_path: Path) -> None:
    body, headers = modern_call("touch", {"path": str(tmp_path / "ran")})
    with HttpServer(tools, tmp_path, "--body-timeout", "1") as server:
        sock = connect(server)
        sock.sendall(head(server, headers, len(body)) + body[:1])
        answer = read_all(sock)                 # the server ends the connection: EOF, not our timeout
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert not (tmp_path / "ran").exists()


def test_a_fresh_client_is_served_while_stalled_bodies_fill_every_request_slot(
        tools: Path, tmp_path: Path, sockets: list[socket.socket]) -> None:
    """More stalled bodies than there are request slots: a body in transit holds none."""
    body, headers = modern_call("touch", {"path": str(tmp_path / "ran")})
    with HttpServer(tools, tmp_path) as server:
        for _ in range(http_module.MAX_EXCHANGES + 8):
            sock = connect(server)
            sock.sendall(head(server, headers, len(body)) + body[:1])
            sockets.append(sock)
        answer = server.modern("tools/call", {"name": "touch", "arguments": {"path": str(tmp_path / "fresh")}})
        assert answer.status == 200 and (tmp_path / "fresh").exists()
        assert not (tmp_path / "ran").exists()


def server_holds(server: HttpServer, client: socket.socket) -> bool:
    """Whether the server's end of this client's connection is still open (from /proc/net/tcp)."""
    ends = (f"{server.port:04X}", f"{client.getsockname()[1]:04X}")
    rows = (line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:])
    return any((row[1].split(":")[1], row[2].split(":")[1]) == ends for row in rows)


def test_a_client_that_never_reads_a_large_answer_is_cut_off(tools: Path, tmp_path: Path) -> None:
    """Its receive window stays shut past --send-timeout: the server drops the connection (and with
    it the request slot it held); the client never gets the whole answer."""
    body, headers = modern_call("big", {})
    with HttpServer(tools, tmp_path, "--send-timeout", "1") as server:
        sock = connect(server, receive_buffer=4096)
        sock.sendall(head(server, headers, len(body)) + body)
        until(lambda: not server_holds(server, sock), "the server to give up on a client that does not read")
        received = b""
        with pytest.raises(ConnectionResetError):   # reading opens the window: the server's host resets
            while chunk := sock.recv(1 << 20):
                received += chunk
        sock.close()
        assert len(received) < 8_000_000
        answer = server.modern("tools/call", {"name": "touch", "arguments": {"path": str(tmp_path / "next")}})
        assert answer.status == 200


# --- class 6: a client that leaves before the end of its request made no request -------------
@pytest.mark.parametrize("cut", ["short-length", "no-final-chunk", "half-close"])
def test_a_request_cut_short_runs_nothing(tools: Path, tmp_path: Path, cut: str) -> None:
    """The body is a whole JSON-RPC call, but the HTTP message around it never ends."""
    marker = tmp_path / "ran"
    body, headers = modern_call("touch", {"path": str(marker)})
    with HttpServer(tools, tmp_path, "--log-level", "debug") as server:
        sock = connect(server)
        if cut == "no-final-chunk":
            sock.sendall(head(server, headers) + f"{len(body):x}\r\n".encode() + body + b"\r\n")
        else:
            sock.sendall(head(server, headers, len(body) + 10) + body)
        if cut == "half-close":
            sock.shutdown(socket.SHUT_WR)
        else:
            sock.close()
        until(lambda: marker.exists() or any("left before the end of its request" in line for line in server.stderr),
              lambda: "the server to see the client leave; stderr:\n" + "".join(server.stderr))
        assert not marker.exists(), "a request whose body never ended ran"
        sock.close()


# --- class 9: a refused batch is answered, and its response ends ----------------------------
def test_a_refused_batch_is_answered_and_its_response_ends(tools: Path, tmp_path: Path) -> None:
    """2025-06-18 and 2025-11-25 transports, "Sending Messages to the Server": after the JSON-RPC
    response has been sent, the server SHOULD close (2025-11-25: terminate) the SSE stream. A batch,
    refused as a whole in these revisions, gets its one error, and the POST ends (it no longer
    holds its session busy, which kept the session from ever idling out)."""
    with HttpServer(tools, tmp_path) as server:
        server.initialize("2025-11-25")
        answer = server.send([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                              {"jsonrpc": "2.0", "id": 2, "method": "ping"}])
        assert answer.status == 200 and answer.headers["content-type"] == "application/json"
        (error,) = answer.messages
        assert error["error"]["code"] == -32600 and "batch" in error["error"]["message"]
        assert server.legacy("ping", id=3).final["result"] == {}


def test_bodies_in_transit_are_bounded_together_and_give_their_bytes_back() -> None:
    """A body takes no request slot until whole, so many slow but moving bodies could add up: the
    bytes they hold together are bounded (503 past it), and each gives its bytes back however it ends."""
    async def main() -> list[Any]:
        transit = http_module.InTransit(limit=100)

        def client(chunks: list[bytes], then_leave: bool = False) -> Any:
            events = iter([{"type": "http.request", "body": c, "more_body": True} for c in chunks]
                          + [{"type": "http.disconnect"} if then_leave else
                             {"type": "http.request", "body": b"", "more_body": False}])

            async def receive() -> dict[str, Any]:
                return next(events)
            return receive

        outcomes = [await http_module.read_body(client([b"x" * 60], then_leave=True), 1000, 30.0, transit)]
        first = http_module.read_body(client([b"x" * 60]), 1000, 30.0, transit)
        outcomes.append(await first)
        transit.held = 60                  # another body is still arriving with 60 bytes
        outcomes.append(await http_module.read_body(client([b"y" * 50]), 1000, 30.0, transit))
        outcomes.append(transit.held)
        return outcomes

    left, whole, refused, held = trio.run(main)
    assert left is None and whole == b"x" * 60
    assert isinstance(refused, http_module.binding.Refusal) and refused.status == 503
    assert held == 60                      # the refused and finished bodies gave back what they held
