"""The HTTP edge: what a request passes before a core sees it, and the bounds on its body.

`http_options` reads the --http flags; `exposure_problem` and `tls_problem` refuse to start a server
that would be open to anyone or cannot serve TLS. Per request, `Gate` checks path, Origin, Host,
the bearer token, method and Accept, then the client's `--rate`, all before a byte of the body is
read; a POST's body must be JSON and is read whole under `--max-body`, `--body-timeout` (it must
keep arriving) and the server-wide bytes in transit. Each request's bearer token is its identity
(`protocol/identity.py`); without a token file nobody is told apart (`identity.ANONYMOUS`).
The refusals are `protocol/http_binding.py`'s; this module only reads and writes ASGI.
"""

from __future__ import annotations

import ipaddress
import math
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Hashable, MutableMapping
import urllib.parse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import trio

from mcpwrap.config import load as config_module
from mcpwrap.config.model import OAuthSettings
from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol import http_binding as binding, identity
from mcpwrap.protocol.jsonrpc import RequestId
from mcpwrap.serve.common import file_signature, log
from mcpwrap.serve.oauth import WELL_KNOWN, OAuthError, Verifier
from mcpwrap.state import signing


ENDPOINT = "/mcp"
SESSION_IDLE_S = 3600.0           # a legacy session nobody used for this long is ended (404 afterwards)
MAX_SESSIONS = 1000
MAX_EXCHANGES = 1024              # HTTP requests served at once; more get 503
MIN_BURST = 10                    # a client's start-up (initialize, initialized, the lists) comes at once
MAX_BUCKETS = 10000               # past this many clients tracked, the ones back to a full bucket are forgotten
BODY_TIMEOUT_S = 30.0             # each such interval, a request body ends or brings BODY_PROGRESS more bytes
BODY_PROGRESS = 16 * 1024         # bytes: about 550 a second at the default, far below any working link
BODIES_IN_TRANSIT = 32 * 1024 * 1024   # bytes of bodies still arriving, all connections together
SEND_TIMEOUT_S = 60.0             # a response its client takes nothing of for this long is cut off
MAX_TIMEOUT_S = 86400.0           # --body-timeout and --send-timeout: at most a day

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
AsgiSend = Callable[[dict[str, Any]], Awaitable[None]]


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
    oauth: OAuthSettings | None = None    # --oauth-issuer, --resource-uri, --oauth-scope (else [server]'s)
    oauth_client: Path | None = None      # --oauth-client-file: `CLIENT_ID: SECRET` for RFC 7662 introspection

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
                 send_timeout: str | None = None, oauth: OAuthSettings | None = None,
                 oauth_client: str | None = None) -> HttpOptions:
    """The --http options as given on the command line (ValueError for a malformed one)."""
    host, port = parse_address(address)
    if (certfile is None) != (keyfile is None):
        raise ValueError("--certfile and --keyfile go together (the certificate chain and its private key)")
    for url in (oauth.issuer, oauth.resource) if oauth is not None else ():
        if url is not None and ((parts := urllib.parse.urlsplit(url)).scheme not in ("https", "http")
                                or not parts.netloc or parts.fragment):
            raise ValueError(f"--oauth-issuer and --resource-uri want an absolute http(s) URL, got {url!r}")
    per_second, burst = parse_rate(rate) if rate is not None else (None, MIN_BURST)
    return HttpOptions(host, port, Path(token_file) if token_file else None, tuple(origins), insecure,
                       rate=per_second, burst=burst, certfile=Path(certfile) if certfile else None,
                       keyfile=Path(keyfile) if keyfile else None,
                       body_timeout_s=parse_timeout(body_timeout, "--body-timeout") if body_timeout else BODY_TIMEOUT_S,
                       send_timeout_s=parse_timeout(send_timeout, "--send-timeout") if send_timeout else SEND_TIMEOUT_S,
                       oauth=oauth, oauth_client=Path(oauth_client) if oauth_client else None)


def with_oauth(options: HttpOptions, configured: OAuthSettings | None) -> HttpOptions:
    """The options with the tools file's [server] OAuth settings where the flags give none."""
    flags = options.oauth
    if configured is None or flags is not None and flags.issuer != configured.issuer:
        return options
    if flags is None:
        return replace(options, oauth=configured)
    return replace(options, oauth=OAuthSettings(flags.issuer, flags.resource or configured.resource,
                                                flags.scopes or configured.scopes))


