"""Argv and environment templating: pure, no shell, no I/O.

A placeholder `{name}` fills part of exactly one argv element and is never
re-parsed; an absent optional argument drops its element; a boolean with
`flag` becomes that flag or nothing; an array repeats its element once per
item. A group (a nested array of elements) is dropped whole
when an argument it names is absent. An element whose first character comes
from a value and is "-" is refused unless a literal "--" element came before
it, wherever the placeholder sits (with a suffix, after literal-free or empty
values, inside a group), so a value can never become an option; a value that
may start with "-" belongs attached to its option ("-e{pattern}",
"--regexp={pattern}"), and the refusal says so. `shell` scripts see arguments only as
`MCP_ARG_<NAME>` environment variables (and all of them as JSON in MCP_ARGS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from mcpwrap.config.model import PLACEHOLDER, Tool


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


class _Element(NamedTuple):
    """One argv template element, parsed: its literal texts, the placeholders between them, and
    the flag it renders when its (first) argument is a boolean with `flag`."""
    text: str
    texts: tuple[str, ...]
    names: tuple[str, ...]
    flag: str | None


class _Group(NamedTuple):
    """A nested array of elements, and every placeholder they name."""
    elements: tuple[_Element, ...]
    names: tuple[str, ...]


_plans: dict[int, tuple[Tool, tuple[_Element | _Group, ...]]] = {}


def _plan(tool: Tool) -> tuple[_Element | _Group, ...]:
    """The tool's command parsed once, not on every call (the tool is kept, so its id cannot be reused)."""
    cached = _plans.get(id(tool))
    if cached is not None and cached[0] is tool:
        return cached[1]

    def element(text: str) -> _Element:
        parts = PLACEHOLDER.split(text)   # literal, name, literal, ..., literal
        names = tuple(parts[1::2])
        spec = tool.arg(names[0]) if names else None
        return _Element(text, tuple(parts[0::2]), names, spec.flag if spec is not None else None)

    plan: list[_Element | _Group] = []
    for part in tool.command or ():
        if isinstance(part, str):
            plan.append(element(part))
        else:
            elements = tuple(element(text) for text in part)
            plan.append(_Group(elements, tuple(n for e in elements for n in e.names)))
    if len(_plans) > 4096:
        _plans.clear()
    _plans[id(tool)] = (tool, tuple(plan))
    return _plans[id(tool)][1]


def _fill(element: _Element, values: Mapping[str, Any]) -> tuple[str, str | None]:
    """The element with its placeholders filled, and the argument its first character came from
    (None when it came from the tools file's own text, or the element is empty)."""
    texts = element.texts
    pieces = [texts[0]]
    leader, started = None, texts[0] != ""
    for name, literal in zip(element.names, texts[1:]):
        text = _scalar(values[name])
        _check_value(name, text)
        if not started and text:
            leader = name
        started = started or text != "" or literal != ""
        pieces += (text, literal)
    return "".join(pieces), leader


def _present(names: tuple[str, ...], args: Mapping[str, Any]) -> bool:
    for name in names:
        if name not in args:
            return False
    return True


def build_argv(tool: Tool, args: Mapping[str, Any]) -> list[str]:
    """The argv to execute; raises ArgumentError for an unsafe value. A shell tool's script is fixed.

    A group (a nested array) is kept only when every argument it names is present, and is repeated
    once per item when it names an array: ["-e", "{patterns}"] gives -e a -e b.
    """
    if tool.command is None:
        return ["/bin/sh", "-c", tool.shell or ""]
    plan = _plan(tool)
    built = _Argv(any(isinstance(part, _Element) and part.text == "--" for part in plan))
    for part in plan:
        if isinstance(part, _Element):
            built.add(part, args)
            continue
        if not _present(part.names, args):
            continue                                   # an absent argument drops its whole group
        array = _array(part.names, args)
        for item in args[array] if array else [None]:
            for element in part.elements:
                built.add(element, {**args, array: item} if array else args, grouped=True)
    return built.argv


def _array(names: Sequence[str], args: Mapping[str, Any]) -> str | None:
    """The first of `names` whose value is an array (its element repeats per item)."""
    for name in names:
        if isinstance(args[name], list):
            return name
    return None


