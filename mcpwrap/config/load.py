"""The tools file: TOML in, frozen dataclasses (`config.model`) out, every problem located.

Contract: `load(path)` returns a `Config` or raises `ConfigError` whose
`problems` are `Problem(path, line, col, message)` values, printed as
`FILE:LINE:COL: message`. Unknown keys are errors (a typo must never silently
do nothing). Nothing here runs a command or speaks MCP; the JSON Schema
fragments are checked by `config.schema`.

This module reads the file and the [server] table; each other table has its reader:
`config.tools` ([tools.NAME] and the confinement keys), `config.content` ([spool],
[resources.NAME], [prompts.NAME]), on the shared `config.reader`.
"""

from __future__ import annotations

import errno
import gc
import hashlib
import os
import re
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcpwrap.config.content import read_prompts, read_resources, read_spool
from mcpwrap.config.model import Audit as Audit, Config, OAuthSettings, Problem
# Not used here: named for the modules that reach them as `config.load.Tool` (serve/, tasks/) and `config.Toolset`.
from mcpwrap.config.model import Spool as Spool, Tool as Tool, Toolset as Toolset
from mcpwrap.config.reader import Reader, is_table, parse_duration, parse_size
from mcpwrap.config.tools import (CONFINEMENT_KEYS, env_inherit, limits_table, read_allow, read_tool, sandbox_table,
                                  where_it_runs)

MAX_FILE_BYTES = 32 * 1024 * 1024        # a tools file past this is refused unread (a log linked by mistake)
SERVER_KEYS = ({"name", "version", "title", "instructions", "cwd", "env", "timeout", "max_output", "allow",
                "oauth_issuer", "resource_uri", "oauth_scopes", "audit", "audit_required", "audit_max_bytes"}
               | CONFINEMENT_KEYS)


class ConfigError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


def _toml_syntax_problem(path: Path, text: str, exc: tomllib.TOMLDecodeError) -> Problem:
    match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
    message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(exc))
    if match:
        return Problem(path, int(match[1]), int(match[2]), f"TOML syntax: {message}")
    last_line = text.rsplit("\n", 1)[-1]
    return Problem(path, text.count("\n") + 1, len(last_line) + 1, f"TOML syntax: {message} (at end of file)")


