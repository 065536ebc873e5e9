"""The files and directories a command line names, checked before anything starts.

A server that starts on a token file it cannot read answers 401 to everything, forever; one whose
state directory cannot be made fails its first task. So `serve` (and `client-config --token-file`)
refuse to start instead, with exit status 3, the path, what is wrong with it and the fix:
`--token-file` must be a readable regular file holding a token line (held to the server's own
rules, `serve.http_gate.TokenFile`); `--certfile` and `--keyfile` readable files that make a TLS
context; `--secret-file` (or MCPWRAP_SECRET_FILE) a regular file, or a path where one can be
created; `--state-dir` (or MCPWRAP_STATE_DIR) a directory this user can write, or one that can
be created; the audit trail (`--audit`, `[server] audit`) a private file this user can append to,
or one it can create. The tools file has its own (`config.load`, FILE:1:1). Only stat-level checks run for
stdio, so the way to the first answer imports nothing more.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from mcpwrap.cli.common import EXIT_CONFIG, fail

NEW_TOKEN = "(umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(32))' >> {path})"


def readable_file(path: Path, option: str, fix: str) -> None:
    """Refuse a path that is not a regular file this user can open for reading."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        fail(f"{option} {path}: {exc.strerror.lower() if exc.strerror else exc}; {fix}", EXIT_CONFIG)
    try:
        kind = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(kind):
        fail(f"{option} {path}: {'a directory' if stat.S_ISDIR(kind) else 'not a regular file'}; {fix}", EXIT_CONFIG)


def _creatable(path: Path) -> str | None:
    """Why `path` cannot be created by this user: its nearest existing ancestor is no writable directory."""
    for parent in path.absolute().parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                return f"{parent} is not a directory"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"{parent} is not writable by this user"
            return None
    return None


def writable_dir(path: Path, option: str) -> None:
    """Refuse a state directory that is not, or cannot become, a directory this user can write."""
    fix = "give a directory this user can write (it holds task records, spooled output and caches)"
    if os.path.lexists(path):
        if not path.is_dir():
            fail(f"{option} {path}: not a directory; {fix}", EXIT_CONFIG)
        if not os.access(path, os.W_OK | os.X_OK):
            fail(f"{option} {path}: not writable by this user; {fix}", EXIT_CONFIG)
    elif (why := _creatable(path)) is not None:
        fail(f"{option} {path}: cannot be created ({why}); {fix}", EXIT_CONFIG)


def secret_file(path: Path, option: str) -> None:
    """Refuse a secret file that is no regular file, or that `serve` could not create when a tool needs it."""
    fix = f"give the path of a file (`mcpwrap secret init --secret-file {path}` creates it now)"
    if os.path.lexists(path):
        readable_file(path, option, fix)
    elif (why := _creatable(path)) is not None:
        fail(f"{option} {path}: cannot be created ({why}); {fix}", EXIT_CONFIG)


def audit_file(path: Path, option: str) -> None:
    """Refuse an audit trail that cannot be opened for appending (created 0600 if need be), or that
    is not ours and private (`state.durable.open_private`)."""
    from mcpwrap.state.durable import UnsafePathError, open_private

    fix = "give a file this user can append to (it is created 0600), in a directory that exists"
    try:
        os.close(open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT))
    except OSError as exc:
        fail(f"{option} {path}: {exc.strerror.lower() if exc.strerror else exc}; {fix}", EXIT_CONFIG)
    except UnsafePathError as exc:
        fail(f"{option} {exc}", EXIT_CONFIG)


def token_file(path: Path, option: str = "--token-file") -> list[bytes]:
    """The tokens (secrets, without their names) of a token file, held to the server's rules; a refusal
    with the fix otherwise."""
    from mcpwrap.serve import http_gate
    from mcpwrap.state import signing

    readable_file(path, option, "create it with one bearer token of at least 16 characters a line, mode 0600: "
                  + NEW_TOKEN.format(path=path))
    try:
        tokens = http_gate.TokenFile(path).current()
    except (OSError, signing.SecretFileError) as exc:
        fail(f"{option}: {exc}", EXIT_CONFIG)
    if not tokens:                       # the file went away since `readable_file` looked
        fail(f"{option} {path}: no token line; add one: {NEW_TOKEN.format(path=path)}", EXIT_CONFIG)
    return [t.secret for t in tokens]


def http_files(remote: Any) -> None:
    """The files `serve --http` names: the token file, then the certificate and key (and that they make TLS)."""
    from mcpwrap.serve import http_gate

    if remote.token_file is not None:
        token_file(remote.token_file)
    if remote.oauth_client is not None:
        readable_file(remote.oauth_client, "--oauth-client-file",
                      "create it, mode 0600, with one line CLIENT_ID: SECRET (the client the issuer lets introspect tokens)")
        token_file(remote.oauth_client, "--oauth-client-file")
        if http_gate.TokenFile(remote.oauth_client).current()[0].name is None:
            fail(f"--oauth-client-file {remote.oauth_client}: give one line CLIENT_ID: SECRET (the client the issuer "
                 "lets introspect tokens)", EXIT_CONFIG)
    for option, path, what in (("--certfile", remote.certfile, "the PEM certificate chain"),
                               ("--keyfile", remote.keyfile, "the PEM private key of --certfile")):
        if path is not None:
            readable_file(path, option, f"give {what}, readable by this user")
    if (problem := http_gate.tls_problem(remote)) is not None:
        fail(problem, EXIT_CONFIG)


def named(given: str | None, option: str, variable: str) -> str | None:
    """How the user named a path: the option, or its MCPWRAP_* variable; None when it is the default."""
    if given:
        return option
    return variable if os.environ.get(variable) else None
