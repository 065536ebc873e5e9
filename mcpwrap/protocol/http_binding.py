"""The Streamable HTTP binding's rules as data and pure functions: no sockets, no trio.

What a POST must carry and what status each answer gets, decided here so the
driver (`mcpwrap/serve/http.py`) only moves bytes. 2026-07-28 mirrors body fields
into headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, the last for every method
`NAME_SOURCE` lists, the tasks extension's included); a missing,
malformed or disagreeing header is -32020 with 400, because a load balancer
may have routed on the header while we would execute the body; a body that
lacks the version itself is the core's -32602, not a mismatch. `initialize`
sent with the modern envelope is a method 2026-07-28 removed: 404 / -32601.
Errors the spec gives an HTTP status get it; other JSON-RPC errors travel with
200, as the legacy revisions always did. A POST must accept both answer forms
(JSON and SSE), a GET the SSE stream, else 406 (no Accept header accepts all).
Origin and Host are checked against DNS rebinding, bearer tokens compared in
constant time; a refused credential gets RFC 6750's challenge (`unauthorized`).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mcpwrap.protocol import grammar
from mcpwrap.protocol.jsonrpc import Request
from mcpwrap.protocol.modern import VERSION_KEY, is_modern
from mcpwrap.protocol.revisions import ALL_VERSIONS
from mcpwrap.protocol.tools import ProtocolError

HEADER_MISMATCH = -32020
# modern error code -> HTTP status (2026-07-28: transports, basic/index and the schema's error types)
MODERN_STATUS = {-32700: 400, -32600: 400, -32601: 404, -32602: 400, -32020: 400, -32021: 400, -32022: 400,
                 -32603: 500}
# method -> the body field its Mcp-Name header mirrors: 2026-07-28 "Standard Request Headers", and the
# tasks extension's "Streamable HTTP: Routing Headers" (a task's requests routed by its id)
NAME_SOURCE = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
               "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
SHOWN = {"mcp-protocol-version": "MCP-Protocol-Version", "mcp-method": "Mcp-Method", "mcp-name": "Mcp-Name"}
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
SENTINEL = ("=?base64?", "?=")           # a value that is not plain ASCII travels base64-encoded between these
_VISIBLE = re.compile(r"^[\x20-\x7e]*$")


@dataclass(frozen=True)
class Refusal:
    """An HTTP answer decided before the core sees the message."""
    status: int
    message: str
    code: int = -32600
    headers: tuple[tuple[str, str], ...] = ()

    def body(self, request_id: Any = None) -> dict[str, Any]:
        """A JSON-RPC error; without an id, as the spec allows for transport-level refusals."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "error": {"code": self.code, "message": self.message}}
        if request_id is not None:
            message["id"] = request_id
        return message