def load(path: Path, schemas_known_good: Callable[[str], bool] | None = None) -> Config:
    """Read and check a tools file; raise ConfigError listing every problem found.

    `schemas_known_good(digest)` may vouch that these exact bytes already passed the
    JSON Schema checks, which then are skipped: they need jsonschema, the largest
    import there is, and `serve` should not pay for it before its first call.
    """
    path = Path(path)
    try:
        raw = read_regular_file(path, MAX_FILE_BYTES)
    except OSError as exc:
        raise ConfigError([Problem(path, 1, 1, f"cannot read tools file: {exc.strerror}")]) from None
    return loads(raw, path, schemas_known_good)


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else (a FIFO, a device, a larger
    file, or one that grows past `limit` as it is read) is refused before a read can block or grow."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        with open(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def digest_of(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def loads(raw: bytes, path: Path, schemas_known_good: Callable[[str], bool] | None = None) -> Config:
    """Without the cyclic GC meanwhile: a large file makes a million objects and no cycle, and
    collecting while they are made costs a quarter of the load."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _loads(raw, path, schemas_known_good)
    except RecursionError:                # tomllib (and a schema walk) recurse per level of nesting
        raise ConfigError([Problem(path, 1, 1, "nested too deeply: arrays and tables of a tools file "
                                               "nest a few levels, not hundreds")]) from None
    finally:
        if collecting:
            gc.enable()


def _loads(raw: bytes, path: Path, schemas_known_good: Callable[[str], bool] | None) -> Config:
    try:
        text = raw.decode("utf-8")
        document = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError([Problem(path, 1, 1, f"not UTF-8: {exc.reason}")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([_toml_syntax_problem(path, text, exc)]) from None
    digest = digest_of(raw)
    reader = Reader(path, text, check_schemas=not (schemas_known_good and schemas_known_good(digest)))
    config = _read_document(reader, document, path, digest)
    reader.check_schemas_now()
    if reader.problems:
        raise ConfigError(sorted(reader.problems, key=lambda p: (p.line, p.col)))
    return config


def _read_document(r: Reader, doc: dict[str, Any], path: Path, digest: str) -> Config:
    r.keys(doc, (), {"server", "tools", "resources", "prompts", "spool"})
    server = r.typed(doc, (), "server", dict, {})
    r.keys(server, ("server",), SERVER_KEYS)
    key = ("server",)
    base_dir = path.resolve().parent
    server_cwd, server_env = where_it_runs(r, server, key, {"cwd": base_dir, "env": {}}, base_dir)
    defaults = {
        "cwd": server_cwd,
        "env": server_env,
        "timeout": r.converted(server, key, "timeout", parse_duration, 60.0),
        "max_output": r.converted(server, key, "max_output", parse_size, 1024 * 1024),
        "sandbox": sandbox_table(r, server, key),
        "limits": limits_table(r, server, key) or {},
        "env_inherit": env_inherit(r, server, key, True),
        "allow": read_allow(r, server, key, None),
    }
    tools_table = r.typed(doc, (), "tools", dict, {})
    if not (tools_table or doc.get("resources") or doc.get("prompts")):
        r.problem(("tools",), "no tools defined: add a [tools.NAME] table")
    tools = [read_tool(r, name, table, defaults, base_dir)
             for name, table in tools_table.items() if is_table(r, ("tools", name), table)]
    resources = read_resources(r, doc, defaults, base_dir)
    prompts = read_prompts(r, doc, defaults, base_dir, {res.uri for res in resources if res.uri})
    return Config(
        path=path,
        name=r.typed(server, key, "name", str, path.stem),
        version=r.typed(server, key, "version", str, "0.0.0"),
        instructions=r.typed(server, key, "instructions", str),
        title=r.typed(server, key, "title", str),
        tools=tuple(t for t in tools if t is not None),
        digest=digest,
        resources=resources,
        prompts=prompts,
        spool=read_spool(r, doc),
        oauth=_read_oauth(r, server),
        audit=_read_audit(r, server, base_dir),
    )


def _read_oauth(r: Reader, server: dict[str, Any]) -> OAuthSettings | None:
    """[server] oauth_issuer, resource_uri, oauth_scopes (absolute https URLs, or http on loopback)."""
    key = ("server",)
    issuer, resource = r.typed(server, key, "oauth_issuer", str), r.typed(server, key, "resource_uri", str)
    scopes = r.typed(server, key, "oauth_scopes", list, [])
    if any(not isinstance(s, str) or not s or " " in s for s in scopes):
        r.problem(key + ("oauth_scopes",), "oauth_scopes must be an array of scope names (no spaces)")
    if issuer is None:
        for name in ("resource_uri", "oauth_scopes"):
            if name in server:
                r.problem(key + (name,), f"'{name}' goes with 'oauth_issuer' (the authorization server)")
        return None
    return OAuthSettings(issuer, resource, tuple(s for s in scopes if isinstance(s, str)))


def _read_audit(r: Reader, server: dict[str, Any], base_dir: Path) -> Audit | None:
    """`[server] audit = FILE` (relative to the tools file), `audit_required`, `audit_max_bytes`."""
    key = ("server",)
    path = r.typed(server, key, "audit", str)
    required = r.typed(server, key, "audit_required", bool, False)
    max_bytes = r.converted(server, key, "audit_max_bytes", parse_size, None)
    if path is None:
        for name in ("audit_required", "audit_max_bytes"):
            if name in server:
                r.problem(key + (name,), f"'{name}' needs 'audit = FILE' (where the audit trail goes)")
        return None
    if max_bytes is not None and max_bytes < 4096:
        r.problem(key + ("audit_max_bytes",), "'audit_max_bytes' must be at least 4KiB (a file holds whole lines)")
    return Audit(base_dir / path, required, max_bytes)
