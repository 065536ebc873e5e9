"""An OAuth 2.1 resource server for `serve --http --oauth-issuer URL`: who an access token says its bearer is.

MCP authorization (2025-06-18 and later): mcpwrap publishes RFC 9728 protected-resource metadata
naming its one authorization server, and validates the JWT access tokens that server issues, locally.
The issuer's keys are found by RFC 8414 metadata (else OpenID Connect discovery): its `jwks_uri`. A
token is accepted only when
- its header names an asymmetric algorithm (never `none`, never HS*: a public key is no shared secret)
  that is the algorithm of the issuer's key named by its `kid`;
- its signature verifies against that key (PyJWT on `cryptography`; nothing here parses JOSE);
- `iss` is the issuer, `aud` names this server's canonical URI (RFC 8707: a token minted for another
  resource is refused), `exp` is to come and `nbf` has passed (LEEWAY_S either way), `sub` is there.
Its identity (`protocol/identity.oauth`) is its issuer and subject, with its `scope` (or `scp`) and
`groups` claims for `allow`.

The keys are fetched off the event loop (a worker thread, stdlib urllib, FETCH_TIMEOUT_S, MAX_DOCUMENT
bytes, https only but for loopback hosts), then cached: a token naming a `kid` the cache lacks fetches
them again (the issuer rotated), at most REFRESH_BURST times per REFRESH_WINDOW_S whatever tokens
arrive, one fetch at a time; the set fetched replaces the cache, so a key the issuer removed is refused
from then on; a set older than KEYS_MAX_AGE_S is fetched again before use. Never a fetch per request.
A token once accepted is remembered (by its SHA-256, at most ACCEPTED, the oldest forgotten first) with
its identity, and accepted again without a second check while its `exp` (with LEEWAY_S) is to come and
the key set it was checked against is the one in use and not due for a fetch: a fetched set forgets
every token checked against the one before, so a removed key's tokens are refused.

A token that is no JWT is opaque: with client credentials (`--oauth-client-file`) mcpwrap asks the
issuer's RFC 7662 `introspection_endpoint` (from its metadata; HTTP Basic client authentication, at
most INTROSPECTIONS at a time), and accepts it only when the answer says `active`, names the issuer
(if it names one), this server's canonical URI in `aud`, a `sub`, and an `exp` to come. An accepted
opaque token is remembered like a JWT, for at most INTROSPECTION_TTL_S (and never past its `exp`): a
token the issuer revokes is refused within that time. Without client credentials, opaque tokens are
refused.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import time
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable
from typing import Any

import jwt
import trio

from mcpwrap.config.model import OAuthSettings
from mcpwrap.protocol import identity
from mcpwrap.protocol.http_binding import LOOPBACK_HOSTS
from mcpwrap.protocol.identity import Identity

FETCH_TIMEOUT_S = 10.0
MAX_DOCUMENT = 256 * 1024         # bytes of a metadata document or key set
LEEWAY_S = 30                     # clock skew allowed on exp and nbf
REFRESH_BURST = 5                 # key-set fetches for unknown kids, at most this many...
REFRESH_WINDOW_S = 60.0           # ...in this window
KEYS_MAX_AGE_S = 900.0            # a key set older than this is fetched again before use
ACCEPTED = 1024                   # tokens remembered as accepted
INTROSPECTION_TTL_S = 60.0        # an accepted opaque token is asked about again after this
INTROSPECTIONS = 4                # introspection requests in flight at once
ASYMMETRIC = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES256K", "ES384", "ES512",
                        "EdDSA", "Ed25519"})
WELL_KNOWN = "/.well-known/oauth-protected-resource"

Fetch = Callable[[str], dict[str, Any]]
Credentials = Callable[[], tuple[str, str]]   # the client id and secret mcpwrap introspects with


class OAuthError(Exception):
    """Why a token (or the issuer's metadata) was refused, said to the log and the client."""


def fetch_json(url: str, form: dict[str, str] | None = None, client: tuple[str, str] | None = None) -> dict[str, Any]:
    """A JSON object over https (http for a loopback host), bounded in time and size: a GET, or a POST of
    `form` authenticated as `client` (HTTP Basic, RFC 6749 section 2.3.1). Blocking: run it in a thread."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" and not (parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS):
        raise OAuthError(f"{url}: the authorization server's documents are fetched over https only")
    headers = {"accept": "application/json"}
    if client is not None:
        basic = ":".join(urllib.parse.quote_plus(part, safe="") for part in client).encode()
        headers["authorization"] = "Basic " + base64.b64encode(basic).decode()
    body = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:   # noqa: S310 (scheme checked)
            data = response.read(MAX_DOCUMENT + 1)
    except OSError as exc:
        raise OAuthError(f"cannot fetch {url}: {exc}") from None
    if len(data) > MAX_DOCUMENT:
        raise OAuthError(f"{url}: larger than {MAX_DOCUMENT} bytes")
    try:
        document = json.loads(data)
    except ValueError:
        raise OAuthError(f"{url}: not JSON") from None
    if not isinstance(document, dict):
        raise OAuthError(f"{url}: not a JSON object")
    return document


def discovery_urls(issuer: str) -> list[str]:
    """Where the issuer's metadata is: RFC 8414 (the well-known part before the issuer's path), then OpenID."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    return [f"{origin}/.well-known/oauth-authorization-server{path}", f"{origin}{path}/.well-known/openid-configuration"]


