"""Argv and environment templating: pure, no shell, no I/O.

A placeholder `{name}` fills part of exactly one argv element and is never
re-parsed; an absent optional argument drops its element; a boolean with
`flag` becomes that flag or nothing; an array repeats its element once per
item. An element whose first character comes from a value and is "-" is
refused unless a literal "--" element came before it, wherever the
placeholder sits (with a suffix, after literal-free or empty values), so a
value can never become an option. `shell` scripts see arguments only as
`MCP_ARG_<NAME>` environment variables (and all of them as JSON in MCP_ARGS).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from mcpwrap.config import PLACEHOLDER, Tool


class ArgumentError(ValueError):
    """Arguments that cannot be turned into a safe argv; nothing ran."""


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return orjson.dumps(value).decode()


def _check_value(name: str, text: str) -> None:
    if "\x00" in text:
        raise ArgumentError(f"argument '{name}' contains a NUL byte, which no command line can carry")


def _fill(element: str, values: Mapping[str, Any]) -> tuple[str, str | None]:
    """The element with its placeholders filled, and the argument its first character came from
    (None when it came from the tools file's own text, or the element is empty)."""
    pieces: list[tuple[str, str | None]] = []
    end = 0
    for match in PLACEHOLDER.finditer(element):
        text = _scalar(values[match[1]])
        _check_value(match[1], text)
        pieces += [(element[end:match.start()], None), (text, match[1])]
        end = match.end()
    pieces.append((element[end:], None))
    leader = next((source for text, source in pieces if text), None)
    return "".join(text for text, _ in pieces), leader


def build_argv(tool: Tool, args: Mapping[str, Any]) -> list[str]:
    """The argv to execute; raises ArgumentError for an unsafe value. A shell tool's script is fixed."""
    if tool.command is None:
        return ["/bin/sh", "-c", tool.shell or ""]
    argv: list[str] = []
    after_separator = False
    for element in tool.command:
        names = [m[1] for m in PLACEHOLDER.finditer(element)]
        if not names:
            argv.append(element)
            after_separator = after_separator or element == "--"
            continue
        if any(n not in args for n in names):
            continue                                   # an absent optional argument drops its element
        spec = tool.arg(names[0])
        if spec is not None and spec.flag is not None:
            if args[names[0]] is True:
                argv.append(spec.flag)
            continue
        array = next((n for n in names if isinstance(args[n], list)), None)
        for item in args[array] if array else [None]:
            produced, leader = _fill(element, {**args, array: item} if array else args)
            # What reaches the command decides, not the template's shape: prefix, suffix or an empty
            # value before it, a value-led element starting with "-" would be parsed as an option.
            # (config.py forbids placeholders in command[0], so this never judges the program.)
            if leader is not None and produced.startswith("-") and not after_separator:
                raise ArgumentError(
                    f"argument '{leader}' starts with '-' where it begins the command element {element!r} "
                    "and would be read as an option; the tools file can put \"--\" before that element, "
                    "or attach the value to a literal option (e.g. \"--regexp={pattern}\")")
            argv.append(produced)
    return argv


def inherited(tool: Tool, base: Mapping[str, str]) -> dict[str, str]:
    """What the tool sees of the server's environment under its `env_inherit` policy.

    All of it but mcpwrap's own MCPWRAP_* settings; or only PATH (programs are found with it)
    and the names listed, which may include an MCPWRAP_* name on purpose.
    """
    if tool.env_inherit is True:
        return {k: v for k, v in base.items() if not k.startswith("MCPWRAP_")}
    names = ("PATH", *tool.env_inherit) if tool.env_inherit else ("PATH",)
    return {n: base[n] for n in names if n in base}


def build_env(tool: Tool, args: Mapping[str, Any], base: Mapping[str, str]) -> dict[str, str]:
    """Inherited environment (by policy) + the tool's env + (for shell tools) MCP_ARG_* and MCP_ARGS."""
    env = {**inherited(tool, base), **tool.env}
    if tool.shell is not None:
        for spec in tool.args:
            if spec.name in args:
                text = _scalar(args[spec.name])
                _check_value(spec.name, text)
                env[spec.env_name] = text
            else:
                env.pop(spec.env_name, None)
        env["MCP_ARGS"] = orjson.dumps(dict(args)).decode()
    return env


def with_defaults(tool: Tool, args: Mapping[str, Any]) -> dict[str, Any]:
    filled = dict(args)
    for spec in tool.args:
        if spec.name not in filled and "default" in spec.schema:
            filled[spec.name] = spec.schema["default"]
    return filled
