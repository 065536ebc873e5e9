"""The tools config a verb works on: from a tools FILE, or from `--tool NAME=COMMAND` options.

`serve`, `call`, `list`, `read` and `client-config` all take one or the other, through
`tools_config`; `--print-toml` prints the file the options stand for (`inline_tools`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcpwrap.cli.common import EXIT_CONFIG, EXIT_USAGE, UsageError, assignment, fail, load_tools

INLINE_TOOLS = Path("(--tool)")          # where problems of the inline form point
INLINE_PLACEHOLDER = r"\{([A-Za-z_][A-Za-z0-9_]*)(?::([a-z]+))?(\?)?\}"
INLINE_TYPES = ("string", "integer", "number", "boolean")


def tools_config(file: str | Path | None, tools: Sequence[str], describe: Sequence[str] = (),
                 validated_dir: Path | None = None) -> Any:
    """The config of FILE, or of the `--tool` options (each described by a `--describe`): exactly one
    of the two; a usage error otherwise. Exits 3 on a problem in either, as `load_tools` does."""
    if describe and not tools:
        raise UsageError("--describe NAME=TEXT describes a --tool NAME")
    if (file is None) == (not tools):
        raise UsageError("Give a tools FILE or --tool NAME=COMMAND options (not both).")
    if file is not None:
        return load_tools(Path(file), validated_dir)
    return _loads_inline(inline_tools(tools, describe))


def without_file(tools: Sequence[str], words: Sequence[str | None]) -> list[str | None]:
    """The positionals of a verb whose first is FILE: as given, or, with `--tool` (no FILE), shifted
    one place on (`call --tool ... TOOL` puts TOOL where FILE is parsed). Without either, a usage error."""
    if not tools and words[0] is None:
        raise UsageError("Missing argument 'FILE'.")
    if not tools or words[0] is None:
        return list(words)
    if words[-1] is not None:
        raise UsageError(f"Got unexpected extra argument ({words[-1]}): with --tool there is no FILE")
    return [None, *words[:-1]]


def inline_tools(specs: Sequence[str], describe: Sequence[str] = ()) -> str:
    """The tools file that `--tool NAME=COMMAND` options (each described by a `--describe NAME=TEXT`) stand
    for, as TOML text: what `--print-toml` prints, and `mcpwrap check` accepts.

    COMMAND is split into words as a shell would (quotes, no expansion, no shell at run time);
    a placeholder may say its type and whether it is optional: {path}, {n:integer}, {since?}.
    The text then goes through `config.loads` like any tools file, so every rule applies.
    """
    import re
    import shlex

    import orjson

    def quoted(text: str) -> str:
        return orjson.dumps(text).decode()         # a JSON string is a TOML basic string

    descriptions = dict(assignment("--describe", text) for text in describe)
    if unknown := set(descriptions) - {spec.partition("=")[0] for spec in specs}:
        fail(f"--describe names no --tool: {', '.join(sorted(unknown))}", EXIT_USAGE)
    blocks = []
    for spec in specs:
        name, eq, command = spec.partition("=")
        try:
            words = shlex.split(command)
        except ValueError as exc:
            fail(f"--tool {spec!r}: {exc}", EXIT_USAGE)
        if not eq or not name or not words:
            fail(f"--tool {spec!r} must look like NAME=COMMAND, e.g. 'log=git log -n {{n:integer}} -- {{path?}}'", EXIT_USAGE)
        args: dict[str, tuple[str, bool]] = {}

        def declare(match: re.Match[str]) -> str:
            kind, optional = match[2] or "string", bool(match[3])
            if kind not in INLINE_TYPES or args.setdefault(match[1], (kind, optional)) != (kind, optional):
                fail(f"--tool {spec!r}: {match[0]} must be one of {', '.join(INLINE_TYPES)}, the same "
                     "each time the argument appears", EXIT_USAGE)
            return "{" + match[1] + "}"

        argv = [re.sub(INLINE_PLACEHOLDER, declare, word) for word in words]
        about = [f"description = {quoted(descriptions[name])}"] if name in descriptions else []
        blocks.append("\n".join([f"[tools.{quoted(name)}]", *about, f"command = {orjson.dumps(argv).decode()}", *(
            f"args.{arg} = {{ type = {quoted(kind)}{', optional = true' if optional else ''} }}"
            for arg, (kind, optional) in args.items())]))
    return "\n\n".join(['[server]\nname = "mcpwrap"', *blocks]) + "\n"


def _loads_inline(text: str) -> Any:
    """The config of `--tool` options; a problem is shown with the TOML it was read from."""
    from mcpwrap.config import load as config

    try:
        return config.loads(text.encode(), INLINE_TOOLS)
    except config.ConfigError as exc:
        print(f"mcpwrap: the --tool options, as a tools file:\n{text}", file=sys.stderr)
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