def metadata_url(resource: str) -> str:
    """RFC 9728 section 3.1: the well-known path between the resource's host and its path."""
    parts = urllib.parse.urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}"


class Keys:
    """The issuer's signing keys by `kid`, fetched in a worker thread and refreshed as the module says."""

    def __init__(self, issuer: str, fetch: Fetch = fetch_json, clock: Callable[[], float] = time.monotonic) -> None:
        self.issuer, self.fetch, self.clock = issuer, fetch, clock
        self.metadata: dict[str, Any] | None = None
        self.keys: dict[str | None, jwt.PyJWK] = {}
        self.fetched_at: float | None = None
        self.refreshes: deque[float] = deque()
        self.lock = trio.Lock()

    def fresh(self) -> bool:
        """Whether the key set in use was fetched, and not longer than KEYS_MAX_AGE_S ago."""
        return self.fetched_at is not None and self.clock() - self.fetched_at <= KEYS_MAX_AGE_S

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key `kid` names (the only key, when a token names none and the issuer has one)."""
        if not self.fresh() or (kid not in self.keys and self._may_refresh()):
            seen = self.fetched_at
            async with self.lock:
                await self._refresh(seen)
        if kid is None and len(self.keys) == 1:
            return next(iter(self.keys.values()))
        return self.keys.get(kid)

    def _may_refresh(self) -> bool:
        now = self.clock()
        while self.refreshes and now - self.refreshes[0] > REFRESH_WINDOW_S:
            self.refreshes.popleft()
        return len(self.refreshes) < REFRESH_BURST

    async def _refresh(self, seen: float | None) -> None:
        if self.fetched_at != seen:       # another request refreshed while this one waited for the lock
            return
        self.refreshes.append(self.clock())
        self.fetched_at = self.clock()    # a failed fetch waits its turn too
        self.keys = await trio.to_thread.run_sync(self._fetch_keys, abandon_on_cancel=True)

    def _fetch_keys(self) -> dict[str | None, jwt.PyJWK]:
        """In a worker thread: the issuer's metadata (once), then its key set, signing keys only."""
        document = self.fetch(str(self.issuer_metadata()["jwks_uri"]))
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in document.get("keys", []) if isinstance(document.get("keys"), list) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError):
                continue                  # a key of a type this installation cannot use
            if key.algorithm_name in ASYMMETRIC:
                keys[entry.get("kid") if isinstance(entry.get("kid"), str) else None] = key
        return keys

    def issuer_metadata(self) -> dict[str, Any]:
        """The issuer's metadata (RFC 8414, else OpenID), fetched once; it names the issuer and a `jwks_uri`.
        Blocking: run it in a thread."""
        if self.metadata is None:
            self.metadata = self._discover()
        return self.metadata

    def _discover(self) -> dict[str, Any]:
        problems = []
        for url in discovery_urls(self.issuer):
            try:
                metadata = self.fetch(url)
            except OAuthError as exc:
                problems.append(str(exc))
                continue
            if metadata.get("issuer") != self.issuer:     # RFC 8414 section 3.3; OpenID Discovery 4.3
                problems.append(f"{url} names issuer {metadata.get('issuer')!r}, not {self.issuer!r}")
            elif isinstance(metadata.get("jwks_uri"), str):
                return metadata
            else:
                problems.append(f"{url} names no jwks_uri")
        raise OAuthError("cannot find the issuer's keys: " + "; ".join(problems))


