"""Streamable HTTP: the second driver over the same sans-IO core, on hypercorn's trio worker.

One endpoint (`/mcp`) answers both eras, decided per POST from the body as on
stdio. A 2026-07-28 request gets a `Core` of its own for the length of its
POST (request ids of different clients never meet), its mirrored headers
checked first (`protocol/http_binding.py`); closing its response is its
cancellation. `initialize` opens a legacy session: a `Core` and a `Driver`
that live, under the hub's nursery, until DELETE, idle expiry or shutdown;
its POSTs share them, and its `Router` sends each message to the response it
belongs to (answers by id, progress by token, the rest by the POST whose task
produced it, else the session's GET stream). A legacy disconnect is not a
cancellation (2025-11-25 says so); the answer is then dropped. A request
cancelled by `notifications/cancelled` is never answered, so its POST ends
there, as an SSE stream without its answer.

Every answer leaves through the one `Outbox` of its response: the first
message is sent as `application/json` when it is also the last, else the
response becomes an SSE stream. Tool calls share one `--max-calls` limiter
and its waiting room (`server.Admission`, fed by each POST body's size) across
all clients; HTTP requests, sessions and bodies are bounded; Origin,
Host, the bearer token and the client's `--rate` are checked before a body is
read. TLS is hypercorn's (`--certfile`, `--keyfile`); it never stands in for
authentication. Each request's bearer token is its identity (`protocol/identity.py`):
a session answers only to the token that opened it (any other gets the 404 of an
unknown session), and the core it reaches binds tasks and `requestState` to it.
Without a token file nobody is told apart (`identity.ANONYMOUS`).

No connection holds anything once it stops moving. Headers must arrive within
hypercorn's keep-alive timeout. A body must keep arriving (`--body-timeout`: each
interval it ends or brings BODY_PROGRESS more bytes, else 408), and takes no
request slot until it is whole; a client that leaves before its end made no
request. A response whose client stops taking it (its receive window shut, or
what was sent unacknowledged, for `--send-timeout`) is cut off by the kernel
(TCP_USER_TIMEOUT on the listening sockets, which accepted ones inherit), since
hypercorn's writes cannot be cancelled from the application.
"""

from __future__ import annotations

import contextvars
import functools
import ipaddress
import math
import os
import secrets
import socket
import ssl
import time
import traceback
from collections.abc import Awaitable, Callable, Hashable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import trio

from mcpwrap.config import load as config_module
from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol import http_binding as binding, identity
from mcpwrap.protocol.actions import Action, CancelCall, Stderr
from mcpwrap.protocol.actions import Send as Write
from mcpwrap.protocol.core import BatchBudget, Core, unexpected
from mcpwrap.protocol.jsonrpc import Batch, Invalid, Request, RequestId
from mcpwrap.protocol.modern import is_modern
from mcpwrap.protocol.prompts import CompletionCache
from mcpwrap.protocol.session import State
from mcpwrap.serve.front import (FLUSH_S, Options, SecretSource, _needs_secret, _stderr, file_signature, log, prepare,
                                 tracing)
from mcpwrap.serve.stdio import Admission, Driver, Outbox, _stop_on_signal
from mcpwrap.state import signing

if TYPE_CHECKING:
    from hypercorn.config import Config as HypercornConfig, Sockets

