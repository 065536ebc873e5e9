"""What a tools file asks of the machine that serves it: each `cwd` a directory, each program found
on the PATH its command will run with, and a sandboxed program readable under its sandbox's grants.

These are warnings, not problems of the file (`check --strict` makes them errors): the file is
right or wrong everywhere, but the machine may be another one or be made ready later (a deploy
step that creates the directory, the PATH an MCP host gives). So `check` says them where the file
is written and `serve` on stderr at start where it runs, each at the FILE:LINE:COL of the key to
change. `machine_problems` looks only at the file system and the environment; it runs nothing.

A sandboxed program must be readable, as named and as its symlinks resolve, and so must what it
executes: the interpreter of a `#!` script (`#!/usr/bin/env NAME` finds NAME on the same PATH),
and the install prefix of the binary that finally runs (the directory above its `bin`, as named
and as resolved: a venv's holds its pyvenv.cfg and site-packages, a pyenv, conda or Homebrew
interpreter's its standard library). The sandbox is not widened to fit: the warning gives the
`read` line that would, for the user to decide.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from mcpwrap.config.model import Config, Problem, Sandbox, Tool
from mcpwrap.config.reader import Reader
from mcpwrap.config.tools import SYSTEM_READ

Key = tuple[str, ...]


def machine_problems(config: Config, environ: Mapping[str, str] | None = None) -> list[Problem]:
    """The warnings about this machine for `config`'s commands, located, in the file's order."""
    environ = os.environ if environ is None else environ
    found: list[tuple[tuple[Key, ...], str]] = []
    by_cwd: dict[Path, list[tuple[str, Key]]] = {}
    for kind, key, tool in _commands(config):
        by_cwd.setdefault(tool.cwd, []).append((kind, key))
    bad_cwds = {cwd: why for cwd in by_cwd if (why := _not_a_directory(cwd))}
    for cwd, why in bad_cwds.items():
        users = by_cwd[cwd]
        names = {kind: [k[1] for kd, k in users if kd == kind] for kind, _ in users}
        who = "; ".join(f"{kind}(s) {', '.join(map(repr, ns))}" for kind, ns in names.items())
        found.append(((users[0][1] + ("cwd",), ("server", "cwd")),
                      f"cwd {cwd} {why}, so {who} cannot start: create it, or change 'cwd'"))
    which = _Which(environ)
    for kind, key, tool in _commands(config):
        if tool.command is None or tool.cwd in bad_cwds:
            continue
        program, search = str(tool.command[0]), {**environ, **tool.env}.get("PATH", os.defpath)
        path = which(program, search, tool.cwd)
        if path is None:
            found.append(((key + ("command",),), f"{kind} {key[1]!r}: " + (
                f"program {program!r} is not an executable file (in {tool.cwd})" if "/" in program else
                f"program {program!r} is not on PATH ({search}); an MCP host may start `serve` with a shorter "
                "one: see `client-config --pin-path`")))
        elif tool.sandbox is not None and (said := _unreadable(tool, tool.sandbox, path, search, which)):
            found.append(((key + ("sandbox",), ("server", "sandbox")), f"{kind} {key[1]!r}: {said}"))
    return _located(config, found)


def _commands(config: Config) -> Iterator[tuple[str, Key, Tool]]:
    """Each command of the file: its kind, the key of its table, and the tool that runs it."""
    for tool in config.tools:
        yield "tool", ("tools", tool.name), tool
    for resource in config.resources:
        if resource.tool is not None:
            yield "resource", ("resources", resource.name), resource.tool
    for prompt in config.prompts:
        for message in prompt.messages:
            if message.tool is not None:
                yield "prompt", ("prompts", prompt.name), message.tool


def _not_a_directory(cwd: Path) -> str | None:
    if cwd.is_dir():
        return None
    return "is not a directory" if os.path.lexists(cwd) else "does not exist"


class _Which:
    """Programs found as the runner finds them (on PATH, or relative to the cwd with a slash), remembered."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.found: dict[tuple[str, str, Path], str | None] = {}

    def __call__(self, program: str, search: str, cwd: Path) -> str | None:
        key = (program, search if "/" not in program else "", cwd if "/" in program else Path())
        if key not in self.found:
            if "/" in program:
                where = cwd / program
                self.found[key] = str(where) if where.is_file() and os.access(where, os.X_OK) else None
            else:
                self.found[key] = shutil.which(program, path=search)
        return self.found[key]


def _unreadable(tool: Tool, sandbox: Sandbox, path: str, search: str, which: _Which) -> str | None:
    """What of the program the sandbox does not let it read, and the `read` line that would; None if all is."""
    granted = [os.path.realpath(p) for p in (*sandbox.read, *sandbox.write)]
    named = str(tool.command[0]) if tool.command else path
    chain = [(f"program {named!r}" + (f" ({path})" if path != named else ""), path)]
    if (interpreter := _interpreter(path, search, tool.cwd, which)) is not None:
        chain.append((f"its interpreter {interpreter[0]} ({interpreter[1]})", interpreter[1]))
    needed = [os.path.realpath(p) for _, p in chain]
    runs = Path(chain[-1][1])                       # the binary that finally runs: its install prefixes
    needed += [str(p.parent.parent) for p in (runs, Path(os.path.realpath(runs)))
               if p.parent.name in ("bin", "sbin")]
    missing = [p for p in dict.fromkeys(needed) if not _beneath(os.path.realpath(p), granted)]
    missing = [p for p in missing if not any(p != q and _beneath(p, [q]) for q in missing)]
    if not missing:
        return None
    written = [_as_written(p, tool) for p in sandbox.read
               if p not in SYSTEM_READ and not any(p in a.path.within for a in tool.args if a.path)]
    fix = ", ".join(f'"{p}"' for p in dict.fromkeys([*written, *missing]))
    return (f"{' and '.join(what for what, _ in chain)} need{'s' * (len(chain) == 1)} to read {', '.join(missing)}, "
            f"which its sandbox does not grant, so it cannot start or run there; the fix: sandbox.read = [{fix}]")


def _interpreter(path: str, search: str, cwd: Path, which: _Which) -> tuple[str, str] | None:
    """The interpreter a `#!` script names, as (how it is named, its path); None for a binary."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        name = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)
        found = which(name, search, cwd) if name else None
        return (name, found) if name and found else None
    return (words[0], words[0])


def _beneath(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _as_written(path: str, tool: Tool) -> str:
    return "{cwd}" if path == str(tool.cwd) else path


def _located(config: Config, found: list[tuple[tuple[Key, ...], str]]) -> list[Problem]:
    """Each warning at the first of its keys the file has (the file is read again only when there is one)."""
    if not found:
        return []
    try:
        text = config.path.read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        text = ""                         # --tool options: no file to point into
    r = Reader(config.path, text, check_schemas=False)
    for keys, message in found:
        r.problem(next((k for k in keys if k in r.locator.positions), keys[0]), message)
    return sorted(r.problems, key=lambda p: (p.line, p.col))
