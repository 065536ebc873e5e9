"""The tools file: TOML in, frozen dataclasses out, every problem located.

Contract: `load(path)` returns a `Config` or raises `ConfigError` whose
`problems` are `Problem(path, line, col, message)` values, printed as
`FILE:LINE:COL: message`. Unknown keys are errors (a typo must never silently
do nothing). Nothing here runs a command or speaks MCP; `jsonschema` is
imported only when a schema fragment has to be checked.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
MEDIA_OUTPUT = re.compile(r"^(image|audio)/[A-Za-z0-9.+-]+$")
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KiB|MB|MiB|GB|GiB)?\s*$")
SIZE_UNITS = {None: 1, "B": 1, "KB": 1000, "KiB": 1024, "MB": 1000**2, "MiB": 1024**2,
              "GB": 1000**3, "GiB": 1024**3}
DURATION_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
TASK_MODES = ("never", "optional", "always")
ANNOTATION_KEYS = {"title": str, "readOnlyHint": bool, "destructiveHint": bool,
                   "idempotentHint": bool, "openWorldHint": bool}
# Keys of an args.NAME table that belong to mcpwrap, not to JSON Schema.
ARG_OWN_KEYS = {"flag", "elicit", "optional"}
# The JSON Schema 2020-12 keywords an args.NAME table may use at its top level (nested
# schemas are JSON Schema proper, left to the meta-schema). JSON Schema ignores unknown
# keywords, so without this list a typo ('optinal', 'defualt') would silently do nothing.
# Left out: $ref/$defs/$id/$anchor (the fragment is published inside the tool's inputSchema,
# where '#/...' would resolve against that root, not the fragment), if/then/else and the
# unevaluated*/dependent* keywords (rare in one argument, and easy to misspell unnoticed).
ARG_SCHEMA_KEYS = {
    "type", "description", "title", "default", "enum", "const", "examples", "deprecated",
    "readOnly", "writeOnly", "format", "pattern", "minLength", "maxLength", "contentMediaType",
    "contentEncoding", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "properties",
    "required", "additionalProperties", "patternProperties", "propertyNames", "minProperties",
    "maxProperties", "anyOf", "oneOf", "allOf", "not"}
ARG_KEYS = ARG_SCHEMA_KEYS | ARG_OWN_KEYS


@dataclass(frozen=True)
class Problem:
    path: Path
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


class ConfigError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


@dataclass(frozen=True)
class Arg:
    name: str
    schema: Mapping[str, Any]          # the JSON Schema fragment, mcpwrap keys removed
    required: bool
    flag: str | None = None            # boolean rendered as this flag when true
    elicit: bool = False               # ask the user when missing

    @property
    def env_name(self) -> str:
        return "MCP_ARG_" + self.name.upper()


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: tuple[Arg, ...]
    command: tuple[str | tuple[str, ...], ...] | None   # a tuple in it is an optional group
    shell: str | None
    cwd: Path
    env: Mapping[str, str]
    timeout_s: float
    max_output: int
    output: str                        # "text" | "json" | "mcp" | "image/..." | "audio/..."
    title: str | None = None
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    stdin_arg: str | None = None
    success_codes: frozenset[int] = frozenset({0})
    progress: re.Pattern[str] | None = None
    concurrency: int | None = None
    confirm: str | None = None
    task: str = "never"
    task_ttl_s: float = 3600.0
    task_poll_s: float = 1.0
    kill_grace_s: float = 2.0

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        required = [a.name for a in self.args if a.required]
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {a.name: dict(a.schema) for a in self.args},
            "additionalProperties": False,
        }
        if required:
            schema["required"] = required
        return schema

    def arg(self, name: str) -> Arg | None:
        return next((a for a in self.args if a.name == name), None)


@dataclass(frozen=True)
class Config:
    path: Path
    name: str
    version: str
    instructions: str | None
    title: str | None
    tools: tuple[Tool, ...]
    digest: str                        # SHA-256 of the file's bytes: binds requestState and tasks

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)


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
                self.positions.setdefault(table, (lineno, indent + 1))
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


class _Reader:
    """Collects located problems while the document is turned into dataclasses."""

    def __init__(self, path: Path, text: str, check_schemas: bool = True) -> None:
        self.path = path
        self.locator = _Locator(text)
        self.problems: list[Problem] = []
        self.check_schemas = check_schemas

    def problem(self, key: tuple[str, ...], message: str) -> None:
        line, col = self.locator.find(key)
        self.problems.append(Problem(self.path, line, col, message))

    def keys(self, table: Mapping[str, Any], key: tuple[str, ...], allowed: set[str]) -> None:
        for name in table:
            if name not in allowed:
                hint = _closest(name, allowed)
                self.problem(key + (name,), f"unknown key '{'.'.join(key + (name,))}'"
                             + (f" (did you mean '{hint}'?)" if hint else ""))

    def typed(self, table: Mapping[str, Any], key: tuple[str, ...], name: str,
              kind: type | tuple[type, ...], default: Any = None) -> Any:
        value = table.get(name, default)
        if name in table and (not isinstance(value, kind) or isinstance(value, bool) and kind is not bool):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            self.problem(key + (name,), f"'{'.'.join(key + (name,))}' must be "
                         + " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds))
            return default
        return value

    def converted(self, table: Mapping[str, Any], key: tuple[str, ...], name: str,
                  parse: Any, default: Any) -> Any:
        if name not in table:
            return default
        try:
            return parse(table[name])
        except ValueError as exc:
            self.problem(key + (name,), f"'{'.'.join(key + (name,))}': {exc}")
            return default


_TYPE_NAMES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
               list: "an array", dict: "a table"}
SERVER_KEYS = {"name", "version", "title", "instructions", "cwd", "env", "timeout", "max_output"}
TOOL_KEYS = {"title", "description", "command", "shell", "args", "cwd", "env", "timeout",
             "max_output", "output", "output_schema", "annotations", "stdin", "success_codes",
             "progress", "concurrency", "confirm", "task", "task_ttl", "task_poll", "kill_grace"}


def _closest(name: str, allowed: set[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.6)
    return found[0] if found else None


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
        raw = read_regular_file(path)
    except OSError as exc:
        raise ConfigError([Problem(path, 1, 1, f"cannot read tools file: {exc.strerror}")]) from None
    return loads(raw, path, schemas_known_good)


def read_regular_file(path: Path) -> bytes:
    """The bytes of a regular file; anything else (a FIFO, a device) is refused before a read can block."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        with open(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def digest_of(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def loads(raw: bytes, path: Path, schemas_known_good: Callable[[str], bool] | None = None) -> Config:
    try:
        text = raw.decode("utf-8")
        document = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError([Problem(path, 1, 1, f"not UTF-8: {exc.reason}")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([_toml_syntax_problem(path, text, exc)]) from None
    digest = digest_of(raw)
    reader = _Reader(path, text, check_schemas=not (schemas_known_good and schemas_known_good(digest)))
    config = _read_document(reader, document, path, digest)
    if reader.problems:
        raise ConfigError(sorted(reader.problems, key=lambda p: (p.line, p.col)))
    return config


def _read_document(r: _Reader, doc: dict[str, Any], path: Path, digest: str) -> Config:
    r.keys(doc, (), {"server", "tools"})
    server = r.typed(doc, (), "server", dict, {})
    r.keys(server, ("server",), SERVER_KEYS)
    key = ("server",)
    base_dir = path.resolve().parent
    defaults = {
        "cwd": base_dir / r.typed(server, key, "cwd", str, "."),
        "env": _read_env(r, server, key),
        "timeout": r.converted(server, key, "timeout", parse_duration, 60.0),
        "max_output": r.converted(server, key, "max_output", parse_size, 1024 * 1024),
    }
    tools_table = r.typed(doc, (), "tools", dict, {})
    if not tools_table:
        r.problem(("tools",), "no tools defined: add a [tools.NAME] table")
    tools = [_read_tool(r, name, table, defaults, base_dir)
             for name, table in tools_table.items() if _is_table(r, ("tools", name), table)]
    return Config(
        path=path,
        name=r.typed(server, key, "name", str, path.stem),
        version=r.typed(server, key, "version", str, "0.0.0"),
        instructions=r.typed(server, key, "instructions", str),
        title=r.typed(server, key, "title", str),
        tools=tuple(t for t in tools if t is not None),
        digest=digest,
    )


def _is_table(r: _Reader, key: tuple[str, ...], value: Any) -> bool:
    if not isinstance(value, dict):
        r.problem(key, f"'{'.'.join(key)}' must be a table")
        return False
    return True


def _read_env(r: _Reader, table: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, str]:
    env = r.typed(table, key, "env", dict, {})
    for name, value in env.items():
        if not isinstance(value, str):
            r.problem(key + ("env", name), f"env value '{name}' must be a string")
    return {k: v for k, v in env.items() if isinstance(v, str)}


def _read_tool(r: _Reader, name: str, t: dict[str, Any], defaults: dict[str, Any],
               base_dir: Path) -> Tool | None:
    key = ("tools", name)
    if not TOOL_NAME.match(name):
        r.problem(key, f"tool name '{name}' must be 1-128 characters of A-Z a-z 0-9 _ - .")
    r.keys(t, key, TOOL_KEYS)
    args = _read_args(r, t, key)
    command = r.typed(t, key, "command", list)
    shell = r.typed(t, key, "shell", str)
    misspelt = any(_closest(k, {"command", "shell"}) for k in t if k not in TOOL_KEYS)
    if ("command" in t) == ("shell" in t) and not misspelt:
        r.problem(key, f"tool '{name}' needs exactly one of 'command' (an argv array) or 'shell' (a script)")
    argv = _check_command(r, key, command, args) if command is not None else None
    output = r.typed(t, key, "output", str, "text")
    if output not in ("text", "json", "mcp") and not MEDIA_OUTPUT.match(output):
        r.problem(key + ("output",), f"output '{output}' must be \"text\", \"json\", \"mcp\" "
                  "or an image/... or audio/... MIME type")
    output_schema = r.typed(t, key, "output_schema", dict)
    if output_schema is not None:
        if output != "json":
            r.problem(key + ("output_schema",), "'output_schema' needs output = \"json\"")
        _check_schema(r, key + ("output_schema",), output_schema)
    stdin_arg = r.typed(t, key, "stdin", str)
    if stdin_arg is not None and stdin_arg not in {a.name for a in args}:
        r.problem(key + ("stdin",), f"stdin names '{stdin_arg}', which is not an argument of '{name}'")
    confirm = r.typed(t, key, "confirm", str)
    if confirm is not None:
        _check_placeholders(r, key + ("confirm",), confirm, args)
    task = r.typed(t, key, "task", str, "never")
    if task not in TASK_MODES:
        r.problem(key + ("task",), f"task '{task}' must be one of: {', '.join(TASK_MODES)}")
    progress = r.typed(t, key, "progress", str)
    pattern = None
    if progress is not None:
        try:
            pattern = re.compile(progress)
        except re.error as exc:
            r.problem(key + ("progress",), f"progress is not a valid regular expression: {exc}")
        else:
            if "progress" not in pattern.groupindex and pattern.groups < 1:
                r.problem(key + ("progress",), "progress needs a group: (?P<progress>...) or (...)")
    codes = r.typed(t, key, "success_codes", list, [0])
    if not codes or not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in codes):
        r.problem(key + ("success_codes",), "success_codes must be a non-empty array of exit codes 0-255")
        codes = [0]
    concurrency = r.typed(t, key, "concurrency", int)
    if concurrency is not None and concurrency < 1:
        r.problem(key + ("concurrency",), "concurrency must be at least 1")
    annotations = r.typed(t, key, "annotations", dict, {})
    r.keys(annotations, key + ("annotations",), set(ANNOTATION_KEYS))
    for ann, value in annotations.items():
        expected = ANNOTATION_KEYS.get(ann)
        if expected is not None and not isinstance(value, expected):
            r.problem(key + ("annotations", ann), f"annotation '{ann}' must be {_TYPE_NAMES[expected]}")
    env = {**defaults["env"], **_read_env(r, t, key)}
    return Tool(
        name=name,
        title=r.typed(t, key, "title", str),
        description=r.typed(t, key, "description", str, ""),
        args=tuple(args),
        command=argv,
        shell=shell,
        cwd=(base_dir / t["cwd"]) if isinstance(t.get("cwd"), str) else defaults["cwd"],
        env=env,
        timeout_s=r.converted(t, key, "timeout", parse_duration, defaults["timeout"]),
        max_output=r.converted(t, key, "max_output", parse_size, defaults["max_output"]),
        output=output,
        output_schema=output_schema,
        annotations=annotations,
        stdin_arg=stdin_arg,
        success_codes=frozenset(codes),
        progress=pattern,
        concurrency=concurrency,
        confirm=confirm,
        task=task,
        task_ttl_s=r.converted(t, key, "task_ttl", parse_duration, 3600.0),
        task_poll_s=r.converted(t, key, "task_poll", parse_duration, 1.0),
        kill_grace_s=r.converted(t, key, "kill_grace", parse_duration, 2.0),
    )


def _read_args(r: _Reader, t: dict[str, Any], key: tuple[str, ...]) -> list[Arg]:
    args = []
    for name, fragment in r.typed(t, key, "args", dict, {}).items():
        akey = key + ("args", name)
        if not ARG_NAME.match(name):
            r.problem(akey, f"argument name '{name}' must match [A-Za-z_][A-Za-z0-9_]* (it becomes MCP_ARG_{name.upper()})")
        if not _is_table(r, akey, fragment):
            continue
        r.keys(fragment, akey, ARG_KEYS)
        schema = {k: v for k, v in fragment.items() if k not in ARG_OWN_KEYS}
        flag = r.typed(fragment, akey, "flag", str)
        if flag is not None and schema.get("type") != "boolean":
            r.problem(akey + ("flag",), "'flag' is for boolean arguments (type = \"boolean\")")
        _check_schema(r, akey, schema)
        optional = r.typed(fragment, akey, "optional", bool, False)
        if fragment.get("elicit") is True and not _elicitable(schema):
            r.problem(akey + ("elicit",), "'elicit' needs a string, number, integer or boolean argument, "
                      "or an array of strings with items.enum (the forms elicitation can ask for)")
        args.append(Arg(name=name, schema=schema, required=not optional and "default" not in schema, flag=flag,
                        elicit=r.typed(fragment, akey, "elicit", bool, False)))
    return args


def _elicitable(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    items = schema.get("items")
    return kind in ("string", "number", "integer", "boolean") or (
        kind == "array" and isinstance(items, dict) and items.get("type") == "string" and "enum" in items)


def _check_schema(r: _Reader, key: tuple[str, ...], schema: Mapping[str, Any]) -> None:
    if not r.check_schemas:
        return
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = key + tuple(str(p) for p in exc.path)
        r.problem(where, f"invalid JSON Schema at '{'.'.join(key)}': {exc.message}")
        return
    if "default" in schema:
        error = next(Draft202012Validator(schema).iter_errors(schema["default"]), None)
        if error is not None:
            r.problem(key + ("default",), f"default does not match its own schema: {error.message}")


def placeholders(template: str) -> Iterator[str]:
    return (m[1] for m in PLACEHOLDER.finditer(template))


def _check_placeholders(r: _Reader, key: tuple[str, ...], template: str, args: list[Arg]) -> None:
    names = {a.name for a in args}
    for name in placeholders(template):
        if name not in names:
            r.problem(key, f"placeholder '{{{name}}}' names no argument"
                      + (f" (arguments: {', '.join(sorted(names))})" if names else " (the tool has no arguments)"))


def _check_command(r: _Reader, key: tuple[str, ...], command: list[Any],
                   args: list[Arg]) -> tuple[str | tuple[str, ...], ...] | None:
    """Check the argv template and return it as tuples (None when it has a problem).

    An element is a string or, after the program, a group: an array of strings holding at least
    one placeholder, dropped whole when an argument it names is absent (one level, no flags in it).
    """
    ckey = key + ("command",)
    if not command:
        r.problem(ckey, "command must not be empty")
    by_name = {a.name: a for a in args}
    before = len(r.problems)
    parts: list[str | tuple[str, ...]] = []
    for i, element in enumerate(command):
        if isinstance(element, str):
            if i == 0 and PLACEHOLDER.search(element):
                r.problem(ckey, "command[0] (the program) cannot be a placeholder")
            parts.append(_check_element(r, ckey, f"command[{i}]", element, by_name, args))
        elif isinstance(element, list) and i > 0:
            parts.append(_check_group(r, ckey, i, element, by_name, args))
        else:
            r.problem(ckey, f"command[{i}] must be a string" + (" or an array of strings (a group)" if i else ""))
    return tuple(parts) if len(r.problems) == before else None


def _check_group(r: _Reader, ckey: tuple[str, ...], i: int, group: list[Any], by_name: dict[str, Arg],
                 args: list[Arg]) -> tuple[str, ...]:
    for j, element in enumerate(group):
        if not isinstance(element, str):
            r.problem(ckey, f"command[{i}][{j}] must be a string" + ("; groups do not nest" if isinstance(element, list) else ""))
    elements = tuple(_check_element(r, ckey, f"command[{i}][{j}]", e, by_name, args)
                     for j, e in enumerate(group) if isinstance(e, str))
    named = {by_name[n].name: by_name[n] for e in elements for n in placeholders(e) if n in by_name}
    if not any(PLACEHOLDER.search(e) for e in elements):
        r.problem(ckey, f"command[{i}] is a group with no placeholder; a group is dropped when "
                  "its arguments are absent, so it needs at least one")
    if sum(a.schema.get("type") == "array" for a in named.values()) > 1:
        r.problem(ckey, f"command[{i}] names two arrays; a group repeats for one array only")
    for a in named.values():
        if a.flag is not None:
            r.problem(ckey, f"command[{i}] holds flag argument '{{{a.name}}}', which drops itself when "
                      "false: make it a command element of its own")
    return elements


def _check_element(r: _Reader, ckey: tuple[str, ...], where: str, element: str, by_name: dict[str, Arg],
                   args: list[Arg]) -> str:
    _check_placeholders(r, ckey, element, args)
    found = [by_name[n] for n in placeholders(element) if n in by_name]
    arrays = [a for a in found if a.schema.get("type") == "array"]
    if len(arrays) > 1:
        r.problem(ckey, f"{where} holds two array placeholders; one element can repeat for one array only")
    for a in found:
        if a.flag is not None and element != "{" + a.name + "}":
            r.problem(ckey, f"flag argument '{{{a.name}}}' must be a whole command element")
        if a.schema.get("type") in ("object",):
            r.problem(ckey, f"object argument '{a.name}' cannot be a placeholder: pass it on stdin or via a shell tool")
    return element
