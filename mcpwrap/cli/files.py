"""The tools file itself: `mcpwrap init` (a starter, or a draft from a program's --help), `check`, `schema`."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcpwrap.cli.common import EXIT_CONFIG, EXIT_USAGE, colour, fail, load_tools, secret_path


def init(file: str, force: bool, from_help: str | None) -> None:
    """Write the starter tools file, or a draft from `from_help --help` that is written only if it checks."""
    from importlib.resources import files

    from mcpwrap.state.durable import write_private

    path = Path(file)
    if path.exists() and not force:
        fail(f"{path} already exists; use --force to overwrite it", EXIT_USAGE)
    if from_help is None:
        write_private(path, files("mcpwrap.config").joinpath("starter.toml").read_bytes())
        print(f"wrote {path}; next: mcpwrap check {path} && mcpwrap call {path} greet --arg name=you")  # stdout-ok
        return
    from mcpwrap.cli.draft import draft_from_help

    text = draft_from_help(from_help)
    config = _loads_draft(text, path)
    write_private(path, text.encode())
    print(f"wrote {path}: {len(config.tools)} tool(s) drafted from `{from_help} --help` (check: ok); "  # stdout-ok
          f"read it and keep what a model may run, then: mcpwrap list {path}")


def _loads_draft(text: str, path: Path) -> Any:
    """A draft is written only if it checks; otherwise its problems are shown and nothing is written."""
    from mcpwrap.config import load as config

    try:
        return config.loads(text.encode(), path)
    except config.ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        fail(f"the draft does not check, so {path} was not written", EXIT_CONFIG)


def check(file: str, strict: bool, secret_file: str | None) -> None:
    """Validate as `serve` would, look at what the file asks of this machine (`config.machine`),
    check the secret a tool needs, report confinement."""
    from mcpwrap.config.machine import machine_problems

    config = load_tools(Path(file))
    warnings = machine_problems(config)
    for problem in warnings:
        print(as_warning(problem, "error" if strict else "warning"), file=sys.stderr)
    _check_secret(config, secret_file)
    if warnings and strict:
        raise SystemExit(EXIT_CONFIG)
    more = "".join(f", {len(items)} {kind}(s)" for kind, items in (("resource", config.resources),
                                                                    ("prompt", config.prompts)) if items)
    print(f"{file}: ok, {len(config.tools)} tool(s){more}")  # stdout-ok
    for line in confinement_report(config.tools) + access_report(config):
        print(line)  # stdout-ok


def access_report(config: Any) -> list[str]:
    """Who may use what (`allow`), and where it applies: over HTTP only; on stdio the local user owns the process."""
    items = [(kind, item) for kind, items in (("tool", config.tools), ("resource", config.resources),
                                              ("prompt", config.prompts)) for item in items]
    lines = [f"{item.name}: allow {' '.join(item.allow) or '(nobody over HTTP)'}"
             for kind, item in items if item.allow is not None]
    if lines:
        lines.append("allow applies over HTTP (named token-file lines, OAuth users, scopes, groups); on stdio the "
                     "local user runs the server and may use everything")
    return lines


def as_warning(problem: Any, severity: str = "warning") -> str:
    """A problem of the machine rather than the file: FILE:LINE:COL: warning: message."""
    return f"{problem.path}:{problem.line}:{problem.col}: {colour(severity + ':', '1;33')} {problem.message}"


def confinement_report(tools: Sequence[Any]) -> list[str]:
    """The tools' effective sandboxes, limits and environment policies, and what this kernel enforces
    of them: what every sandbox shares said once, then a line per tool (and what differs for it)."""
    from mcpwrap.config.tools import SYSTEM_READ, SYSTEM_WRITE
    from mcpwrap.run import landlock

    abi = landlock.abi()
    policies = {t.name: landlock.Policy(read=t.sandbox.read, write=t.sandbox.write, network=t.sandbox.network)
                for t in tools if t.sandbox is not None}
    described = {name: landlock.describe(policy, abi) if abi else [] for name, policy in policies.items()}
    shared = [line for line in next(iter(described.values()), []) if all(line in d for d in described.values())]
    lines = [f"sandboxes: the system paths are {' '.join(SYSTEM_READ)} (read) and {' '.join(SYSTEM_WRITE)} (write)",
             *(f"    {line}" for line in shared)] if policies else []
    for tool in tools:
        if (sandbox := tool.sandbox) is not None:
            system = all(p in sandbox.read for p in SYSTEM_READ)
            read = [p for p in sandbox.read if not (system and p in SYSTEM_READ)]
            write = [p for p in sandbox.write if not (system and p in SYSTEM_WRITE)]
            reads = " and ".join(filter(None, [" ".join(read), "the system paths" if system else ""])) or "nothing"
            writes = " and ".join(filter(None, [" ".join(write), "a private TMPDIR"]))
            lines += [f"{tool.name}: sandbox: read {reads}; write {writes}; "
                      f"network {'allowed' if sandbox.network else 'denied'}",
                      *(f"    {line}" for line in described[tool.name] if line not in shared),
                      *_verdict(landlock.missing(policies[tool.name], abi), sandbox.required)]
        lines += _limits_and_env(tool)
    return lines


def _verdict(gaps: list[str], required: bool) -> list[str]:
    return [f"    NOT ENFORCED HERE: {gap}" for gap in gaps] + (
        [f"    so its calls {'are refused (required = true)' if required else 'run anyway (required = false)'}"]
        if gaps else [])


def _limits_and_env(tool: Any) -> list[str]:
    """A tool's limits and environment policy, and what this kernel enforces of them."""
    from mcpwrap.run import limits

    lines = []
    if (limited := tool.limits) is not None:
        how = limits.available()
        set_ = [name for name in ("memory", "cpu", "processes", "open_files", "file_size")
                if getattr(limited, "cpu_s" if name == "cpu" else name) is not None]
        lines += [f"{tool.name}: limits: " + "; ".join(
                      limits.sentence(limited, name).removeprefix("exceeded ").replace(" limit ", " ")
                      + f" ({how.get(name, 'not enforceable here')})" for name in set_),
                  *_verdict(limits.missing(limited), limited.required)]
    if tool.env_inherit is not True:
        passed = ", ".join(("PATH", *tool.env_inherit)) if tool.env_inherit else "PATH"
        lines.append(f"{tool.name}: environment: only {passed} of the server's, plus its env table")
    return lines


def _check_secret(config: Any, secret_file: str | None) -> None:
    """Refuse what `serve` would: a secret file that exists but is unusable, when a tool needs it
    (a question to sign, or a task record to MAC). A missing one `serve` creates."""
    import time

    needs = [t.name for t in config.tools if t.confirm or t.task != "never" or any(a.elicit for a in t.args)]
    path = secret_path(secret_file) if needs else None
    if path is None or not os.path.lexists(path):
        return
    from mcpwrap.state import signing

    try:
        signing.load_secret(path, time.time())
    except signing.SecretFileError as exc:
        fail(f"`serve` would refuse the secret file that {', '.join(map(repr, needs))} need: {exc}", EXIT_CONFIG)


def schema() -> None:
    """The JSON Schema of the tools-file format, for editors."""
    from importlib.resources import files

    sys.stdout.write(files("mcpwrap.config").joinpath("tools-file.schema.json").read_text())  # stdout-ok