def exposure_problem(options: HttpOptions) -> str | None:
    """Why these options must not start: a non-loopback bind with nobody to authenticate, or OAuth
    without a canonical URI to bind tokens to."""
    if options.oauth is not None and options.oauth.resource is None and not options.loopback:
        return (f"--oauth-issuer on {options.host}:{options.port} needs --resource-uri (the URL clients reach "
                "this server at, which access tokens must name in aud)")
    if options.loopback or options.token_file is not None or options.oauth is not None or options.insecure_no_auth:
        return None
    return (f"refusing to serve {options.host}:{options.port} without authentication: anyone who can reach it "
            "could run the tools. Give --token-file FILE (bearer tokens) or --oauth-issuer URL, bind 127.0.0.1, "
            "or, behind a proxy that authenticates, --insecure-no-auth")


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
    """Bearer tokens, one a line (`NAME: TOKEN` names one), from a file only its owner can read;
    re-read when it changes (rotation)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.signature: tuple[int, ...] | None = None
        self.tokens: list[binding.Token] = []
        self.current()                    # a bad file refuses to start

    def current(self) -> list[binding.Token]:
        signature = file_signature(self.path)
        if signature != self.signature:
            self.signature, self.tokens = signature, self._read()
        return self.tokens

    def _read(self) -> list[binding.Token]:
        fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            if st.st_mode & 0o077 or st.st_uid != os.geteuid():
                raise signing.SecretFileError(f"{self.path}: a token file must be owned by this user and "
                                              f"not readable by others (chmod 600 {self.path})")
            tokens = binding.parse_tokens(os.read(fd, 1 << 20).decode("utf-8", "replace"))
        finally:
            os.close(fd)
        if not tokens or any(len(t.secret) < 16 for t in tokens):
            raise signing.SecretFileError(f"{self.path}: give one token of at least 16 characters a line "
                                          "(NAME: TOKEN to name it)")
        if bad := next((t.name for t in tokens if t.name is not None and not binding.TOKEN_NAME.match(t.name)), None):
            raise signing.SecretFileError(f"{self.path}: token name {bad!r} must be 1-64 characters of "
                                          "A-Z a-z 0-9 _ . @ -")
        return tokens


class InTransit:
    """The bytes of request bodies still arriving, counted across every connection of a server.

    A body holds no request slot until it is whole, so this is what bounds the memory that many
    slow (but moving) bodies hold together: past `limit`, a body's next chunk is refused with 503.
    """

    def __init__(self, limit: int = BODIES_IN_TRANSIT) -> None:
        self.limit, self.held = limit, 0


async def read_body(receive: Receive, limit: int, timeout: float,
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


class Gate:
    """The checks every request passes before its body is read, and its body's reading."""

    def __init__(self, http: HttpOptions, resource: str | None = None) -> None:
        """`resource`: this server's canonical URI, which OAuth access tokens must name in `aud`."""
        self.http = http
        self.tokens = TokenFile(http.token_file) if http.token_file is not None else None
        self.client = TokenFile(http.oauth_client) if http.oauth_client is not None else None
        self.oauth = (Verifier(http.oauth, resource, client=self._client if self.client else None)
                      if http.oauth is not None and resource is not None else None)
        self.rates = RateLimit(http.rate, http.burst) if http.rate is not None else None
        self.transit = InTransit()

    async def identity(self, headers: dict[str, str]) -> identity.Identity | binding.Refusal:
        """Who sent a request: the token-file line its bearer token is, else the identity of a valid
        OAuth access token; nobody told apart (`ANONYMOUS`) when neither is configured; else 401
        (403 `insufficient_scope` for a valid access token without a scope --oauth-scope requires)."""
        if self.tokens is None and self.oauth is None:
            return identity.ANONYMOUS
        given = binding.presented(headers.get("authorization"))
        token = binding.token_match(given, self._tokens()) if given is not None and self.tokens is not None else None
        if token is not None:
            return identity.bearer(token.secret, token.name)
        reason, metadata = None, None
        if self.oauth is not None:
            metadata = self.oauth.metadata_url
            required = self.oauth.settings.scopes
            try:
                who = await self.oauth.identity(given) if given is not None else None
            except OAuthError as exc:
                who, reason = None, str(exc)
                log(f"mcpwrap: access token refused: {reason}", "info")
            if who is not None and not set(required) <= who.scopes:
                return binding.unauthorized("insufficient_scope", metadata, required)
            if who is not None:
                return who
        return binding.unauthorized("invalid_token" if "authorization" in headers else None, metadata,
                                    self.oauth.settings.scopes if self.oauth is not None else (), reason)

    def _client(self) -> tuple[str, str]:
        """The client id and secret of --oauth-client-file's first line (re-read when it changes)."""
        assert self.client is not None
        try:
            first = self.client.current()[0]
        except (OSError, signing.SecretFileError) as exc:
            raise OAuthError(f"cannot read --oauth-client-file: {exc}") from None
        if first.name is None:
            raise OAuthError(f"{self.client.path}: give the client's credentials as CLIENT_ID: SECRET")
        return first.name, first.secret.decode()

    def _tokens(self) -> list[binding.Token]:
        assert self.tokens is not None
        try:
            return self.tokens.current()
        except (OSError, signing.SecretFileError) as exc:
            log(f"mcpwrap: cannot read the token file, refusing every request: {exc}", "error")
            return []

    def metadata(self, scope: Scope) -> bytes | None:
        """The RFC 9728 protected-resource metadata, for a GET of its well-known path (with or without
        the resource's path after it); None for any other request."""
        if self.oauth is None or scope["method"] != "GET" or not scope["path"].startswith(WELL_KNOWN):
            return None
        suffix = scope["path"][len(WELL_KNOWN):].rstrip("/")
        if suffix not in ("", urllib.parse.urlsplit(self.oauth.resource).path.rstrip("/")):
            return None
        return jsonrpc.encode(self.oauth.metadata())

    def refusal(self, scope: Scope, headers: dict[str, str]) -> binding.Refusal | None:
        """Path, Origin, Host, method, Accept: all before a byte of the body is read (the credential:
        `identity`)."""
        if scope["path"].rstrip("/") != ENDPOINT:
            return binding.Refusal(404, f"Not Found: the MCP endpoint is {ENDPOINT}")
        refusal = (binding.origin_refusal(headers.get("origin"), self.http.allowed_origins)
                   or binding.host_refusal(headers.get("host"), self.http.loopback, self.http.allowed_origins))
        if refusal is None and scope["method"] not in ("POST", "GET", "DELETE"):
            refusal = binding.Refusal(405, "Method Not Allowed", headers=(("allow", "POST, GET, DELETE"),))
        return refusal or binding.accept_refusal(scope["method"], headers.get("accept"))

    def throttle(self, scope: Scope, headers: dict[str, str], in_session: bool) -> binding.Refusal | None:
        """--rate, per client: a legacy session (`in_session`: the request names one of its sender's) by
        its id; anyone else by bearer token, else by peer address."""
        if self.rates is None:
            return None
        client = scope.get("client")
        key = (("session", headers.get("mcp-session-id")) if in_session else
               ("token", headers["authorization"]) if "authorization" in headers and (self.tokens or self.oauth) else
               ("peer", client[0] if client else ""))
        wait = self.rates.take(key)
        if not wait:
            return None
        return binding.Refusal(429, f"Too Many Requests: at most {self.http.rate:g} a second (bursts of "
                                    f"{self.http.burst}); try again later",
                               headers=(("retry-after", str(max(1, math.ceil(wait)))),))

    def forget(self, session_id: str) -> None:
        """An ended session's rate bucket."""
        if self.rates is not None:
            self.rates.forget(("session", session_id))

    async def body(self, headers: dict[str, str], receive: Receive) -> bytes | binding.Refusal | None:
        """A POST's whole body, a refusal, or None when its client left before the end (no request)."""
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return binding.Refusal(415, "Unsupported Media Type: POST a JSON-RPC message as application/json")
        return await read_body(receive, self.http.max_body, self.http.body_timeout_s, self.transit)


async def respond(send: AsgiSend, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())] if body else []
    await send({"type": "http.response.start", "status": status, "headers": head + (headers or [])})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def refuse(send: AsgiSend, refusal: binding.Refusal, request_id: RequestId | None = None) -> None:
    headers = [(k.encode(), v.encode()) for k, v in refusal.headers]
    await respond(send, refusal.status, jsonrpc.encode(refusal.body(request_id)), headers)