def decode_value(value: str) -> str | None:
    """A mirrored header value, base64 sentinel decoded; None when it is malformed."""
    if not _VISIBLE.match(value):
        return None
    if not (value.startswith(SENTINEL[0]) and value.endswith(SENTINEL[1]) and len(value) >= len("".join(SENTINEL))):
        return grammar.header_value(value)
    try:
        return base64.b64decode(value[len(SENTINEL[0]):-len(SENTINEL[1])], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def check_modern_headers(headers: Mapping[str, str], request: Request) -> ProtocolError | None:
    """2026-07-28 request metadata headers against the body (the body stays the source of truth)."""
    meta = request.params.get("_meta")
    version = meta.get(VERSION_KEY) if isinstance(meta, dict) else None
    if not isinstance(version, str):
        return None                       # no version to compare with: the core rejects the body (-32602)
    expected: list[tuple[str, Any]] = [("mcp-protocol-version", version), ("mcp-method", request.method)]
    if request.method in NAME_SOURCE:
        expected.append(("mcp-name", request.params.get(NAME_SOURCE[request.method])))
    for name, body in expected:
        raw = headers.get(name)
        shown = SHOWN[name]
        if raw is None:
            return ProtocolError(HEADER_MISMATCH, f"Header mismatch: required header {shown} is missing")
        value = decode_value(raw) if name == "mcp-name" else grammar.header_value(raw)
        if value is None:
            return ProtocolError(HEADER_MISMATCH, f"Header mismatch: {shown} header is malformed")
        if value != body:
            return ProtocolError(HEADER_MISMATCH, f"Header mismatch: {shown} header value {value!r} does not "
                                 f"match body value {body!r}")
    return None


def removed_method_refusal(request: Request) -> Refusal | None:
    """`initialize` in a modern envelope: 2026-07-28 removed it, so it is an unknown method there."""
    if request.method == "initialize" and is_modern(request.method, request.params):
        return Refusal(404, "Method not found: initialize is not a 2026-07-28 method (send requests with "
                       "_meta directly, or initialize without the 2026-07-28 _meta)", -32601)
    return None


def accepts(accept: str, media_type: str) -> bool:
    """Whether an Accept header allows a media type: its most specific matching range decides, q=0 refuses."""
    ranks = {media_type: 2, media_type.split("/")[0] + "/*": 1, "*/*": 0}
    best, quality = -1, 0.0
    for item in accept.split(","):
        media_range, *params = (grammar.header_value(part).lower() for part in item.split(";"))
        if ranks.get(media_range, -1) > best:
            best, quality = ranks[media_range], _quality(params)
    return quality > 0


def _quality(params: list[str]) -> float:
    """A media range's weight; a malformed one (q=nan, q=1e3, q=٠.5) accepts nothing."""
    for name, _, value in (p.partition("=") for p in params):
        if grammar.header_value(name) == "q":
            return grammar.qvalue(value) or 0.0
    return 1.0


def accept_refusal(method: str, accept: str | None) -> Refusal | None:
    """406 unless the client accepts what it may get: JSON and SSE for a POST, SSE for a GET. No Accept
    header at all accepts anything (RFC 9110 §12.5.1), as plain HTTP clients expect."""
    needed = {"POST": ("application/json", "text/event-stream"), "GET": ("text/event-stream",)}.get(method, ())
    if accept is None or all(accepts(accept, t) for t in needed):
        return None
    return Refusal(406, f"Not Acceptable: a {method} must accept {' and '.join(needed)} (Accept: {accept!r})")


def legacy_version_refusal(headers: Mapping[str, str]) -> Refusal | None:
    """2025-06-18 on: an unsupported MCP-Protocol-Version is 400 (its absence means 2025-03-26)."""
    version = headers.get("mcp-protocol-version")
    if version is not None and grammar.header_value(version) not in ALL_VERSIONS:
        return Refusal(400, f"Unsupported MCP-Protocol-Version {grammar.header_value(version)!r}; supported: "
                       f"{', '.join(ALL_VERSIONS)}")
    return None


def status_of(message: Mapping[str, Any] | list[Any], modern: bool) -> int:
    """The HTTP status of a POST's one answer: an error's, for a modern peer; otherwise 200."""
    error = message.get("error") if isinstance(message, Mapping) else None
    if not modern or not isinstance(error, Mapping):
        return 200
    return MODERN_STATUS.get(error.get("code"), 200)   # type: ignore[arg-type]


def host_name(authority: str) -> str:
    """The host of a Host header or an origin's netloc, without port or brackets, lowercased."""
    return (urlsplit("//" + authority).hostname or "").lower()


def origin_refusal(origin: str | None, allowed: Iterable[str]) -> Refusal | None:
    """403 for a browser page from elsewhere (DNS rebinding); no Origin means no browser page."""
    if origin is None:
        return None
    allowed = list(allowed)
    if origin.rstrip("/") in (a.rstrip("/") for a in allowed):
        return None
    parts = urlsplit(origin)
    if not allowed and parts.scheme in ("http", "https") and (parts.hostname or "").lower() in LOOPBACK_HOSTS:
        return None
    return Refusal(403, f"Forbidden: Origin {origin!r} is not allowed (see --allowed-origin)")


def host_refusal(host: str | None, loopback_only: bool, allowed_origins: Iterable[str]) -> Refusal | None:
    """A server bound to loopback answers only to loopback names (or an allowed origin's host)."""
    if not loopback_only:
        return None
    name = host_name(host or "")
    if name in LOOPBACK_HOSTS or name in {host_name(urlsplit(o).netloc) for o in allowed_origins}:
        return None
    return Refusal(403, f"Forbidden: Host {host!r} is not a name of this loopback server")


@dataclass(frozen=True)
class Token:
    """A line of a token file: its secret, and the name before `: ` when the line has one."""
    secret: bytes
    name: str | None = None


TOKEN_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


def parse_tokens(text: str) -> list[Token]:
    """A token file: one token a line, `NAME: TOKEN` to name it (a line without `: ` is an unnamed
    token, as before names existed); blank lines and '#' comments are skipped."""
    tokens = []
    for line in (raw.strip() for raw in text.splitlines()):
        if line and not line.startswith("#"):
            name, named, secret = line.partition(": ")
            tokens.append(Token(secret.strip().encode(), name.strip()) if named else Token(line.encode()))
    return tokens


def presented(authorization: str | None) -> bytes | None:
    """The bearer token an Authorization header presents, if it presents one."""
    scheme, _, value = (authorization or "").partition(" ")
    return value.strip().encode("utf-8", "replace") if scheme.lower() == "bearer" and value.strip() else None


def token_match(given: bytes, tokens: Iterable[Token]) -> Token | None:
    """The token-file line `given` is, if any: every line is compared (constant time), so timing tells
    nothing about which one matched or failed."""
    found = None
    for token in tokens:
        if hmac.compare_digest(given, token.secret) and found is None:
            found = token
    return found


def unauthorized(error: str | None = None, metadata: str | None = None, scopes: Iterable[str] = (),
                 description: str | None = None) -> Refusal:
    """401 with an RFC 6750 challenge (403 for `insufficient_scope`); `metadata` is the RFC 9728
    protected-resource metadata URL an OAuth client starts from, `scopes` what the request needs."""
    params = [f'resource_metadata="{metadata}"' if metadata else 'realm="mcpwrap"']
    params += [f'error="{error}"'] if error else []
    params += [f'scope="{" ".join(scopes)}"'] if scopes else []
    challenge = (("www-authenticate", "Bearer " + ", ".join(params)),)
    if error == "insufficient_scope":
        return Refusal(403, f"Forbidden: {description or 'the access token lacks a scope this server requires'}",
                       headers=challenge)
    return Refusal(401, "Unauthorized: a valid bearer token is required"
                   + (f" ({description})" if description else ""), headers=challenge)