ENDPOINT = "/mcp"
SESSION_IDLE_S = 3600.0           # a legacy session nobody used for this long is ended (404 afterwards)
MAX_SESSIONS = 1000
MAX_EXCHANGES = 1024              # HTTP requests served at once; more get 503
KEEPALIVE_S = 15.0                # an SSE comment this often keeps proxies from closing a quiet stream
MIN_BURST = 10                    # a client's start-up (initialize, initialized, the lists) comes at once
MAX_BUCKETS = 10000               # past this many clients tracked, the ones back to a full bucket are forgotten
BODY_TIMEOUT_S = 30.0             # each such interval, a request body ends or brings BODY_PROGRESS more bytes
BODY_PROGRESS = 16 * 1024         # bytes: about 550 a second at the default, far below any working link
BODIES_IN_TRANSIT = 32 * 1024 * 1024   # bytes of bodies still arriving, all connections together
SEND_TIMEOUT_S = 60.0             # a response its client takes nothing of for this long is cut off
MAX_TIMEOUT_S = 86400.0           # --body-timeout and --send-timeout: at most a day
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class HttpOptions:
    host: str
    port: int
    token_file: Path | None = None
    allowed_origins: tuple[str, ...] = ()
    insecure_no_auth: bool = False
    session_idle_s: float = SESSION_IDLE_S
    max_sessions: int = MAX_SESSIONS
    max_exchanges: int = MAX_EXCHANGES
    max_body: int = jsonrpc.MAX_LINE
    rate: float | None = None         # requests a second per client (--rate R[/B]); None: no limit
    burst: int = MIN_BURST
    certfile: Path | None = None
    keyfile: Path | None = None
    body_timeout_s: float = BODY_TIMEOUT_S
    send_timeout_s: float = SEND_TIMEOUT_S

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_address(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` (an IPv6 host in brackets); the host defaults to 127.0.0.1."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--http wants [HOST:]PORT, got {text!r}")
    return host, int(port)


def parse_rate(text: str) -> tuple[float, int]:
    """`R[/B]`: R requests a second on average, bursts of B (default R, at least MIN_BURST)."""
    rate_text, slash, burst_text = text.partition("/")
    try:
        rate, burst = float(rate_text), int(burst_text) if slash else max(MIN_BURST, math.ceil(float(rate_text)))
    except ValueError:
        rate = burst = 0
    if not (math.isfinite(rate) and rate > 0 and burst >= 1):
        raise ValueError(f"--rate wants R[/B], R requests a second (> 0) and a burst of B (>= 1), got {text!r}")
    return rate, burst


def parse_timeout(text: str, flag: str) -> float:
    """A duration as in the tools file ("30", "1.5s", "2m"), from 1 ms to MAX_TIMEOUT_S."""
    try:
        seconds = config_module.parse_duration(text) if text.isascii() else 0.0   # "\u0661" is no digit here
    except ValueError:
        seconds = 0.0
    if not 0.001 <= seconds <= MAX_TIMEOUT_S:
        raise ValueError(f"{flag} wants a duration from 1ms to 24h (e.g. 30, 1.5s, 2m), got {text!r}")
    return seconds


def http_options(address: str, token_file: str | None, origins: list[str], insecure: bool, rate: str | None = None,
                 certfile: str | None = None, keyfile: str | None = None, body_timeout: str | None = None,
                 send_timeout: str | None = None) -> HttpOptions:
    """The --http options as given on the command line (ValueError for a malformed one)."""
    host, port = parse_address(address)
    if (certfile is None) != (keyfile is None):
        raise ValueError("--certfile and --keyfile go together (the certificate chain and its private key)")
    per_second, burst = parse_rate(rate) if rate is not None else (None, MIN_BURST)
    return HttpOptions(host, port, Path(token_file) if token_file else None, tuple(origins), insecure,
                       rate=per_second, burst=burst, certfile=Path(certfile) if certfile else None,
                       keyfile=Path(keyfile) if keyfile else None,
                       body_timeout_s=parse_timeout(body_timeout, "--body-timeout") if body_timeout else BODY_TIMEOUT_S,
                       send_timeout_s=parse_timeout(send_timeout, "--send-timeout") if send_timeout else SEND_TIMEOUT_S)


def exposure_problem(options: HttpOptions) -> str | None:
    """Why these options must not start: a non-loopback bind with nobody to authenticate."""
    if options.loopback or options.token_file is not None or options.insecure_no_auth:
        return None
    return (f"refusing to serve {options.host}:{options.port} without authentication: anyone who can reach it "
            "could run the tools. Give --token-file FILE (bearer tokens), bind 127.0.0.1, or, behind a proxy "
            "that authenticates, --insecure-no-auth")


def tls_problem(options: HttpOptions) -> str | None:
    """Why the certificate and key cannot serve TLS, found before the port is bound."""
    if options.certfile is None or options.keyfile is None:
        return None
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(options.certfile, options.keyfile)
    except (OSError, ssl.SSLError) as exc:
        return f"cannot serve TLS with --certfile {options.certfile} and --keyfile {options.keyfile}: {exc}"
    return None


class RateLimit:
    """A token bucket per client: `rate` requests a second on average, `burst` at once; the clock is injectable."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.buckets: dict[Hashable, tuple[float, float]] = {}     # key -> (tokens left, when counted)

    def take(self, key: Hashable) -> float:
        """0 when the request may go ahead (it takes a token), else the seconds until a token is due."""
        now = self.clock()
        tokens, then = self.buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens < 1:
            self.buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate
        self.buckets[key] = (tokens - 1, now)
        if len(self.buckets) > MAX_BUCKETS:
            self.buckets = {k: (t, w) for k, (t, w) in self.buckets.items() if t + (now - w) * self.rate < self.burst}
        return 0.0

    def forget(self, key: Hashable) -> None:
        self.buckets.pop(key, None)


class TokenFile:
    """Bearer tokens, one a line, from a file only its owner can read; re-read when it changes (rotation)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.signature: tuple[int, ...] | None = None
        self.tokens: list[bytes] = []
        self.current()                    # a bad file refuses to start

    def current(self) -> list[bytes]:
        signature = file_signature(self.path)
        if signature != self.signature:
            self.signature, self.tokens = signature, self._read()
        return self.tokens

    def _read(self) -> list[bytes]:
        fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            if st.st_mode & 0o077 or st.st_uid != os.geteuid():
                raise signing.SecretFileError(f"{self.path}: a token file must be owned by this user and "
                                              f"not readable by others (chmod 600 {self.path})")
            tokens = binding.parse_tokens(os.read(fd, 1 << 20).decode("utf-8", "replace"))
        finally:
            os.close(fd)
        if not tokens or any(len(t) < 16 for t in tokens):
            raise signing.SecretFileError(f"{self.path}: give one token of at least 16 characters a line")
        return tokens


_current: contextvars.ContextVar[Stream | None] = contextvars.ContextVar("mcpwrap_http_stream", default=None)
_posted: contextvars.ContextVar[jsonrpc.Message | None] = contextvars.ContextVar("mcpwrap_http_posted", default=None)


@dataclass(eq=False)
class Stream:
    """One HTTP response: the messages that belong to it, bounded like stdout, then its end."""
    expect: set[RequestId] = field(default_factory=set)
    outbox: Outbox = field(default_factory=Outbox)
    abandoned: bool = False               # a request of it was cancelled: no answer is owed for it

    @property
    def live(self) -> bool:
        return not self.outbox.closed


def _refuses_whole(message: Any) -> bool:
    """An error without an id: the answer to a message as a whole (a refused batch), its POST's last."""
    return isinstance(message, dict) and "error" in message and message.get("id") is None


def _answered(message: Any) -> list[RequestId]:
    """The request ids a message answers (a batch answer covers several)."""
    items = message if isinstance(message, list) else [message]
    return [m["id"] for m in items if isinstance(m, dict) and "method" not in m and m.get("id") is not None]


class Router(Outbox):
    """A driver's outbox over HTTP: each message goes to the response it belongs to, or nowhere."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: dict[RequestId, Stream] = {}
        self.tokens: dict[str | int, Stream] = {}
        self.default: Stream | None = None    # the legacy GET stream, or a modern POST's one response
        self.target: Stream | None = None
        self.ids: list[RequestId] = []
        self.whole = False                    # the next `put` answers its POST as a whole: it ends there

    def open(self, requests: list[Request]) -> Stream:
        stream = Stream({r.id for r in requests})
        for request in requests:
            self.waiting[request.id] = stream
            meta = request.params.get("_meta")
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            if isinstance(token, (str, int)) and not isinstance(token, bool):
                self.tokens[token] = stream
        return stream

    def aim(self, message: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Where the next `put` goes; called with the message the driver is about to encode."""
        self.whole = False
        self.ids = _answered(message)
        if self.ids:
            self.target = self.waiting.get(self.ids[0])
            return
        params = message.get("params") if isinstance(message, dict) else None
        token = params.get("progressToken") if isinstance(params, dict) else None
        candidates = [self.tokens.get(token) if isinstance(token, (str, int)) else None, _current.get(), self.default]
        self.target = next((s for s in candidates if s is not None and s.live and self._mine(s)), None)
        self.whole = (_refuses_whole(message) and self.target is not None and self.target is _current.get()
                      and self.target is not self.default)

    def _mine(self, stream: Stream) -> bool:
        return stream is self.default or stream in self.waiting.values() or stream in self.tokens.values()

    def put(self, data: bytes, droppable: bool = False) -> None:
        stream, self.target = self.target, None
        answered = {*self.ids, *(stream.expect if self.whole and stream is not None else ())}
        self.whole = False
        for request_id in answered:
            self.waiting.pop(request_id, None)
        if stream is None:
            return
        stream.outbox.put(data, droppable)
        if answered:
            stream.expect.difference_update(answered)
            if not stream.expect:
                self.finish(stream)

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

    async def room(self) -> None:
        return                            # each response is bounded on its own; nobody waits for all of them

    def close(self) -> None:
        for stream in {*self.waiting.values(), *self.tokens.values(), *([self.default] if self.default else [])}:
            stream.outbox.close()
        super().close()


class RoutedDriver(Driver):
    """The stdio driver, with each outgoing message aimed at its HTTP response before it is written."""
    outbox: Router
    __hash__ = object.__hash__            # one exchange's or session's: identity is equality

    def _send(self, message: dict[str, Any] | list[dict[str, Any]]) -> None:
        self.outbox.aim(message)
        super()._send(message)

    def perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, CancelCall):
                self.outbox.abandon(action.id)
        super().perform(actions)


class Reply:
    """The output an `Outbox` writes to: one JSON body when the first message is the last, else SSE."""

    def __init__(self, send: Send, outbox: Outbox, modern: bool, headers: list[tuple[bytes, bytes]]) -> None:
        self.send, self.outbox, self.modern, self.headers = send, outbox, modern, headers
        self.started = self.sse = False

    async def write(self, data: bytes) -> None:
        if not self.started:
            self.started = True
            if self.outbox.closed and not self.outbox.items:
                status = binding.status_of(orjson.loads(data), self.modern) if self.modern else 200
                await _respond(self.send, status, data, self.headers)
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
            await _respond(self.send, 503, jsonrpc.encode(binding.Refusal(503, "server shutting down").body()))


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())] if body else []
    await send({"type": "http.response.start", "status": status, "headers": head + (headers or [])})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _refuse(send: Send, refusal: binding.Refusal, request_id: RequestId | None = None) -> None:
    headers = [(k.encode(), v.encode()) for k, v in refusal.headers]
    await _respond(send, refusal.status, jsonrpc.encode(refusal.body(request_id)), headers)


async def _internal_error(send: Send | None, message: jsonrpc.Message | None, exc: Exception) -> None:
    """A bug met in an exchange: one line logged that names it and, unless the answer had started
    (`send` None), -32603 for each request the POST carried (JSON-RPC, with the status its era
    gives the code), or, with none, a 500 that still says so in JSON-RPC."""
    actions = unexpected(message, exc)
    log(next(a.text for a in actions if isinstance(a, Stderr)), "error")
    answers = [a.message for a in actions if isinstance(a, Write)]
    if send is None:
        return
    if not answers:
        await _refuse(send, binding.Refusal(500, "internal error (see the server's log)", jsonrpc.INTERNAL_ERROR))
        return
    modern = isinstance(message, Request) and message.method != "initialize" and is_modern(message.method,
                                                                                           message.params)
    await _respond(send, binding.status_of(answers[0], modern), jsonrpc.encode(answers[0]))


@dataclass(eq=False)
class Session:
    """One legacy session: its own core (negotiated revision, capabilities, log level, questions)."""
    id: str
    core: Core
    router: Router
    scope: trio.CancelScope
    driver: RoutedDriver | None = None
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0


class Hub:
    """What every exchange shares: the current tools, the limits, the secret, the sessions."""

    def __init__(self, config: config_module.Config, options: Options, http: HttpOptions) -> None:
        self.options, self.http = options, http
        self.secret = SecretSource(options.secret_file)
        self.tokens = TokenFile(http.token_file) if http.token_file is not None else None
        self.rates = RateLimit(http.rate, http.burst) if http.rate is not None else None
        self.sessions: dict[str, Session] = {}
        self.listens: set[RoutedDriver] = set()
        self.exchanges = 0
        self.transit = InTransit()
        self.admission = Admission(options.max_calls)   # --max-calls and its waiting room, for all clients
        self.limiters: dict[str, trio.CapacityLimiter] = {}
        self.budget = BatchBudget()       # the batch answers held by every session together
        self.completions = CompletionCache()    # recent `complete` outputs, for every session and POST
        self.root = self.core(config)     # holds the tools as reloaded; answers nobody
        self.nursery: trio.Nursery | None = None

    def core(self, config: config_module.Config | None = None,
             who: identity.Identity = identity.ANONYMOUS) -> Core:
        return Core(config or self.root.config, self.secret, time.time, budget=self.budget,
                    completions=self.completions, identity=who)

    def _identity(self, headers: dict[str, str]) -> identity.Identity:
        """Who sent an admitted request: its bearer token's identity, or nobody told apart without a token file."""
        if self.tokens is None:
            return identity.ANONYMOUS
        return identity.bearer(headers.get("authorization", "").partition(" ")[2].strip().encode("utf-8", "replace"))

    def _session(self, headers: dict[str, str]) -> Session | None:
        """The legacy session the request names, if the credential that opened it sent the request:
        another's session does not exist for it (404, as an unknown id)."""
        session = self.sessions.get(headers.get("mcp-session-id") or "")
        if session is None or not identity.visible(session.core.identity.principal, self._identity(headers).principal):
            return None
        return session

    def driver(self, core: Core, nursery: trio.Nursery, router: Router) -> RoutedDriver:
        return RoutedDriver(core, self.options, nursery, router, limiters=self.limiters, admission=self.admission)

    # --- the ASGI application -------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        refusal = self._gate(scope, headers) or self._throttle(scope, headers)
        if refusal is not None:
            await _refuse(send, refusal)
            return
        body = b""
        if scope["method"] == "POST":          # a body in transit holds no slot: it is bounded by --body-timeout
            received = await self._receive(headers, receive)
            if received is None:
                log("mcpwrap: a client left before the end of its request; nothing ran", "debug")
                return
            if isinstance(received, binding.Refusal):
                await _refuse(send, received)
                return
            body = received
        if self.exchanges >= self.http.max_exchanges:
            await _refuse(send, binding.Refusal(503, "too many requests in progress; try again shortly",
                                                headers=(("retry-after", "1"),)))
            return
        self.exchanges += 1
        started = False

        async def tracked(event: dict[str, Any]) -> None:
            nonlocal started
            started = started or event["type"] == "http.response.start"
            await send(event)
        try:
            if scope["method"] == "POST":
                await self._post(headers, body, receive, tracked)
            elif scope["method"] == "GET":
                await self._get(headers, receive, tracked)
            else:
                await self._delete(headers, tracked)
        except Exception as exc:          # a bug must cost this exchange, answered, not the server
            log("mcpwrap: " + traceback.format_exc(), "debug")
            await _internal_error(send if not started else None, _posted.get(), exc)
        finally:
            self.exchanges -= 1

    def _gate(self, scope: Scope, headers: dict[str, str]) -> binding.Refusal | None:
        """Path, Origin, Host, token, method, Accept: all before a byte of the body is read."""
        if scope["path"].rstrip("/") != ENDPOINT:
            return binding.Refusal(404, f"Not Found: the MCP endpoint is {ENDPOINT}")
        refusal = (binding.origin_refusal(headers.get("origin"), self.http.allowed_origins)
                   or binding.host_refusal(headers.get("host"), self.http.loopback, self.http.allowed_origins))
        if refusal is None and self.tokens is not None:
            try:
                tokens = self.tokens.current()
            except (OSError, signing.SecretFileError) as exc:
                log(f"mcpwrap: cannot read the token file, refusing every request: {exc}", "error")
                tokens = []
            refusal = binding.token_refusal(headers.get("authorization"), tokens)
        if refusal is None and scope["method"] not in ("POST", "GET", "DELETE"):
            refusal = binding.Refusal(405, "Method Not Allowed", headers=(("allow", "POST, GET, DELETE"),))
        return refusal or binding.accept_refusal(scope["method"], headers.get("accept"))

    def _throttle(self, scope: Scope, headers: dict[str, str]) -> binding.Refusal | None:
        """--rate, per client: a legacy session by its id; anyone else by bearer token, else by peer address."""
        if self.rates is None:
            return None
        session = headers.get("mcp-session-id")
        client = scope.get("client")
        key = (("session", session) if self._session(headers) is not None else
               ("token", headers["authorization"]) if self.tokens is not None and "authorization" in headers else
               ("peer", client[0] if client else ""))
        wait = self.rates.take(key)
        if not wait:
            return None
        return binding.Refusal(429, f"Too Many Requests: at most {self.http.rate:g} a second (bursts of "
                                    f"{self.http.burst}); try again later",
                               headers=(("retry-after", str(max(1, math.ceil(wait)))),))

    async def _receive(self, headers: dict[str, str], receive: Receive) -> bytes | binding.Refusal | None:
        """A POST's whole body, a refusal, or None when its client left before the end (no request)."""
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return binding.Refusal(415, "Unsupported Media Type: POST a JSON-RPC message as application/json")
        return await _read_body(receive, self.http.max_body, self.http.body_timeout_s, self.transit)

    async def _post(self, headers: dict[str, str], body: bytes, receive: Receive, send: Send) -> None:
        if tracing():
            log("mcpwrap <- " + body.decode("utf-8", "replace"), "debug")
        message = jsonrpc.decode(body)
        _posted.set(message)
        if isinstance(message, Request) and (removed := binding.removed_method_refusal(message)) is not None:
            await _refuse(send, removed, message.id)
        elif isinstance(message, Request) and message.method != "initialize" and is_modern(message.method, message.params):
            await self._modern(headers, message, len(body), receive, send)
        elif isinstance(message, Invalid):
            refusal = binding.Refusal(400, message.message, message.code)
            await _refuse(send, refusal, message.id)
        else:
            await self._legacy(headers, message, len(body), receive, send)

    # --- 2026-07-28: one core per POST ----------------------------------------------------
    async def _modern(self, headers: dict[str, str], request: Request, size: int, receive: Receive,
                      send: Send) -> None:
        mismatch = binding.check_modern_headers(headers, request)
        if mismatch is not None:
            await _refuse(send, binding.Refusal(400, mismatch.message, mismatch.code), request.id)
            return
        core, router = self.core(who=self._identity(headers)), Router()
        stream = router.default = router.open([request])
        async with trio.open_nursery() as nursery:
            driver = self.driver(core, nursery, router)
            nursery.start_soon(_disconnected, receive,     # closing it early is the cancellation
                               lambda: None if stream.outbox.closed else nursery.cancel_scope.cancel())
            _current.set(stream)
            driver.request_bytes = size       # what a call waiting for a slot holds
            driver.perform(core.receive(request))
            if request.id in core.listens:
                self.listens.add(driver)
                if self.options.watch:
                    nursery.start_soon(driver.watch, core.config.path, file_signature(core.config.path))
            try:
                await _write(stream, Reply(send, stream.outbox, True, []), nursery)
            finally:
                self.listens.discard(driver)
                nursery.cancel_scope.cancel()

    # --- legacy: sessions -----------------------------------------------------------------
    async def _legacy(self, headers: dict[str, str], message: jsonrpc.Message, size: int, receive: Receive,
                      send: Send) -> None:
        refusal = binding.legacy_version_refusal(headers)
        if refusal is not None:
            await _refuse(send, refusal)
            return
        initialize = isinstance(message, Request) and message.method == "initialize"
        session_id = headers.get("mcp-session-id")
        if initialize:
            if len(self.sessions) >= self.http.max_sessions:
                await _refuse(send, binding.Refusal(503, "too many sessions; try again later",
                                                    headers=(("retry-after", "5"),)))
                return
            session = await self._open_session(self._identity(headers))
        elif session_id is None:
            await _refuse(send, binding.Refusal(400, "Bad Request: Mcp-Session-Id header is required (send "
                                                "initialize first), or use 2026-07-28 _meta"))
            return
        elif (found := self._session(headers)) is None:
            await _refuse(send, binding.Refusal(404, "Not Found: unknown or expired session; initialize again"))
            return
        else:
            session = found
        session.busy += 1
        try:
            await self._in_session(session, message, initialize, size, receive, send)
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()
            if initialize and session.core.session.state is State.NEW:
                self._end_session(session)        # the initialize was refused: no session was made

    async def _in_session(self, session: Session, message: jsonrpc.Message, initialize: bool, size: int,
                          receive: Receive, send: Send) -> None:
        assert session.driver is not None
        session.driver.request_bytes = size   # what a call waiting for a slot holds (each call of a batch)
        items = message.items if isinstance(message, Batch) else (message,)
        requests = [m for m in items if isinstance(m, Request)]
        if not requests:
            session.driver.perform(session.core.receive(message))
            await _respond(send, 202, b"")
            return
        stream = session.router.open(requests)
        _current.set(stream)
        session.driver.perform(session.core.receive(message))
        extra = [(b"mcp-session-id", session.id.encode())] if initialize else []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_disconnected, receive, stream.outbox.close)   # not a cancellation in legacy
            await _write(stream, Reply(send, stream.outbox, False, extra), nursery)
            nursery.cancel_scope.cancel()

    async def _open_session(self, who: identity.Identity) -> Session:
        session = Session(secrets.token_urlsafe(32), self.core(who=who), Router(), trio.CancelScope())
        assert self.nursery is not None
        session.driver = await self.nursery.start(self._host_session, session)
        self.sessions[session.id] = session
        return session

    async def _host_session(self, session: Session, task_status: trio.TaskStatus[RoutedDriver]) -> None:
        """The session's calls, timers and watchers live here, beyond any one POST."""
        with session.scope:
            async with trio.open_nursery() as nursery:
                driver = self.driver(session.core, nursery, session.router)
                if self.options.watch:
                    nursery.start_soon(driver.watch, session.core.config.path,
                                       file_signature(session.core.config.path))
                task_status.started(driver)
                await trio.sleep_forever()

    def _end_session(self, session: Session) -> None:
        if self.sessions.pop(session.id, None) is not None:
            log(f"mcpwrap: HTTP session {session.id[:8]}... ended", "debug")
        session.scope.cancel()            # its calls are cancelled: their process groups are killed
        session.core.end()                # and its batches will never be answered
        session.router.close()
        if self.rates is not None:
            self.rates.forget(("session", session.id))

    async def _get(self, headers: dict[str, str], receive: Receive, send: Send) -> None:
        """The legacy session's own stream, for what belongs to no request (list changes, task status)."""
        session = self._session(headers)
        if session is None:
            status = 404 if "mcp-session-id" in headers else 405
            await _refuse(send, binding.Refusal(status, "GET opens a legacy session's stream: give its "
                                                "Mcp-Session-Id" if status == 404 else "Method Not Allowed"))
            return
        if session.router.default is not None:
            session.router.default.outbox.close()     # one GET stream a session: the newer one wins
        stream = session.router.default = Stream()
        reply = Reply(send, stream.outbox, False, [])
        reply.started = reply.sse = True
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        session.busy += 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_disconnected, receive, stream.outbox.close)
                await _write(stream, reply, nursery)
                nursery.cancel_scope.cancel()
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()

    async def _delete(self, headers: dict[str, str], send: Send) -> None:
        session = self._session(headers)
        if session is None:
            await _refuse(send, binding.Refusal(404 if "mcp-session-id" in headers else 405,
                                                "unknown or expired session"))
            return
        self._end_session(session)
        await _respond(send, 204, b"")

    async def expire(self) -> None:
        """End sessions idle (no open response, no request) for longer than the limit."""
        while True:
            await trio.sleep(min(self.http.session_idle_s / 4, 60.0))
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if not session.busy and now - session.last_used > self.http.session_idle_s:
                    self._end_session(session)

    def shutdown(self) -> None:
        """End listen streams as stdio does (cancellation, then result), and every session."""
        for driver in list(self.listens):
            driver.perform(driver.core.shutdown())
        for session in list(self.sessions.values()):
            self._end_session(session)


async def _write(stream: Stream, reply: Reply, nursery: trio.Nursery) -> None:
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


async def _disconnected(receive: Receive, then: Callable[[], None]) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    then()


class InTransit:
    """The bytes of request bodies still arriving, counted across every connection of a server.

    A body holds no request slot until it is whole, so this is what bounds the memory that many
    slow (but moving) bodies hold together: past `limit`, a body's next chunk is refused with 503.
    """

    def __init__(self, limit: int = BODIES_IN_TRANSIT) -> None:
        self.limit, self.held = limit, 0


async def _read_body(receive: Receive, limit: int, timeout: float,
                     transit: InTransit | None = None) -> bytes | binding.Refusal | None:
    """The body received whole; else 413 past `limit`, 408 once it stops moving, 503 while the bodies
    in transit hold `transit.limit` bytes, None if its client left.

    Moving means: within each `timeout` seconds the body ends or brings BODY_PROGRESS more bytes. A
    deadline on the whole body would fail an honest slow link, one between chunks alone a trickle.
    """
    transit = transit or InTransit()
    body = bytearray()
    try:
        return await _gather_body(receive, limit, timeout, transit, body)
    finally:
        transit.held -= len(body)


async def _gather_body(receive: Receive, limit: int, timeout: float, transit: InTransit,
                       body: bytearray) -> bytes | binding.Refusal | None:
    mark, deadline = 0, trio.current_time() + timeout
    while True:
        event: dict[str, Any] | None = None
        with trio.move_on_at(deadline):
            event = await receive()
        if event is None:
            return binding.Refusal(408, f"Request Timeout: the body stopped arriving (it must end or bring "
                                        f"{BODY_PROGRESS} more bytes every {timeout:g} s)")
        if event["type"] == "http.disconnect":
            return None
        chunk = event.get("body", b"")
        if len(body) + len(chunk) > limit:
            return binding.Refusal(413, f"Payload Too Large: at most {limit} bytes")
        if transit.held + len(chunk) > transit.limit:
            return binding.Refusal(503, "Service Unavailable: too many request bodies are arriving at once; "
                                        "try again shortly", headers=(("retry-after", "1"),))
        body += chunk
        transit.held += len(chunk)
        if not event.get("more_body", False):
            return bytes(body)
        if len(body) - mark >= BODY_PROGRESS:
            mark, deadline = len(body), trio.current_time() + timeout


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def serve(config: config_module.Config, options: Options, http: HttpOptions) -> int:
    problem = exposure_problem(http) or tls_problem(http)
    try:
        from hypercorn.config import Config as HypercornConfig
        from hypercorn.trio.run import worker_serve
        from hypercorn.utils import wrap_app
    except ImportError:
        problem = "--http needs hypercorn: pip install 'mcpwrap-cli[http]'"
    if problem is not None:
        log(f"mcpwrap: {problem}", "error")
        return 2
    hub = Hub(config, options, http)
    if _needs_secret(config):
        hub.secret()                      # refuse to start on a bad secret file, before any request
    settings = HypercornConfig()
    settings.bind = [f"[{http.host}]:{http.port}" if ":" in http.host else f"{http.host}:{http.port}"]
    settings.accesslog = settings.errorlog = None
    if http.certfile is not None and http.keyfile is not None:
        settings.certfile, settings.keyfile = str(http.certfile), str(http.keyfile)
    signalled = trio.CancelScope()

    async def stop() -> None:
        with signalled:
            await trio.sleep_forever()
        hub.shutdown()

    async with trio.open_nursery() as nursery:
        hub.nursery = nursery

        async def run_server(task_status: trio.TaskStatus[list[str]]) -> None:
            app = wrap_app(hub, settings.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]  # its TypedDicts
            await worker_serve(app, settings, sockets=_listen(settings, http.send_timeout_s), shutdown_trigger=stop,
                               task_status=task_status)
            nursery.cancel_scope.cancel()   # the graceful shutdown is over: end sessions' tasks too

        nursery.start_soon(hub.expire)
        nursery.start_soon(_stop_on_signal, signalled)
        if options.watch:
            nursery.start_soon(hub.driver(hub.root, nursery, Router()).watch, config.path,
                               file_signature(config.path))
        binds = await nursery.start(run_server)
        log(f"mcpwrap: serving {len(config.tools)} tool(s) from {config.path} on "
            f"{' '.join(b + ENDPOINT for b in binds)}" + ("" if hub.tokens else " (no authentication)"))
    return 0


def _listen(settings: HypercornConfig, send_timeout: float) -> Sockets:
    """hypercorn's sockets for `settings.bind`, listening, with the send deadline that accepted ones inherit:
    data unacknowledged, or a receive window shut, for `send_timeout` seconds ends the connection."""
    sockets = settings.create_sockets()
    for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, round(send_timeout * 1000))
        sock.listen(settings.backlog)
    return sockets


def run(config: config_module.Config, options: Options, http: HttpOptions) -> int:
    """`mcpwrap serve --http`: log level, fd limit, trio, and stderr flushed at the end (no front: a
    listening socket has nothing to answer before trio)."""
    prepare(options)
    try:
        return trio.run(functools.partial(serve, http=http), config, options)
    finally:
        _stderr.flush(FLUSH_S)
