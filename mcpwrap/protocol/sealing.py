"""Signed MRTR ``requestState`` tokens: :func:`seal` makes one, :func:`unseal` checks one. Pure.

Token: ``"v1." + B64(payload) + "." + B64(HMAC-SHA256(key, "v1." + B64(payload)))`` where B64 is
base64url without padding and payload is the canonical JSON (orjson, sorted keys) of the caller's
claims plus ``exp`` (expiry, seconds since the epoch) and a random ``nonce``; a non-empty ``bound``
(the requestor's principal) is appended to the MAC input after a NUL and travels nowhere. The token
is attacker-controlled input: ``unseal`` parses strictly (canonical base64 only, so no two strings
verify as the same token), compares MACs in constant time, and raises nothing but
:class:`StateError`, whose ``str()`` is generic and whose ``.reason`` is the diagnostic for stderr,
in words (what failed: the format, the signature or identity, the expiry), never a claim key.

The keys come in as a value (:class:`Keys`): where they are kept, and how long a retired one still
verifies, is ``state.signing``'s. Nothing here reads a clock or a file: ``now`` is always passed in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

DEFAULT_STATE_TTL_S: float = 600.0  # a question outstanding longer than this is asked again
MAX_TOKEN_CHARS = 64 * 1024  # longer requestStates are refused before any decoding
MAX_NONCE_CHARS = 128  # ours are 22; anything longer is not one of ours
_PREFIX = "v1."
_B64URL = re.compile(r"[A-Za-z0-9_-]+")


class Keys(Protocol):
    """What sealing needs of a keyring: the key that signs, and the keys that verify at ``now``."""

    @property
    def current(self) -> bytes: ...

    def verifying_keys(self, now: float) -> tuple[bytes, ...]: ...


class StateError(Exception):
    """A requestState failed; str() is generic (for the client), ``.reason`` is for stderr."""

    def __init__(self, reason: str) -> None:
        super().__init__("invalid or expired requestState")
        self.reason = reason


@dataclass(frozen=True)
class Unsealed:
    """A verified requestState: the caller's claims, and the nonce and expiry that make it one-time."""

    claims: dict[str, Any]
    nonce: str
    expires_at: float


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    """Strict decode: the alphabet only, and only the canonical encoding of its bytes."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise StateError("malformed base64")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64url(data) != text:  # stray low bits in the last char would alias another token
        raise StateError("non-canonical base64")
    return data


def _mac(key: bytes, signing_input: str, bound: str) -> bytes:
    """The MAC over the token's text and, after a NUL no token text holds, what it is `bound` to."""
    extra = b"\0" + bound.encode() if bound else b""
    return hmac.new(key, signing_input.encode("ascii") + extra, hashlib.sha256).digest()


def digest(value: Any) -> str:
    """SHA-256 of canonical JSON, so equal arguments bind equally whatever the key order."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def seal(
    keyring: Keys, claims: Mapping[str, Any], now: float, ttl_s: float = DEFAULT_STATE_TTL_S,
    bound: str = "",
) -> str:
    """Sign ``claims`` for ``ttl_s`` seconds; 'exp' and 'nonce' are reserved. The MAC also covers
    ``bound`` (e.g. the requestor's principal), which the token does not carry: only an
    :func:`unseal` given the same ``bound`` verifies it."""
    if "exp" in claims or "nonce" in claims:
        raise ValueError("'exp' and 'nonce' are reserved requestState claims")
    payload = {**claims, "exp": now + ttl_s, "nonce": secrets.token_urlsafe(16)}
    signing_input = _PREFIX + _b64url(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS))
    token = signing_input + "." + _b64url(_mac(keyring.current, signing_input, bound))
    if len(token) > MAX_TOKEN_CHARS:
        raise ValueError(f"requestState of {len(token)} chars exceeds {MAX_TOKEN_CHARS}")
    return token


def _unseal(keyring: Keys, token: str, now: float, bound: str) -> Unsealed:
    if not isinstance(token, str):
        raise StateError("requestState is not a string")
    if len(token) > MAX_TOKEN_CHARS:
        raise StateError(f"requestState longer than {MAX_TOKEN_CHARS} chars")
    parts = token.split(".")
    if len(parts) != 3 or parts[0] + "." != _PREFIX:
        raise StateError("not a v1 requestState (VERSION.PAYLOAD.MAC)")
    _, payload_b64, mac_b64 = parts
    payload_raw, mac = _unb64url(payload_b64), _unb64url(mac_b64)
    signing_input = _PREFIX + payload_b64
    # Try every key, no early exit: how many keys exist is public, which one matched is not.
    keys = keyring.verifying_keys(now)
    if not any([hmac.compare_digest(_mac(key, signing_input, bound), mac) for key in keys]):
        raise StateError("bad signature: tampered with, signed with another or a retired secret, "
                         "or issued to another identity (token, client certificate) than this request's")
    try:
        payload = orjson.loads(payload_raw)
    except orjson.JSONDecodeError:
        raise StateError("signed payload is not JSON") from None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    nonce = payload.get("nonce") if isinstance(payload, dict) else None
    if isinstance(exp, bool) or not isinstance(exp, (int, float)) or not isinstance(nonce, str) \
            or not 0 < len(nonce) <= MAX_NONCE_CHARS:
        raise StateError("its signed payload lacks its expiry or its one-time nonce")
    if not exp > now:
        raise StateError(f"it expired {now - exp:.0f}s ago (a question is answered within its time to live)")
    return Unsealed({k: v for k, v in payload.items() if k not in ("exp", "nonce")}, nonce, float(exp))


def unseal(keyring: Keys, token: str, now: float, bound: str = "") -> Unsealed:
    """Verify a token sealed with this ``bound`` and return its claims; any failure at all is a StateError."""
    try:
        return _unseal(keyring, token, now, bound)
    except StateError:
        raise
    except Exception as exc:  # the input is hostile: no other exception may escape
        raise StateError(f"unexpected {type(exc).__name__} while verifying") from None