class Verifier:
    """Validates an access token for one resource (its canonical URI) from one issuer."""

    def __init__(self, settings: OAuthSettings, resource: str, fetch: Fetch = fetch_json,
                 wall: Callable[[], float] = time.time, client: Credentials | None = None) -> None:
        """`client`: the credentials opaque tokens are introspected with (None: opaque tokens are refused)."""
        self.settings, self.resource, self.wall, self.client = settings, resource, wall, client
        self.metadata_url = metadata_url(resource)
        self.keys = Keys(settings.issuer, fetch)
        self.accepted: dict[bytes, tuple[Identity, float, dict[str | None, jwt.PyJWK] | None]] = {}
        self.introspecting = trio.CapacityLimiter(INTROSPECTIONS)

    def metadata(self) -> dict[str, Any]:
        """RFC 9728 protected-resource metadata."""
        document: dict[str, Any] = {"resource": self.resource, "authorization_servers": [self.settings.issuer],
                                    "bearer_methods_supported": ["header"]}
        if self.settings.scopes:
            document["scopes_supported"] = list(self.settings.scopes)
        return document

    async def identity(self, token: bytes) -> Identity:
        """The identity a valid access token carries; OAuthError saying why it is not one."""
        digest = hashlib.sha256(token).digest()
        known = self.accepted.get(digest)
        if known is not None:
            who, until, keys = known      # keys: the key set a JWT was checked against; None: introspected
            if self.wall() <= until and (keys is None or (keys is self.keys.keys and self.keys.fresh())):
                return who
            del self.accepted[digest]
        who, until, keys = await self._validate(token)
        if len(self.accepted) >= ACCEPTED:
            del self.accepted[next(iter(self.accepted))]
        self.accepted[digest] = (who, until, keys)
        return who

    async def _validate(self, token: bytes) -> tuple[Identity, float, dict[str | None, jwt.PyJWK] | None]:
        """The identity of a token checked from scratch, until when to remember it, and the key set it
        was checked against (None: introspected)."""
        text = token.decode("ascii", "replace")
        try:
            header = jwt.get_unverified_header(text)
        except jwt.PyJWTError:
            return (*await self._introspect(text), None)
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ASYMMETRIC:
            raise OAuthError(f"algorithm {alg!r} is not accepted (asymmetric signatures only)")
        try:
            key = await self.keys.key(kid if isinstance(kid, str) else None)
        except OAuthError as exc:
            raise OAuthError(f"cannot check the token: {exc}") from None
        if key is None or key.algorithm_name != alg:
            raise OAuthError("the token is not signed by a key of the issuer")
        try:
            claims = jwt.decode(text, key.key, algorithms=[alg], audience=self.resource, issuer=self.settings.issuer,
                                leeway=LEEWAY_S, options={"require": ["exp", "iss", "aud", "sub"]})
        except jwt.PyJWTError as exc:
            raise OAuthError(str(exc)) from None
        return self._identity(claims), float(claims["exp"]) + LEEWAY_S, self.keys.keys

    def _identity(self, claims: dict[str, Any]) -> Identity:
        return identity.oauth(self.settings.issuer, str(claims["sub"]), _names(claims.get("scope", claims.get("scp"))),
                              _names(claims.get("groups")))

    async def _introspect(self, token: str) -> tuple[Identity, float]:
        """RFC 7662: who the issuer says an opaque token's bearer is, and until when to believe it."""
        if self.client is None:
            raise OAuthError("not a JWT access token (opaque tokens need --oauth-client-file to be introspected)")
        try:
            metadata = await trio.to_thread.run_sync(self.keys.issuer_metadata, abandon_on_cancel=True)
            endpoint = metadata.get("introspection_endpoint")
            if not isinstance(endpoint, str):
                raise OAuthError("the issuer publishes no introspection_endpoint")
            ask = functools.partial(fetch_json, endpoint, {"token": token, "token_type_hint": "access_token"},
                                    self.client())
            answer = await trio.to_thread.run_sync(ask, limiter=self.introspecting, abandon_on_cancel=True)
        except OAuthError as exc:
            raise OAuthError(f"cannot introspect the token: {exc}") from None
        now, exp, audience = self.wall(), answer.get("exp"), answer.get("aud")
        if answer.get("active") is not True:
            raise OAuthError("the issuer says the token is not active")
        if answer.get("iss", self.settings.issuer) != self.settings.issuer:
            raise OAuthError(f"the token was issued by {answer.get('iss')!r}")
        if self.resource not in ([audience] if isinstance(audience, str) else audience or []):
            raise OAuthError("the token is not for this resource (aud)")
        if not isinstance(exp, int) or not isinstance(answer.get("sub"), str):
            raise OAuthError("the introspection answer names no exp or sub")
        if exp < now - LEEWAY_S or (isinstance(answer.get("nbf"), int) and answer["nbf"] > now + LEEWAY_S):
            raise OAuthError("the token has expired or is not yet valid")
        return self._identity(answer), min(float(exp), now + INTROSPECTION_TTL_S)


def _names(value: Any) -> frozenset[str]:
    """A claim of names: a space-separated string (`scope`) or an array of strings (`scp`, `groups`)."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(v for v in value if isinstance(v, str))
    return frozenset()
