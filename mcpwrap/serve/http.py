"""Streamable HTTP: the second driver over the same sans-IO core, on hypercorn's trio worker.

One endpoint (`/mcp`) answers both eras, decided per POST from the body as on
stdio. A 2026-07-28 request gets a `Core` of its own for the length of its
POST (request ids of different clients never meet), its mirrored headers
checked first (`protocol/http_binding.py`); closing its response is its
cancellation. `initialize` opens a legacy session: a `Core` and a `Driver`
that live, under the hub's nursery, until DELETE, idle expiry or shutdown;
its POSTs share them. The `Driver` is stdio's, composed with a `Router`
(`http_router`) as its `Post`: each message goes to the response it belongs to
(an answer by the request ids `Send.answers` names, progress by token, the rest
by the POST whose task produced it, else the session's GET stream). A legacy
disconnect is not a cancellation (2025-11-25 says so); the answer is then
dropped. A request cancelled by `notifications/cancelled` is never answered,
so its POST ends there, as an SSE stream without its answer.

Every answer leaves through the one `Outbox` of its response: the first
message is sent as `application/json` when it is also the last (its status
chosen when the router took the answer, before it was encoded), else the
response becomes an SSE stream. Tool calls share one `--max-calls` limiter
and its waiting room (`admission.Admission`, fed by each POST body's size)
across all clients; HTTP requests, sessions and bodies are bounded; Origin,
Host, the bearer token and the client's `--rate` are checked before a body is
read (`http_gate`). TLS is hypercorn's (`--certfile`, `--keyfile`); it never
stands in for authentication. Each request's bearer token is its identity
(`protocol/identity.py`): a session answers only to the token that opened it
(any other gets the 404 of an unknown session), and the core it reaches binds
tasks and `requestState` to it. Without a token file nobody is told apart
(`identity.ANONYMOUS`).

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
import hashlib
import secrets
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from mcpwrap.config import load as config_module
from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol import http_binding as binding, identity
from mcpwrap.protocol.actions import Send, Stderr
from mcpwrap.protocol.core import BatchBudget, Core, unexpected
from mcpwrap.protocol.jsonrpc import Batch, Invalid, Request
from mcpwrap.protocol.modern import is_modern
from mcpwrap.protocol.prompts import CompletionCache
from mcpwrap.protocol.session import State
from mcpwrap.serve.admission import Admission
from mcpwrap.serve.audit import Auditor
from mcpwrap.serve.common import (FLUSH_S, Options, SecretSource, file_signature, log, needs_secret, prepare, stderr,
                                  tracing)
from mcpwrap.serve.driver import Driver, stop_on_signal
from mcpwrap.serve.http_gate import (ENDPOINT, AsgiSend, Gate, HttpOptions, Receive, Scope, exposure_problem, refuse,
                                     respond, tls_problem, with_oauth)
from mcpwrap.serve.http_router import SSE_HEADERS, Reply, Router, Stream, current, disconnected, write

if TYPE_CHECKING:
    from hypercorn.config import Config as HypercornConfig, Sockets

_posted: contextvars.ContextVar[jsonrpc.Message | None] = contextvars.ContextVar("mcpwrap_http_posted", default=None)


async def _internal_error(send: AsgiSend | None, message: jsonrpc.Message | None, exc: Exception) -> None:
    """A bug met in an exchange: one line logged that names it and, unless the answer had started
    (`send` None), -32603 for each request the POST carried (JSON-RPC, with the status its era
    gives the code), or, with none, a 500 that still says so in JSON-RPC."""
    actions = unexpected(message, exc)
    log(next(a.text for a in actions if isinstance(a, Stderr)), "error")
    answers = [a.message for a in actions if isinstance(a, Send)]
    if send is None:
        return
    if not answers:
        await refuse(send, binding.Refusal(500, "internal error (see the server's log)", jsonrpc.INTERNAL_ERROR))
        return
    modern = isinstance(message, Request) and message.method != "initialize" and is_modern(message.method,
                                                                                           message.params)
    await respond(send, binding.status_of(answers[0], modern), jsonrpc.encode(answers[0]))


@dataclass(eq=False)
class Session:
    """One legacy session: its own core (negotiated revision, capabilities, log level, questions)."""
    id: str
    core: Core
    router: Router
    scope: trio.CancelScope
    driver: Driver | None = None
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0


class Hub:
    """What every exchange shares: the current tools, the limits, the secret, the sessions."""

    def __init__(self, config: config_module.Config, options: Options, http: HttpOptions,
                 resource: str | None = None) -> None:
        self.options, self.http = options, http
        self.secret = SecretSource(options.secret_file)
        self.gate = Gate(http, resource)
        self.sessions: dict[str, Session] = {}
        self.listens: set[Driver] = set()
        self.exchanges = 0
        self.admission = Admission(options.max_calls)   # --max-calls and its waiting room, for all clients
        self.limiters: dict[str, trio.CapacityLimiter] = {}
        self.budget = BatchBudget()       # the batch answers held by every session together
        self.completions = CompletionCache()    # recent `complete` outputs, for every session and POST
        self.trail = Auditor(config.audit)      # the audit trail every session and POST writes to
        self.root = self.core(config)     # holds the tools as reloaded; answers nobody
        self.nursery: trio.Nursery | None = None

    def core(self, config: config_module.Config | None = None,
             who: identity.Identity = identity.ANONYMOUS, session: str | None = None) -> Core:
        """A core over the current tools; `session`, a legacy session's id (the audit trail names
        it by a digest: the id itself lets its holder in)."""
        tag = None if session is None else hashlib.sha256(session.encode()).hexdigest()[:16]
        return Core(config or self.root.served, self.secret, time.time, budget=self.budget,
                    completions=self.completions, identity=who, transport="http", session=tag)

    def _session(self, headers: dict[str, str], who: identity.Identity) -> Session | None:
        """The legacy session the request names, if the identity that opened it sent the request:
        another's session does not exist for it (404, as an unknown id)."""
        session = self.sessions.get(headers.get("mcp-session-id") or "")
        if session is None or not identity.visible(session.core.identity.principal, who.principal):
            return None
        return session

    def driver(self, core: Core, nursery: trio.Nursery, router: Router) -> Driver:
        return Driver(core, self.options, nursery, router, limiters=self.limiters, admission=self.admission,
                      auditor=self.trail)

    # --- the ASGI application -------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: AsgiSend) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        document = self.gate.metadata(scope)
        if document is not None:
            await respond(send, 200, document, [(b"cache-control", b"max-age=3600")])
            return
        refusal = self.gate.refusal(scope, headers)
        who = await self.gate.identity(headers) if refusal is None else refusal
        if isinstance(who, binding.Refusal):
            await refuse(send, who)
            return
        refusal = self.gate.throttle(scope, headers, self._session(headers, who) is not None)
        if refusal is not None:
            await refuse(send, refusal)
            return
        body = b""
        if scope["method"] == "POST":          # a body in transit holds no slot: it is bounded by --body-timeout
            received = await self.gate.body(headers, receive)
            if received is None:
                log("mcpwrap: a client left before the end of its request; nothing ran", "debug")
                return
            if isinstance(received, binding.Refusal):
                await refuse(send, received)
                return
            body = received
        if self.exchanges >= self.http.max_exchanges:
            await refuse(send, binding.Refusal(503, "too many requests in progress; try again shortly",
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
                await self._post(headers, who, body, receive, tracked)
            elif scope["method"] == "GET":
                await self._get(headers, who, receive, tracked)
            else:
                await self._delete(headers, who, tracked)
        except Exception as exc:          # a bug must cost this exchange, answered, not the server
            log("mcpwrap: " + traceback.format_exc(), "debug")
            await _internal_error(send if not started else None, _posted.get(), exc)
        finally:
            self.exchanges -= 1

    async def _post(self, headers: dict[str, str], who: identity.Identity, body: bytes, receive: Receive,
                    send: AsgiSend) -> None:
        if tracing():
            log("mcpwrap <- " + body.decode("utf-8", "replace"), "debug")
        message = jsonrpc.decode(body)
        _posted.set(message)
        if isinstance(message, Request) and (removed := binding.removed_method_refusal(message)) is not None:
            await refuse(send, removed, message.id)
        elif isinstance(message, Request) and message.method != "initialize" and is_modern(message.method, message.params):
            await self._modern(headers, who, message, len(body), receive, send)
        elif isinstance(message, Invalid):
            refusal = binding.Refusal(400, message.message, message.code)
            await refuse(send, refusal, message.id)
        else:
            await self._legacy(headers, who, message, len(body), receive, send)

    # --- 2026-07-28: one core per POST ----------------------------------------------------
    async def _modern(self, headers: dict[str, str], who: identity.Identity, request: Request, size: int,
                      receive: Receive, send: AsgiSend) -> None:
        mismatch = binding.check_modern_headers(headers, request)
        if mismatch is not None:
            await refuse(send, binding.Refusal(400, mismatch.message, mismatch.code), request.id)
            return
        core, router = self.core(who=who), Router()
        stream = router.default = router.open([request], modern=True)
        async with trio.open_nursery() as nursery:
            driver = self.driver(core, nursery, router)
            nursery.start_soon(disconnected, receive,     # closing it early is the cancellation
                               lambda: None if stream.outbox.closed else nursery.cancel_scope.cancel())
            current.set(stream)
            driver.request_bytes = size       # what a call waiting for a slot holds
            driver.perform(core.receive(request))
            if request.id in core.listens:
                self.listens.add(driver)
                if self.options.watch:
                    nursery.start_soon(driver.watch, core.config.path, file_signature(core.config.path))
            try:
                await write(stream, Reply(send, stream, []), nursery)
            finally:
                self.listens.discard(driver)
                nursery.cancel_scope.cancel()

    # --- legacy: sessions -----------------------------------------------------------------
    async def _legacy(self, headers: dict[str, str], who: identity.Identity, message: jsonrpc.Message, size: int,
                      receive: Receive, send: AsgiSend) -> None:
        refusal = binding.legacy_version_refusal(headers)
        if refusal is not None:
            await refuse(send, refusal)
            return
        initialize = isinstance(message, Request) and message.method == "initialize"
        session_id = headers.get("mcp-session-id")
        if initialize:
            if len(self.sessions) >= self.http.max_sessions:
                await refuse(send, binding.Refusal(503, "too many sessions; try again later",
                                                    headers=(("retry-after", "5"),)))
                return
            session = await self._open_session(who)
        elif session_id is None:
            await refuse(send, binding.Refusal(400, "Bad Request: Mcp-Session-Id header is required (send "
                                                "initialize first), or use 2026-07-28 _meta"))
            return
        elif (found := self._session(headers, who)) is None:
            await refuse(send, binding.Refusal(404, "Not Found: unknown or expired session; initialize again"))
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
                          receive: Receive, send: AsgiSend) -> None:
        assert session.driver is not None
        session.driver.request_bytes = size   # what a call waiting for a slot holds (each call of a batch)
        items = message.items if isinstance(message, Batch) else (message,)
        requests = [m for m in items if isinstance(m, Request)]
        if not requests:
            session.driver.perform(session.core.receive(message))
            await respond(send, 202, b"")
            return
        stream = session.router.open(requests)
        current.set(stream)
        session.driver.perform(session.core.receive(message))
        extra = [(b"mcp-session-id", session.id.encode())] if initialize else []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(disconnected, receive, stream.outbox.close)   # not a cancellation in legacy
            await write(stream, Reply(send, stream, extra), nursery)
            nursery.cancel_scope.cancel()

    async def _open_session(self, who: identity.Identity) -> Session:
        session_id = secrets.token_urlsafe(32)
        session = Session(session_id, self.core(who=who, session=session_id), Router(), trio.CancelScope())
        assert self.nursery is not None
        session.driver = await self.nursery.start(self._host_session, session)
        self.sessions[session.id] = session
        return session

    async def _host_session(self, session: Session, task_status: trio.TaskStatus[Driver]) -> None:
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
        self.gate.forget(session.id)

    async def _get(self, headers: dict[str, str], who: identity.Identity, receive: Receive, send: AsgiSend) -> None:
        """The legacy session's own stream, for what belongs to no request (list changes, task status)."""
        session = self._session(headers, who)
        if session is None:
            status = 404 if "mcp-session-id" in headers else 405
            await refuse(send, binding.Refusal(status, "GET opens a legacy session's stream: give its "
                                                "Mcp-Session-Id" if status == 404 else "Method Not Allowed"))
            return
        if session.router.default is not None:
            session.router.default.outbox.close()     # one GET stream a session: the newer one wins
        stream = session.router.default = Stream()
        reply = Reply(send, stream, [])
        reply.started = reply.sse = True
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        session.busy += 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(disconnected, receive, stream.outbox.close)
                await write(stream, reply, nursery)
                nursery.cancel_scope.cancel()
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()

    async def _delete(self, headers: dict[str, str], who: identity.Identity, send: AsgiSend) -> None:
        session = self._session(headers, who)
        if session is None:
            await refuse(send, binding.Refusal(404 if "mcp-session-id" in headers else 405,
                                                "unknown or expired session"))
            return
        self._end_session(session)
        await respond(send, 204, b"")

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

async def _lifespan(receive: Receive, send: AsgiSend) -> None:
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def serve(config: config_module.Config, options: Options, http: HttpOptions) -> int:
    from hypercorn.config import Config as HypercornConfig   # the CLI said how to install it when it is missing
    from hypercorn.trio.run import worker_serve
    from hypercorn.utils import wrap_app

    settings = HypercornConfig()
    settings.bind = [f"[{http.host}]:{http.port}" if ":" in http.host else f"{http.host}:{http.port}"]
    settings.accesslog = settings.errorlog = None
    if http.certfile is not None and http.keyfile is not None:
        settings.certfile, settings.keyfile = str(http.certfile), str(http.keyfile)
    http = with_oauth(http, config.oauth)
    if (problem := exposure_problem(http) or tls_problem(http)) is not None:
        log(f"mcpwrap: {problem}", "error")
        return 2
    sockets = _listen(settings, http.send_timeout_s)
    hub = Hub(config, options, http, resource_uri(http, sockets))
    if needs_secret(config):
        hub.secret()                      # refuse to start on a bad secret file, before any request
    signalled = trio.CancelScope()

    async def stop() -> None:
        with signalled:
            await trio.sleep_forever()
        hub.shutdown()

    async with trio.open_nursery() as nursery:
        hub.nursery = nursery

        async def run_server(task_status: trio.TaskStatus[list[str]]) -> None:
            app = wrap_app(hub, settings.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]  # its TypedDicts
            await worker_serve(app, settings, sockets=sockets, shutdown_trigger=stop, task_status=task_status)
            nursery.cancel_scope.cancel()   # the graceful shutdown is over: end sessions' tasks too

        nursery.start_soon(hub.expire)
        nursery.start_soon(stop_on_signal, signalled, lambda: False, hub.trail)
        if options.watch:
            nursery.start_soon(hub.driver(hub.root, nursery, Router()).watch, config.path,
                               file_signature(config.path))
        binds = await nursery.start(run_server)
        log(f"mcpwrap: serving {len(config.tools)} tool(s) from {config.path} on "
            f"{' '.join(b + ENDPOINT for b in binds)}" + ("" if hub.gate.tokens or hub.gate.oauth else
                                                          " (no authentication)")
            + (f" (OAuth: tokens of {hub.gate.oauth.settings.issuer} for {hub.gate.oauth.resource})"
               if hub.gate.oauth else ""))
    await hub.trail.closed()              # what the calls' ends queued is written before the exit
    return 0


def resource_uri(http: HttpOptions, sockets: Sockets) -> str | None:
    """This server's canonical URI (RFC 8707), which OAuth access tokens must name in `aud`: --resource-uri,
    else the loopback address it listens on (the port bound, should --http ask for 0)."""
    if http.oauth is None:
        return None
    if http.oauth.resource is not None:
        return http.oauth.resource
    secure = bool(sockets.secure_sockets)
    port = (sockets.secure_sockets or sockets.insecure_sockets)[0].getsockname()[1]
    host = f"[{http.host}]" if ":" in http.host else http.host
    return f"{'https' if secure else 'http'}://{host}:{port}{ENDPOINT}"


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
        stderr.flush(FLUSH_S)
