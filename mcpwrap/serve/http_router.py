"""A driver's `Post` over Streamable HTTP: which response each message goes to, and how a
response is written.

A `Router` holds the responses (`Stream`s) still open for one core: an answer goes to the response
that waits for the request it answers (`Send.answers`, a lookup), progress to the response its
token names, anything else to the POST being decided (`current`), else the default stream (a
legacy session's GET stream, a modern POST's one response). A `Reply` writes a response's
messages: one `application/json` body, its status chosen when the router took the answer, when the
first message is also the last; else an SSE stream, kept alive by comments.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol import http_binding as binding
from mcpwrap.protocol.actions import Send
from mcpwrap.protocol.jsonrpc import Request, RequestId
from mcpwrap.serve.http_gate import AsgiSend, Receive, respond
from mcpwrap.serve.outbox import Outbox

KEEPALIVE_S = 15.0                # an SSE comment this often keeps proxies from closing a quiet stream
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]

current: contextvars.ContextVar[Stream | None] = contextvars.ContextVar("mcpwrap_http_stream", default=None)


@dataclass(eq=False)
class Stream:
    """One HTTP response: the messages that belong to it, bounded like stdout, then its end."""
    expect: set[RequestId] = field(default_factory=set)
    outbox: Outbox = field(default_factory=Outbox)
    abandoned: bool = False               # a request of it was cancelled: no answer is owed for it
    modern: bool = False                  # a 2026-07-28 POST's: an error answer chooses the HTTP status
    status: int = 200                     # its answer's, should that be the response's one message

    @property
    def live(self) -> bool:
        return not self.outbox.closed


class Router:
    """A driver's `Post` over HTTP: each message goes to the response it belongs to, or nowhere.

    An answer goes to the response that waits for the request it answers (`Send.answers`); anything
    else to the response its progress token names, else the POST being decided, else `default`.
    """

    def __init__(self) -> None:
        self.waiting: dict[RequestId, Stream] = {}
        self.tokens: dict[str | int, Stream] = {}
        self.default: Stream | None = None    # the legacy GET stream, or a modern POST's one response

    def open(self, requests: list[Request], modern: bool = False) -> Stream:
        stream = Stream({r.id for r in requests}, modern=modern)
        for request in requests:
            self.waiting[request.id] = stream
            meta = request.params.get("_meta")
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            if isinstance(token, (str, int)) and not isinstance(token, bool):
                self.tokens[token] = stream
        return stream

    def send(self, action: Send, data: bytes, droppable: bool) -> None:
        """`data` to its response; an answer ends the response once it has answered all its requests."""
        stream = self._target(action)
        for request_id in action.answers:
            self.waiting.pop(request_id, None)
        if stream is None:
            return
        stream.outbox.put(data, droppable)
        if action.answers:
            stream.status = binding.status_of(action.message, stream.modern)
            stream.expect.difference_update(action.answers)
            if not stream.expect:
                self.finish(stream)

    def _target(self, action: Send) -> Stream | None:
        if action.answers:
            return next((self.waiting[i] for i in action.answers if i in self.waiting), None)
        message = action.message
        params = message.get("params") if isinstance(message, dict) else None
        token = params.get("progressToken") if isinstance(params, dict) else None
        candidates = [self.tokens.get(token) if isinstance(token, (str, int)) else None, current.get(), self.default]
        return next((s for s in candidates if s is not None and s.live and self._mine(s)), None)

    def _mine(self, stream: Stream) -> bool:
        return stream is self.default or stream in self.waiting.values() or stream in self.tokens.values()

    def abandon(self, request_id: RequestId) -> None:
        """A cancelled request will not be answered: its response stops waiting for it."""
        stream = self.waiting.pop(request_id, None)
        if stream is not None:
            stream.abandoned = True
            stream.expect.discard(request_id)
            if not stream.expect:
                self.finish(stream)

    def finish(self, stream: Stream) -> None:
        stream.outbox.close()
        self.tokens = {t: s for t, s in self.tokens.items() if s is not stream}

    def hold(self) -> None:
        """Nothing to hold: each response's writer task writes only once the decision is carried out."""

    def release(self) -> None: ...

    async def room(self) -> None:
        """Each response is bounded on its own; nobody waits for all of them."""

    def close(self) -> None:
        for stream in {*self.waiting.values(), *self.tokens.values(), *([self.default] if self.default else [])}:
            stream.outbox.close()


class Reply:
    """The output a response's `Outbox` writes to: one JSON body when the first message is the last, else SSE."""

    def __init__(self, send: AsgiSend, stream: Stream, headers: list[tuple[bytes, bytes]]) -> None:
        self.send, self.stream, self.headers = send, stream, headers
        self.started = self.sse = False

    async def write(self, data: bytes) -> None:
        if not self.started:
            self.started = True
            if self.stream.outbox.closed and not self.stream.outbox.items:
                await respond(self.send, self.stream.status, data, self.headers)
                return
            self.sse = True
            await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + self.headers})
        await self.send({"type": "http.response.body", "body": b"event: message\ndata: " + data.rstrip(b"\n")
                         + b"\n\n", "more_body": True})

    async def comment(self) -> None:
        if self.sse:
            await self.send({"type": "http.response.body", "body": b":\n\n", "more_body": True})

    async def end(self, abandoned: bool = False) -> None:
        if not self.started and abandoned:    # cancelled: an SSE stream without the answer, as the binding allows
            self.started = self.sse = True
            await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + self.headers})
        if self.sse:
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        elif not self.started:            # nothing came (shutting down): still an answer
            await respond(self.send, 503, jsonrpc.encode(binding.Refusal(503, "server shutting down").body()))


async def write(stream: Stream, reply: Reply, nursery: trio.Nursery) -> None:
    """Write the response's messages until it is answered (or its client left); keep a quiet SSE alive."""
    async def keepalive() -> None:
        while True:
            await trio.sleep(KEEPALIVE_S)
            await reply.comment()

    nursery.start_soon(keepalive)
    try:
        await stream.outbox.write_to(reply)
        await reply.end(stream.abandoned)
    except OSError:
        stream.outbox.close()             # the client went away while we wrote


async def disconnected(receive: Receive, then: Callable[[], None]) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    then()
