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

A later identity (OAuth subjects, named token lines) is another constructor of the same value.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

LOCAL = "local"
_BEARER_CONTEXT = b"mcpwrap bearer principal v1\0"


@dataclass(frozen=True)
class Identity:
    principal: str = LOCAL
    identified: bool = True               # requestors are told apart: a list of "their" tasks means something


LOCAL_USER = Identity()
ANONYMOUS = Identity(LOCAL, identified=False)


def bearer(token: bytes) -> Identity:
    """The identity of a bearer token: 128 bits of its SHA-256 (domain-separated)."""
    return Identity("bearer:" + hashlib.sha256(_BEARER_CONTEXT + token).hexdigest()[:32])


def visible(owner: str | None, viewer: str | None) -> bool:
    """Whether what `owner` created exists for `viewer`. `viewer` None is the local user's own
    `mcpwrap tasks` CLI, which sees everything in the store; `owner` None is a record written
    before principals existed, which is the local user's."""
    return viewer is None or hmac.compare_digest(owner or LOCAL, viewer)
