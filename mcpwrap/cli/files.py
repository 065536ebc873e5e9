"""The tools file itself: `mcpwrap init` (a starter, or a draft from a program's --help), `check`, `schema`."""

from __future__ import annotations

import os
import sys
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
    """Validate as `serve` would, look for each program, check the secret a tool needs, report confinement."""
    config = load_tools(Path(file))
    missing = _missing_programs(config)
    for problem in missing:
        print(f"{colour('mcpwrap:', '1;33')} {'error' if strict else 'warning'}: {problem}", file=sys.stderr)
    _check_secret(config, secret_file)
    if missing and strict:
        raise SystemExit(EXIT_CONFIG)
    more = "".join(f", {len(items)} {kind}(s)" for kind, items in (("resource", config.resources),
                                                                    ("prompt", config.prompts)) if items)
    print(f"{file}: ok, {len(config.tools)} tool(s){more}")  # stdout-ok
    for tool in config.tools:
        for line in confinement_report(tool):
            print(line)  # stdout-ok


def confinement_report(tool: Any) -> list[str]:
    """A tool's effective sandbox, limits and environment policy, and what this kernel enforces of them."""
    from mcpwrap.run import landlock, limits

    def verdict(gaps: list[str], required: bool) -> list[str]:
        return [f"    NOT ENFORCED HERE: {gap}" for gap in gaps] + (
            [f"    so its calls {'are refused (required = true)' if required else 'run anyway (required = false)'}"]
            if gaps else [])

    lines = []
    if (sandbox := tool.sandbox) is not None:
        policy = landlock.Policy(read=sandbox.read, write=sandbox.write, network=sandbox.network)
        abi = landlock.abi()
        lines += [f"{tool.name}: sandbox: read {' '.join(sandbox.read)}",
                  f"    write {' '.join(sandbox.write) or '(nothing)'} and a private TMPDIR; "
                  f"network {'allowed' if sandbox.network else 'denied (TCP)'}",
                  *(f"    {line}" for line in (landlock.describe(policy, abi) if abi else [])),
                  *verdict(landlock.missing(policy, abi), sandbox.required)]
    if (limited := tool.limits) is not None:
        how = limits.available()
        set_ = [name for name in ("memory", "cpu", "processes", "open_files", "file_size")
                if getattr(limited, "cpu_s" if name == "cpu" else name) is not None]
        lines += [f"{tool.name}: limits: " + "; ".join(
                      limits.sentence(limited, name).removeprefix("exceeded ").replace(" limit ", " ")
                      + f" ({how.get(name, 'not enforceable here')})" for name in set_),
                  *verdict(limits.missing(limited), limited.required)]
    if tool.env_inherit is not True:
        passed = ", ".join(("PATH", *tool.env_inherit)) if tool.env_inherit else "PATH"
        lines.append(f"{tool.name}: environment: only {passed} of the server's, plus its env table")
    return lines


def _missing_programs(config: Any) -> list[str]:
    """What is wrong with each command whose program is not found as the runner would look for it:
    on the PATH of the tool's environment, or relative to its cwd when it holds a slash."""
    import shutil

    missing = []
    for tool in config.tools:
        if tool.command is None:
            continue
        program = str(tool.command[0])                # config keeps the program a string
        if "/" in program:
            where = tool.cwd / program
            if not (where.is_file() and os.access(where, os.X_OK)):
                missing.append(f"tool {tool.name!r}: program {program!r} is not an executable file (in {tool.cwd})")
        elif shutil.which(program, path={**os.environ, **tool.env}.get("PATH", os.defpath)) is None:
            missing.append(f"tool {tool.name!r}: program {program!r} is not on PATH (an MCP host may start "
                           "`serve` with a shorter one: see `client-config --pin-path`)")
    return missing


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