class _Argv:
    """The argv being built, with what the dash rule needs: whether a literal "--" has passed,
    and the literal option just before the current element (for the refusal's advice), and whether
    the template has a "--" at all (before it, an element after an option is that option's value)."""

    def __init__(self, separator_planned: bool) -> None:
        self.argv: list[str] = []
        self.separated = False
        self.separator_planned = separator_planned
        self.option: str | None = None

    def add(self, element: _Element, args: Mapping[str, Any], grouped: bool = False) -> None:
        """Append what one template element produces: nothing, one element, or one per array item."""
        names = element.names
        option, self.option = self.option, None
        if not names:
            text = element.text
            self.argv.append(text)
            self.separated = self.separated or text == "--"
            self.option = text if text.startswith("-") and text != "--" else None
            return
        if not _present(names, args):
            return                                     # an absent optional argument drops its element
        if element.flag is not None:
            if args[names[0]] is True:
                self.argv.append(element.flag)
            return
        array = _array(names, args)
        for item in args[array] if array else [None]:
            produced, leader = _fill(element, {**args, array: item} if array else args)
            # What reaches the command decides, not the template's shape: prefix, suffix or an empty
            # value before it, a value-led element starting with "-" would be parsed as an option.
            # (config/load.py forbids placeholders in command[0], so this never judges the program.)
            if leader is not None and produced.startswith("-") and not self.separated:
                raise ArgumentError(
                    f"argument '{leader}' starts with '-' where it begins the command element {element.text!r} "
                    f"and would be read as an option; "
                    f"{_advice(option, element.text, grouped or self.separator_planned)}")
            self.argv.append(produced)


def _advice(option: str | None, element: str, takes_value: bool) -> str:
    """How the tools file can let such a value through: attached to the option it is the value of,
    or after a "--" when it is an operand. Attaching is advised alone only where the template says the
    option takes the value (they share a group, or a "--" comes later so the element is no operand):
    for an option that takes none (`--stat {from}..{to}`), attaching would change the command."""
    operand = f"the tools file can put \"--\" before {element!r} if it is an operand"
    if option is None:
        return operand + ", or attach it to its option as one element (e.g. \"--regexp={pattern}\")"
    joined = f"{option}={element}" if option.startswith("--") else option + element
    attach = f"attach it to its option as one element, {joined!r} instead of {option!r}, {element!r}"
    if takes_value:
        return "the tools file can " + attach
    return f"{operand}; if it is the value of {option!r}, {attach}"


_filtered: list[tuple[Mapping[str, str], dict[str, str]]] = []   # the last base, and it without MCPWRAP_*


def _without_own(base: Mapping[str, str]) -> dict[str, str]:
    """`base` without mcpwrap's own MCPWRAP_* settings; read only. The runner passes one mapping
    to every call (the server's environment, copied once and never changed), so it is filtered
    once, not per call; the mapping is kept, so its id cannot be reused by another."""
    if not base:                          # asking's checks pass an empty one
        return {}
    if not _filtered or _filtered[0][0] is not base:
        _filtered[:] = [(base, {k: v for k, v in base.items() if not k.startswith("MCPWRAP_")})]
    return _filtered[0][1]


def inherited(tool: Tool, base: Mapping[str, str]) -> Mapping[str, str]:
    """What the tool sees of the server's environment under its `env_inherit` policy (read only).

    All of it but mcpwrap's own MCPWRAP_* settings; or only PATH (programs are found with it)
    and the names listed, which may include an MCPWRAP_* name on purpose.
    """
    if tool.env_inherit is True:
        return _without_own(base)
    names = ("PATH", *tool.env_inherit) if tool.env_inherit else ("PATH",)
    return {n: base[n] for n in names if n in base}


def build_env(tool: Tool, args: Mapping[str, Any], base: Mapping[str, str]) -> dict[str, str]:
    """Inherited environment (by policy) + the tool's env + (for shell tools) MCP_ARG_* and MCP_ARGS.

    `base` is not copied per call: the same mapping must not be changed between calls."""
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
