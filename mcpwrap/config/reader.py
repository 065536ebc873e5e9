"""What every reader of a tools-file table shares: located problems, typed reads, value forms.

`Reader` collects `Problem`s while a document becomes dataclasses; each problem is placed at
the line and column of the key it is about (`_Locator` scans the TOML text, only once there is
a problem to place). `parse_duration` and `parse_size` are the two value forms a tools file
writes as strings ("1.5s", "64KiB"); the serve options use them too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from mcpwrap.config.model import Problem
from mcpwrap.config.schema import SchemaChecks

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KiB|MB|MiB|GB|GiB)?\s*$")
SIZE_UNITS = {None: 1, "B": 1, "KB": 1000, "KiB": 1024, "MB": 1000**2, "MiB": 1024**2,
              "GB": 1000**3, "GiB": 1024**3}
DURATION_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
VARIABLE = re.compile(r"\$(\$|\{([^}]*)(\}?))")
NAME_AND_DEFAULT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.S)


def parse_duration(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    match = DURATION.match(value) if isinstance(value, str) else None
    if not match or float(match[1]) <= 0:
        raise ValueError(f"bad duration {value!r}: use a positive number of seconds or "
                         "a string like \"500ms\", \"1.5s\", \"2m\", \"1h\"")
    return float(match[1]) * DURATION_UNITS[match[2]]


def parse_size(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = SIZE.match(value) if isinstance(value, str) else None
    if not match or float(match[1]) <= 0:
        raise ValueError(f"bad size {value!r}: use a positive number of bytes or a string "
                         "like \"64KiB\", \"1MiB\", \"10MB\"")
    return int(float(match[1]) * SIZE_UNITS[match[2]])


def expand_variables(text: str, environ: Mapping[str, str]) -> str:
    """`text` with each ${NAME} replaced by the variable's value in `environ`, ${NAME:-default} by
    the default when it is unset or empty, and $$ by one $; any other $ is kept. ValueError names a
    variable that is unset and has no default, or a ${ that is not one of these forms."""
    if "$" not in text:
        return text

    def value(match: re.Match[str]) -> str:
        if match[1] == "$":
            return "$"
        form = NAME_AND_DEFAULT.fullmatch(match[2])
        if not match[3] or form is None:
            raise ValueError(f"'{match[0]}' is not ${{NAME}} or ${{NAME:-default}} (write $$ for a literal $)")
        found = environ.get(form[1])
        if found is None and form[2] is None:
            raise ValueError(f"${{{form[1]}}} is not set in the server's environment (give a default: "
                             f"${{{form[1]}:-...}}; write $$ for a literal $)")
        return found or (form[2] if form[2] is not None else "")

    return VARIABLE.sub(value, text)


class _Locator:
    """Maps key paths to (line, col) by scanning the TOML text.

    tomllib keeps no positions, so this scanner records where each table header
    and key starts, including keys inside inline tables. It only has to be good
    enough to point a human at the right spot.
    """

    KEY = re.compile(r'\s*((?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\'))*)\s*=')

    def __init__(self, text: str) -> None:
        self.positions: dict[tuple[str, ...], tuple[int, int]] = {}
        table: tuple[str, ...] = ()
        in_multiline: str | None = None
        for lineno, line in enumerate(text.splitlines(), 1):
            if in_multiline:
                if in_multiline in line:
                    in_multiline = None
                continue
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            if stripped.startswith("["):
                header = stripped.strip("[] \t").split("]")[0]
                table = self._split(header)
                for end in range(1, len(table) + 1):    # [tool.b] places an unknown 'tool' too
                    self.positions.setdefault(table[:end], (lineno, indent + 1))
                continue
            match = self.KEY.match(line)
            if not match:
                continue
            key = table + self._split(match[1])
            self.positions.setdefault(key, (lineno, match.start(1) + 1))
            rest = line[match.end():]
            for quote in ('"""', "'''"):
                if rest.count(quote) == 1:
                    in_multiline = quote
            if "{" in rest:
                self._inline(key, line, match.end(), lineno)

    def _inline(self, prefix: tuple[str, ...], line: str, start: int, lineno: int) -> None:
        stack = [prefix]
        pending: tuple[str, ...] | None = None
        i = start
        while i < len(line):
            ch = line[i]
            if ch in "\"'":
                end = line.find(ch, i + 1)
                i = len(line) if end < 0 else end + 1
                continue
            if ch == "{":
                stack.append(pending or stack[-1])
                pending = None
            elif ch == "}":
                stack.pop()
                if not stack:
                    return
            if ch in "{,":
                match = self.KEY.match(line, i + 1)
                if match:
                    key = stack[-1] + self._split(match[1])
                    self.positions.setdefault(key, (lineno, match.start(1) + 1))
                    pending = key
                    i = match.end()
                    continue
            i += 1

    @staticmethod
    def _split(dotted: str) -> tuple[str, ...]:
        parts = re.findall(r'"([^"]*)"|\'([^\']*)\'|([A-Za-z0-9_-]+)', dotted)
        return tuple(next(p for p in groups if p) if any(groups) else "" for groups in parts)

    def find(self, key: tuple[str, ...]) -> tuple[int, int]:
        for end in range(len(key), 0, -1):
            if key[:end] in self.positions:
                return self.positions[key[:end]]
        return (1, 1)


class Reader:
    """Collects located problems while the document is turned into dataclasses.

    Positions are scanned only once there is a problem to place (a good file of 10,000 tools
    is not scanned at all); the schema fragments are checked once all is read (`schema.SchemaChecks`).
    """

    def __init__(self, path: Path, text: str, check_schemas: bool = True) -> None:
        self.path = path
        self.text = text
        self.problems: list[Problem] = []
        self.seen: set[tuple[tuple[str, ...], str]] = set()   # (key, message) already told
        self.schemas = SchemaChecks(check_schemas)

    def check_schemas_now(self) -> None:
        """The meta-checks of the fragments read so far (`SchemaChecks.problems`), each problem located."""
        for key, message in self.schemas.problems():
            self.problem(key, message)

    @cached_property
    def locator(self) -> _Locator:
        return _Locator(self.text)

    def problem(self, key: tuple[str, ...], message: str) -> None:
        if (key, message) in self.seen:       # a key read twice (a resource's cwd) is told once
            return
        self.seen.add((key, message))
        line, col = self.locator.find(key)
        self.problems.append(Problem(self.path, line, col, message))

    def keys(self, table: Mapping[str, Any], key: tuple[str, ...], allowed: set[str]) -> None:
        for name in table:
            if name not in allowed:
                hint = closest(name, allowed)
                self.problem(key + (name,), f"unknown key '{'.'.join(key + (name,))}'"
                             + (f" (did you mean '{hint}'?)" if hint else ""))

    def typed(self, table: Mapping[str, Any], key: tuple[str, ...], name: str,
              kind: type | tuple[type, ...], default: Any = None) -> Any:
        if name not in table:
            return default
        value = table[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
            self.problem(key + (name,), f"'{'.'.join(key + (name,))}' must be "
                         + " or ".join(TYPE_NAMES.get(k, k.__name__) for k in kinds))
            return default
        return value

    def expanded(self, key: tuple[str, ...], what: str, text: str) -> str:
        """`text` with the server's ${VAR}s filled (`expand_variables`), once, as the file is read;
        a problem at `key` when one cannot be."""
        try:
            return expand_variables(text, os.environ)
        except ValueError as exc:
            self.problem(key, f"{what}: {exc}")
            return text

    def converted(self, table: Mapping[str, Any], key: tuple[str, ...], name: str,
                  parse: Any, default: Any) -> Any:
        if name not in table:
            return default
        try:
            return parse(table[name])
        except ValueError as exc:
            self.problem(key + (name,), f"'{'.'.join(key + (name,))}': {exc}")
            return default


TYPE_NAMES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
               list: "an array", dict: "a table"}


def closest(name: str, allowed: set[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.6)
    return found[0] if found else None


def is_table(r: Reader, key: tuple[str, ...], value: Any) -> bool:
    if not isinstance(value, dict):
        r.problem(key, f"'{'.'.join(key)}' must be a table")
        return False
    return True
