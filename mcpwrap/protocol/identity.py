"""Who a request comes from, as far as mcpwrap can tell. Pure: no I/O.

An `Identity` is what a driver knows of a requestor: a stable `principal` string that
everything a request creates (a legacy HTTP session, a task record, a `requestState`) is
bound to, and whether requestors can be told apart at all (`identified`). Anything bound
to one principal answers another exactly as if it did not exist.

- stdio: `LOCAL_USER`. The one client is whoever started the process, as the user who owns
  the task store (0700, refused if not theirs) and can read it with `mcpwrap tasks` anyway.
- HTTP with `--token-file`: `bearer(token)`, a digest of the token (never the token itself:
  it is stored in task records). Each line of the token file is its own credential, so a
  client that moves to a new line (rotation) leaves its sessions and tasks behind.
- HTTP without authentication (loopback without a token file, `--insecure-no-auth`):
  `ANONYMOUS`, the local principal, but nobody can be told apart: `tasks.list` is not
  declared and `tasks/list` is not served.

- HTTP with `--oauth-issuer`: `oauth(issuer, subject, ...)`, bound to the token's `iss` and `sub`
  (a digest of both), not to the token: a client whose access token is refreshed keeps its
  sessions and tasks.

Beside the principal, an identity carries what `allow` rules (`access.py`) match: the name of
its token-file line, its OAuth subject, scopes and groups. The local user (`local`) owns the
process and the tools file: every rule is satisfied for it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

LOCAL = "local"
_BEARER_CONTEXT = b"mcpwrap bearer principal v1\0"
_OAUTH_CONTEXT = b"mcpwrap oauth principal v1\0"


@dataclass(frozen=True)
class Identity:
    principal: str = LOCAL
    identified: bool = True               # requestors are told apart: a list of "their" tasks means something
    local: bool = False                   # the user who owns the process (stdio, the CLI): `allow` does not apply
    name: str | None = None               # the token file's `name: token` line it presented
    subject: str | None = None            # an OAuth access token's `sub`
    scopes: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()


LOCAL_USER = Identity(local=True)
ANONYMOUS = Identity(LOCAL, identified=False)


def label(who: Identity) -> str:
    """How the audit trail names an identity: `token:NAME` or `user:SUBJECT` (the name a person gave
    it), "local" for the user who owns the process, else its principal (an unnamed token's digest)."""
    if who.name is not None:
        return f"token:{who.name}"
    if who.subject is not None:
        return f"user:{who.subject}"
    return "local" if who.local else who.principal


def bearer(token: bytes, name: str | None = None) -> Identity:
    """The identity of a bearer token (a line of the token file, `name` if the line has one):
    its principal is 128 bits of the token's SHA-256 (domain-separated)."""
    return Identity("bearer:" + hashlib.sha256(_BEARER_CONTEXT + token).hexdigest()[:32], name=name)


def oauth(issuer: str, subject: str, scopes: frozenset[str] = frozenset(),
          groups: frozenset[str] = frozenset()) -> Identity:
    """The identity of a validated OAuth access token: its principal is 128 bits of the SHA-256 of
    its issuer and subject (domain-separated), the same for every token of that subject."""
    digest = hashlib.sha256(_OAUTH_CONTEXT + issuer.encode() + b"\0" + subject.encode()).hexdigest()[:32]
    return Identity("oauth:" + digest, subject=subject, scopes=scopes, groups=groups)


def visible(owner: str | None, viewer: str | None) -> bool:
    """Whether what `owner` created exists for `viewer`. `viewer` None is the local user's own
    `mcpwrap tasks` CLI, which sees everything in the store; `owner` None is a record written
    before principals existed, which is the local user's."""
    return viewer is None or hmac.compare_digest(owner or LOCAL, viewer)
