"""The tools file: TOML in, frozen dataclasses (`config.model`) out, every problem located.

Contract: `load(path)` returns a `Config` or raises `ConfigError` whose
`problems` are `Problem(path, line, col, message)` values, printed as
`FILE:LINE:COL: message`. Unknown keys are errors (a typo must never silently
do nothing). Nothing here runs a command or speaks MCP; the JSON Schema
fragments are checked by `config.schema`.
"""

from __future__ import annotations

import errno
import gc
import hashlib
import os
import re
import stat
import tomllib
import urllib.parse
from collections.abc import Callable, Collection, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from mcpwrap.config.model import (PLACEHOLDER, SUCCESS, TEMPLATE_EXPR, Arg, Config, Limits, PathRule, Problem, Prompt,
                                  PromptArg, PromptMessage, Resource, Sandbox, Spool, Tool)
from mcpwrap.config.model import Toolset as Toolset   # not used here: named for `config.Toolset`'s users
from mcpwrap.config.schema import SchemaChecks, elicitable

T = TypeVar("T")
MAX_FILE_BYTES = 32 * 1024 * 1024        # a tools file past this is refused unread (a log linked by mistake)
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
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
ARG_OWN_KEYS = {"flag", "elicit", "optional", "within", "must_exist", "kind"}
PATH_RULE_KEYS = {"within", "must_exist", "kind"}   # any of them makes the argument a path (see _path_rule)
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
    "maxProperties", "anyOf", "oneOf", "allOf", "not",
    "enumNames"}   # not JSON Schema: an enum's titles in legacy elicitation forms (JSON Schema ignores it)
ARG_KEYS = ARG_SCHEMA_KEYS | ARG_OWN_KEYS


class ConfigError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


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
    """Collects located problems while the document is turned into dataclasses.

    Positions are scanned only once there is a problem to place (a good file of 10,000 tools
    is not scanned at all); the schema fragments are checked once all is read (`schema.SchemaChecks`).
    """

    def __init__(self, path: Path, text: str, check_schemas: bool = True) -> None:
        self.path = path
        self.text = text
        self.problems: list[Problem] = []
        self.schemas = SchemaChecks(check_schemas)

    def check_schemas_now(self) -> None:
        """The meta-checks of the fragments read so far (`SchemaChecks.problems`), each problem located."""
        for key, message in self.schemas.problems():
            self.problem(key, message)

    @cached_property
    def locator(self) -> _Locator:
        return _Locator(self.text)

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
        if name not in table:
            return default
        value = table[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
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
# Keys a tool inherits from [server] and may override.
CONFINEMENT_KEYS = {"sandbox", "limits", "env_inherit"}
SERVER_KEYS = {"name", "version", "title", "instructions", "cwd", "env", "timeout", "max_output"} | CONFINEMENT_KEYS
TOOL_KEYS = {"title", "description", "command", "shell", "args", "cwd", "env", "timeout",
             "max_output", "output", "output_schema", "annotations", "stdin", "success_codes",
             "progress", "concurrency", "confirm", "task", "task_ttl", "task_poll", "kill_grace"} | CONFINEMENT_KEYS
SANDBOX_KEYS = {"read", "write", "network", "system", "required"}
LIMIT_KEYS = {"memory", "cpu", "processes", "open_files", "file_size", "required"}
PATH_PLACEHOLDERS = ("cwd", "home")
# What programs need to start and run, granted read-only unless `system = false`. Secrets such
# as /etc/shadow or ~/.ssh are not here; /proc is not either (it shows every process).
SYSTEM_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache",
               "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/ssl",
               "/etc/ca-certificates", "/etc/localtime", "/etc/nsswitch.conf", "/etc/passwd",
               "/etc/group", "/dev/zero", "/dev/urandom", "/dev/random")
SYSTEM_WRITE = ("/dev/null",)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    reader = _Reader(path, text, check_schemas=not (schemas_known_good and schemas_known_good(digest)))
    config = _read_document(reader, document, path, digest)
    reader.check_schemas_now()
    if reader.problems:
        raise ConfigError(sorted(reader.problems, key=lambda p: (p.line, p.col)))
    return config


def _read_document(r: _Reader, doc: dict[str, Any], path: Path, digest: str) -> Config:
    r.keys(doc, (), {"server", "tools", "resources", "prompts", "spool"})
    server = r.typed(doc, (), "server", dict, {})
    r.keys(server, ("server",), SERVER_KEYS)
    key = ("server",)
    base_dir = path.resolve().parent
    defaults = {
        "cwd": base_dir / r.typed(server, key, "cwd", str, "."),
        "env": _read_env(r, server, key),
        "timeout": r.converted(server, key, "timeout", parse_duration, 60.0),
        "max_output": r.converted(server, key, "max_output", parse_size, 1024 * 1024),
        "sandbox": _sandbox_table(r, server, key),
        "limits": _limits_table(r, server, key) or {},
        "env_inherit": _env_inherit(r, server, key, True),
    }
    tools_table = r.typed(doc, (), "tools", dict, {})
    if not (tools_table or doc.get("resources") or doc.get("prompts")):
        r.problem(("tools",), "no tools defined: add a [tools.NAME] table")
    tools = [_read_tool(r, name, table, defaults, base_dir)
             for name, table in tools_table.items() if _is_table(r, ("tools", name), table)]
    resources = _read_resources(r, doc, defaults, base_dir)
    prompts = _read_prompts(r, doc, defaults, base_dir, {res.uri for res in resources if res.uri})
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
        spool=_read_spool(r, doc),
    )


def _made(cls: type[T], **fields: Any) -> T:
    """What the frozen dataclass `cls` makes of all of its fields (none may be left out: no default
    applies), without its __init__'s object.__setattr__ per field: a tenth of building 10,000 tools."""
    made = object.__new__(cls)
    object.__setattr__(made, "__dict__", fields)
    return made


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
    """One [tools.NAME] table as a `Tool`, every problem in it reported on `r`."""
    key = ("tools", name)
    if not TOOL_NAME.match(name):
        r.problem(key, f"tool name '{name}' must be 1-128 characters of A-Z a-z 0-9 _ - .")
    r.keys(t, key, TOOL_KEYS)
    cwd = _cwd(t, defaults, base_dir)
    args = _read_args(r, t, key, cwd)
    command = r.typed(t, key, "command", list)
    shell = r.typed(t, key, "shell", str)
    if ("command" in t) == ("shell" in t) and not any(_closest(k, {"command", "shell"})
                                                      for k in t if k not in TOOL_KEYS):   # a misspelt one was told
        r.problem(key, f"tool '{name}' needs exactly one of 'command' (an argv array) or 'shell' (a script)")
    argv = _check_command(r, key, command, args) if command is not None else None
    output, output_schema = _read_output(r, t, key)
    stdin_arg = r.typed(t, key, "stdin", str)
    if stdin_arg is not None and stdin_arg not in {a.name for a in args}:
        r.problem(key + ("stdin",), f"stdin names '{stdin_arg}', which is not an argument of '{name}'")
    confirm = r.typed(t, key, "confirm", str)
    if confirm is not None:
        _check_placeholders(r, key + ("confirm",), confirm, {a.name for a in args})
    task = r.typed(t, key, "task", str, "never")
    if task not in TASK_MODES:
        r.problem(key + ("task",), f"task '{task}' must be one of: {', '.join(TASK_MODES)}")
    progress, codes = _read_progress(r, t, key), _read_success_codes(r, t, key)
    concurrency = r.typed(t, key, "concurrency", int)
    if concurrency is not None and concurrency < 1:
        r.problem(key + ("concurrency",), "concurrency must be at least 1")
    annotations = _read_annotations(r, t, key)
    env = {**defaults["env"], **_read_env(r, t, key)}
    return _made(
        Tool,
        name=name,
        title=r.typed(t, key, "title", str),
        description=r.typed(t, key, "description", str, ""),
        args=tuple(args),
        command=argv,
        shell=shell,
        cwd=cwd,
        env=env,
        timeout_s=r.converted(t, key, "timeout", parse_duration, defaults["timeout"]),
        max_output=r.converted(t, key, "max_output", parse_size, defaults["max_output"]),
        output=output,
        output_schema=output_schema,
        annotations=annotations,
        stdin_arg=stdin_arg,
        success_codes=codes,
        progress=progress,
        concurrency=concurrency,
        confirm=confirm,
        task=task,
        task_ttl_s=r.converted(t, key, "task_ttl", parse_duration, 3600.0),
        task_poll_s=r.converted(t, key, "task_poll", parse_duration, 1.0),
        kill_grace_s=r.converted(t, key, "kill_grace", parse_duration, 2.0),
        sandbox=_sandbox(r, t, key, defaults["sandbox"], cwd, args),
        limits=_limits(r, t, key, defaults["limits"]),
        env_inherit=_env_inherit(r, t, key, defaults["env_inherit"]),
    )


def _read_output(r: _Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> tuple[str, dict[str, Any] | None]:
    """What a tool's stdout is (`output`) and the schema of its JSON (`output_schema`, for "json" only)."""
    output = r.typed(t, key, "output", str, "text")
    if output not in ("text", "json", "mcp") and not MEDIA_OUTPUT.match(output):
        r.problem(key + ("output",), f"output '{output}' must be \"text\", \"json\", \"mcp\" "
                  "or an image/... or audio/... MIME type")
    output_schema = r.typed(t, key, "output_schema", dict)
    if output_schema is not None:
        if output != "json":
            r.problem(key + ("output_schema",), "'output_schema' needs output = \"json\"")
        r.schemas.add(key + ("output_schema",), output_schema)
    return output, output_schema


def _read_progress(r: _Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> re.Pattern[str] | None:
    """The pattern that finds progress in stderr lines: it needs a group (named `progress`, or the first)."""
    progress = r.typed(t, key, "progress", str)
    if progress is None:
        return None
    try:
        pattern = re.compile(progress)
    except re.error as exc:
        r.problem(key + ("progress",), f"progress is not a valid regular expression: {exc}")
        return None
    if "progress" not in pattern.groupindex and pattern.groups < 1:
        r.problem(key + ("progress",), "progress needs a group: (?P<progress>...) or (...)")
    return pattern


def _read_success_codes(r: _Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> frozenset[int]:
    """The exit codes that mean success (0 unless `success_codes` says otherwise)."""
    codes = r.typed(t, key, "success_codes", list)
    if codes is None:
        return SUCCESS
    if not (codes and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in codes)):
        r.problem(key + ("success_codes",), "success_codes must be a non-empty array of exit codes 0-255")
        return SUCCESS
    return frozenset(codes)


def _read_annotations(r: _Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, Any]:
    """The MCP tool annotations, each of its type."""
    annotations: dict[str, Any] = r.typed(t, key, "annotations", dict, {})
    r.keys(annotations, key + ("annotations",), set(ANNOTATION_KEYS))
    for ann, value in annotations.items():
        expected = ANNOTATION_KEYS.get(ann)
        if expected is not None and not isinstance(value, expected):
            r.problem(key + ("annotations", ann), f"annotation '{ann}' must be {_TYPE_NAMES[expected]}")
    return annotations


def _expand_path(entry: str, cwd: Path) -> str:
    """{cwd} and {home} filled, relative to cwd, normalised (symlinks are resolved when used)."""
    text = entry.replace("{cwd}", str(cwd)).replace("{home}", str(Path.home()))
    return os.path.normpath(cwd / text)


def _paths(r: _Reader, table: Mapping[str, Any], key: tuple[str, ...], name: str) -> list[str] | None:
    entries = r.typed(table, key, name, list)
    if entries is None:
        return None
    for i, entry in enumerate(entries):
        if not isinstance(entry, str) or not entry:
            r.problem(key + (name,), f"'{'.'.join(key + (name,))}[{i}]' must be a non-empty path")
            return None
        unknown = [n for n in placeholders(entry) if n not in PATH_PLACEHOLDERS]
        if unknown:
            r.problem(key + (name,), f"'{{{unknown[0]}}}' in '{'.'.join(key + (name,))}' is not a path "
                      "placeholder (use {cwd} or {home})")
            return None
    return entries


def _sandbox_table(r: _Reader, table: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, Any] | None:
    """The keys one [*.sandbox] table sets, checked; None when it is absent or false."""
    raw = r.typed(table, key, "sandbox", (dict, bool))
    if raw is True:
        return {}
    if not isinstance(raw, dict):
        return None
    skey = key + ("sandbox",)
    r.keys(raw, skey, SANDBOX_KEYS)
    found = {name: _paths(r, raw, skey, name) for name in ("read", "write") if name in raw}
    found |= {name: r.typed(raw, skey, name, bool) for name in ("network", "system", "required") if name in raw}
    return {k: v for k, v in found.items() if v is not None}


def _sandbox(r: _Reader, t: Mapping[str, Any], key: tuple[str, ...], inherited: Mapping[str, Any] | None,
             cwd: Path, args: list[Arg]) -> Sandbox | None:
    """The tool's effective sandbox: its own keys over the server's; `sandbox = false` opts out."""
    if t.get("sandbox") is False or "sandbox" not in t and inherited is None:
        return None
    own = _sandbox_table(r, t, key)
    if own is None and inherited is None:
        return None
    merged = {**(inherited or {}), **(own or {})}
    system = merged.get("system", True)
    roots = [root for a in args if a.path for root in a.path.within]   # what path arguments may name
    read = [*(SYSTEM_READ if system else ()), *(_expand_path(p, cwd) for p in merged.get("read", ["{cwd}"])), *roots]
    write = [*(SYSTEM_WRITE if system else ()), *(_expand_path(p, cwd) for p in merged.get("write", []))]
    return Sandbox(read=tuple(dict.fromkeys(read)), write=tuple(dict.fromkeys(write)),
                   network=merged.get("network", False), required=merged.get("required", True))


def _positive_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise ValueError(f"{value!r} must be a positive integer")


_LIMIT_PARSERS: dict[str, Callable[[Any], Any]] = {
    "memory": parse_size, "cpu": parse_duration, "processes": _positive_int,
    "open_files": _positive_int, "file_size": parse_size}


def _limits_table(r: _Reader, table: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, Any] | None:
    raw = r.typed(table, key, "limits", (dict, bool))
    if not isinstance(raw, dict):
        return None
    lkey = key + ("limits",)
    r.keys(raw, lkey, LIMIT_KEYS)
    found = {name: r.converted(raw, lkey, name, parse, None) for name, parse in _LIMIT_PARSERS.items()}
    found["required"] = r.typed(raw, lkey, "required", bool)
    return {k: v for k, v in found.items() if v is not None}


def _limits(r: _Reader, t: Mapping[str, Any], key: tuple[str, ...], inherited: Mapping[str, Any]) -> Limits | None:
    if t.get("limits") is False or "limits" not in t and not inherited:
        return None
    merged = {**inherited, **(_limits_table(r, t, key) or {})}
    if not set(merged) - {"required"}:
        return None
    return Limits(memory=merged.get("memory"), cpu_s=merged.get("cpu"), processes=merged.get("processes"),
                  open_files=merged.get("open_files"), file_size=merged.get("file_size"),
                  required=merged.get("required", True))


def _env_inherit(r: _Reader, table: Mapping[str, Any], key: tuple[str, ...],
                 default: bool | tuple[str, ...]) -> bool | tuple[str, ...]:
    value = r.typed(table, key, "env_inherit", (bool, list), default)
    if isinstance(value, list):
        bad = [v for v in value if not isinstance(v, str) or not ENV_NAME.match(v)]
        if bad:
            r.problem(key + ("env_inherit",), f"env_inherit lists {bad[0]!r}, which is not a variable name")
        return tuple(v for v in value if v not in bad)
    return value


def _read_args(r: _Reader, t: dict[str, Any], key: tuple[str, ...], cwd: Path) -> list[Arg]:
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
        r.schemas.add(akey, schema)
        optional = r.typed(fragment, akey, "optional", bool, False)
        if fragment.get("elicit") is True and not elicitable(schema):
            r.problem(akey + ("elicit",), "'elicit' needs a string, number, integer or boolean argument, "
                      "or an array with items.enum or items.anyOf of {const, title} (the forms elicitation can ask for)")
        names, values = schema.get("enumNames"), schema.get("enum")
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)
                                      and isinstance(values, list) and len(names) == len(values)):
            r.problem(akey + ("enumNames",), "'enumNames' needs an enum, and one string title per enum value")
        args.append(_made(Arg, name=name, schema=schema, required=not optional and "default" not in schema,
                          flag=flag, elicit=r.typed(fragment, akey, "elicit", bool, False),
                          path=_path_rule(r, fragment, akey, schema, cwd)))
    return args


def _path_rule(r: _Reader, fragment: Mapping[str, Any], key: tuple[str, ...], schema: Mapping[str, Any],
               cwd: Path) -> PathRule | None:
    """`format = "path"` (or any of within/must_exist/kind) makes a string argument a confined path."""
    items: Mapping[str, Any] = schema["items"] if isinstance(schema.get("items"), dict) else {}
    if schema.get("format") != "path" and items.get("format") != "path" and PATH_RULE_KEYS.isdisjoint(fragment):
        return None
    if not (schema.get("type") == "string" or schema.get("type") == "array" and items.get("type") == "string"):
        r.problem(key, "a path argument (format = \"path\", within, must_exist, kind) must be a string "
                  "or an array of strings")
    kind = r.typed(fragment, key, "kind", str)
    if kind not in (None, "file", "dir"):
        r.problem(key + ("kind",), f"kind '{kind}' must be \"file\" or \"dir\"")
        kind = None
    within = _paths(r, fragment, key, "within") or []
    return PathRule(within=tuple(_expand_path(p, cwd) for p in within),
                    must_exist=r.typed(fragment, key, "must_exist", bool, False), kind=kind)


def placeholders(template: str) -> Iterator[str]:
    return (m[1] for m in PLACEHOLDER.finditer(template))


def _check_placeholders(r: _Reader, key: tuple[str, ...], template: str | list[str], names: Collection[str]) -> None:
    """Each placeholder of the template (or these, already found) names an argument."""
    for name in placeholders(template) if isinstance(template, str) else template:
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
            parts.append(_check_element(r, ckey, f"command[{i}]", element, by_name))
        elif isinstance(element, list) and i > 0:
            parts.append(_check_group(r, ckey, i, element, by_name))
        else:
            r.problem(ckey, f"command[{i}] must be a string" + (" or an array of strings (a group)" if i else ""))
    return tuple(parts) if len(r.problems) == before else None


def _check_group(r: _Reader, ckey: tuple[str, ...], i: int, group: list[Any], by_name: dict[str, Arg]) -> tuple[str, ...]:
    for j, element in enumerate(group):
        if not isinstance(element, str):
            r.problem(ckey, f"command[{i}][{j}] must be a string" + ("; groups do not nest" if isinstance(element, list) else ""))
    elements = tuple(_check_element(r, ckey, f"command[{i}][{j}]", e, by_name)
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


def _check_element(r: _Reader, ckey: tuple[str, ...], where: str, element: str, by_name: dict[str, Arg]) -> str:
    if "{" not in element:               # most elements: nothing to check
        return element
    whole = PLACEHOLDER.fullmatch(element)
    if whole and (arg := by_name.get(whole[1])) is not None and arg.schema.get("type") != "object":
        return element                    # the next most: one known argument fills the element, as below allows
    named = list(placeholders(element))
    _check_placeholders(r, ckey, named, by_name)
    found = [by_name[n] for n in named if n in by_name]
    arrays = [a for a in found if a.schema.get("type") == "array"]
    if len(arrays) > 1:
        r.problem(ckey, f"{where} holds two array placeholders; one element can repeat for one array only")
    for a in found:
        if a.flag is not None and element != "{" + a.name + "}":
            r.problem(ckey, f"flag argument '{{{a.name}}}' must be a whole command element")
        if a.schema.get("type") in ("object",):
            r.problem(ckey, f"object argument '{a.name}' cannot be a placeholder: pass it on stdin or via a shell tool")
    return element


# --- [spool], [resources.NAME], [prompts.NAME]: more of MCP than tools -------------------------
SPOOL_KEYS = {"quota", "ttl"}
RESOURCE_KEYS = {"title", "description", "uri", "uri_template", "path", "mime_type", "command", "shell", "args",
                 "cwd", "env", "timeout", "max_output", "kill_grace", "output", "cache_ttl", "cache_scope"}
PROMPT_KEYS = {"title", "description", "args", "messages"}
PROMPT_ARG_KEYS = {"title", "description", "required", "enum", "examples", "complete"}
MESSAGE_KEYS = {"role", "text", "resource", "command", "shell"}
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$")
OUTPUT_URI = "mcpwrap://output/"   # reserved for the spool (kept output beyond max_output)


def template_variables(template: str) -> list[tuple[str, bool]]:
    """(name, in the query) for each variable of a URI template."""
    return [(name, bool(q)) for q, names in TEMPLATE_EXPR.findall(template) for name in names.split(",")]


def _read_spool(r: _Reader, doc: dict[str, Any]) -> Spool:
    table = r.typed(doc, (), "spool", dict, {})
    r.keys(table, ("spool",), SPOOL_KEYS)
    quota = 0 if table.get("quota") in (0, "0") else r.converted(table, ("spool",), "quota", parse_size, Spool.quota)
    return Spool(quota, r.converted(table, ("spool",), "ttl", parse_duration, Spool.ttl_s))


def _completers(r: _Reader, t: dict[str, Any], key: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """The table without its args' `complete` keys (not JSON Schema), and those commands by argument."""
    found: dict[str, tuple[str, ...]] = {}
    args = t.get("args")
    if not isinstance(args, dict):
        return t, found
    stripped = {}
    for name, fragment in args.items():
        if isinstance(fragment, dict) and "complete" in fragment:
            argv = _argv(r, key + ("args", name, "complete"), fragment["complete"])
            if argv:
                found[name] = argv
            fragment = {k: v for k, v in fragment.items() if k != "complete"}
        stripped[name] = fragment
    return {**t, "args": stripped}, found


def _argv(r: _Reader, key: tuple[str, ...], value: Any) -> tuple[str, ...] | None:
    if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
        r.problem(key, f"'{'.'.join(key)}' must be a non-empty array of strings (an argv)")
        return None
    return tuple(value)


def _command_tool(r: _Reader, name: str, t: dict[str, Any], key: tuple[str, ...], args: list[Arg],
                  defaults: dict[str, Any], base_dir: Path, output: str = "text") -> Tool | None:
    """A resource's or prompt message's command, run exactly like a tool's (same runner, same rules,
    and the server's sandbox, limits and env_inherit)."""
    command = r.typed(t, key, "command", list)
    argv = _check_command(r, key, command, args) if command is not None else None
    if command is not None and argv is None:
        return None
    cwd = _cwd(t, defaults, base_dir)
    return Tool(name=name, description="", args=tuple(args),
                command=argv, shell=r.typed(t, key, "shell", str),
                cwd=cwd, env={**defaults["env"], **_read_env(r, t, key)},
                timeout_s=r.converted(t, key, "timeout", parse_duration, defaults["timeout"]),
                max_output=r.converted(t, key, "max_output", parse_size, defaults["max_output"]),
                output=output, kill_grace_s=r.converted(t, key, "kill_grace", parse_duration, 2.0),
                sandbox=_sandbox(r, {}, key, defaults["sandbox"], cwd, args),
                limits=_limits(r, {}, key, defaults["limits"]), env_inherit=defaults["env_inherit"])


def _cwd(t: Mapping[str, Any], defaults: dict[str, Any], base_dir: Path) -> Path:
    return (base_dir / t["cwd"]) if isinstance(t.get("cwd"), str) else defaults["cwd"]


def _named_tables(r: _Reader, doc: dict[str, Any], section: str,
                  allowed: set[str]) -> Iterator[tuple[str, tuple[str, ...], dict[str, Any]]]:
    """[section.NAME] tables with a valid name and only allowed keys (problems located, tables kept)."""
    for name, table in r.typed(doc, (), section, dict, {}).items():
        key = (section, name)
        if not _is_table(r, key, table):
            continue
        if not TOOL_NAME.match(name):
            r.problem(key, f"{section[:-1]} name '{name}' must be 1-128 characters of A-Z a-z 0-9 _ - .")
        r.keys(table, key, allowed)
        yield name, key, table


def _read_resources(r: _Reader, doc: dict[str, Any], defaults: dict[str, Any], base_dir: Path) -> tuple[Resource, ...]:
    out: list[Resource] = []
    for name, key, table in _named_tables(r, doc, "resources", RESOURCE_KEYS):
        resource = _read_resource(r, name, table, key, defaults, base_dir)
        if resource is not None:
            out.append(resource)
    seen: set[str] = set()
    for resource in out:
        ident = resource.uri or resource.uri_template or ""
        if ident in seen:
            r.problem(("resources", resource.name), f"URI '{ident}' is used by two resources")
        seen.add(ident)
    return tuple(out)


def _read_resource(r: _Reader, name: str, t: dict[str, Any], key: tuple[str, ...], defaults: dict[str, Any],
                   base_dir: Path) -> Resource | None:
    sources = [k for k in ("path", "command", "shell") if k in t]
    if len(sources) != 1:
        r.problem(key, f"resource '{name}' needs exactly one of 'path' (a file), 'command' (an argv array) "
                  "or 'shell' (a script)")
        return None
    uri = r.typed(t, key, "uri", str)
    template = r.typed(t, key, "uri_template", str)
    for field_name, value in (("uri", uri), ("uri_template", template)):
        if value is not None and (not URI.match(value) or value.startswith(OUTPUT_URI)):
            r.problem(key + (field_name,), f"'{field_name}' must be an absolute URI (scheme:...) "
                      f"outside {OUTPUT_URI}, which mcpwrap keeps for output beyond max_output")
    if uri is not None and template is not None:
        r.problem(key, "give 'uri' or 'uri_template', not both")
    scope = r.typed(t, key, "cache_scope", str, "private")
    if scope not in ("private", "public"):
        r.problem(key + ("cache_scope",), "cache_scope must be \"private\" or \"public\"")
    output = r.typed(t, key, "output", str, "text")
    if output not in ("text", "blob"):
        r.problem(key + ("output",), "output must be \"text\" or \"blob\" (base64)")
    common = dict(name=name, title=r.typed(t, key, "title", str), description=r.typed(t, key, "description", str),
                  cache_scope=scope,
                  cache_ttl_ms=int(r.converted(t, key, "cache_ttl", parse_duration, 0.0) * 1000))
    mime = r.typed(t, key, "mime_type", str)
    if "path" in t:
        for bad in sorted({"uri_template", "args", "command", "shell", "cwd", "env", "timeout", "kill_grace",
                           "output"} & set(t)):
            r.problem(key + (bad,), f"'{bad}' is for command resources; a 'path' resource is one fixed file")
        import mimetypes                  # here: only a file resource without a mime_type needs it

        path = base_dir / r.typed(t, key, "path", str, "")
        return Resource(uri=uri or "file://" + urllib.parse.quote(str(path)), uri_template=None, path=path,
                        mime_type=mime or mimetypes.guess_type(path.name)[0] or "application/octet-stream",
                        **common)
    table, completers = _completers(r, t, key)
    args = _read_args(r, table, key, _cwd(table, defaults, base_dir))
    names = {a.name for a in args}
    for var in completers.keys() - names:
        r.problem(key + ("args", var), f"'{var}' is not an argument")
    if template is not None:
        variables = [v for v, _ in template_variables(template)]
        for var in variables:
            if var not in names:
                r.problem(key + ("uri_template",), f"template variable '{{{var}}}' names no argument")
        for arg in args:
            if arg.name not in variables:
                r.problem(key + ("args", arg.name), f"argument '{arg.name}' is not a variable of uri_template")
    elif args:
        r.problem(key + ("args",), "arguments of a resource are the variables of its 'uri_template'")
    tool = _command_tool(r, f"resources.{name}", table, key, args, defaults, base_dir,
                         "blob" if output == "blob" else "text")
    if tool is None:
        return None
    return Resource(uri=None if template else uri or f"mcpwrap://resource/{name}", uri_template=template,
                    tool=tool, blob=output == "blob", completers=completers,
                    mime_type=mime or ("application/octet-stream" if output == "blob" else "text/plain"), **common)


def _read_prompts(r: _Reader, doc: dict[str, Any], defaults: dict[str, Any], base_dir: Path,
                  resource_uris: set[str]) -> tuple[Prompt, ...]:
    out = []
    for name, key, t in _named_tables(r, doc, "prompts", PROMPT_KEYS):
        args = [_read_prompt_arg(r, key + ("args", arg_name), arg_name, fragment)
                for arg_name, fragment in r.typed(t, key, "args", dict, {}).items()
                if _is_table(r, key + ("args", arg_name), fragment)]
        # A command message sees the arguments as a tool would: strings, enum-checked, same injection rules.
        as_tool_args = [Arg(a.name, {"type": "string", **({"enum": list(a.enum)} if a.enum else {})}, a.required)
                        for a in args]
        messages = []
        raw_messages = r.typed(t, key, "messages", list, [])
        if not raw_messages:
            r.problem(key, f"prompt '{name}' needs 'messages': an array of {{ role, text | resource | command | shell }}")
        for i, m in enumerate(raw_messages):
            mkey = key + ("messages",)
            if not isinstance(m, dict):
                r.problem(mkey, f"messages[{i}] must be a table")
                continue
            r.keys(m, mkey, MESSAGE_KEYS)
            role = r.typed(m, mkey, "role", str, "user")
            if role not in ("user", "assistant"):
                r.problem(mkey, f"messages[{i}].role must be \"user\" or \"assistant\"")
            kinds = [k for k in ("text", "resource", "command", "shell") if k in m]
            if len(kinds) != 1:
                r.problem(mkey, f"messages[{i}] needs exactly one of text, resource, command, shell")
                continue
            text, resource = r.typed(m, mkey, "text", str), r.typed(m, mkey, "resource", str)
            for template in (text, resource):
                if template is not None:
                    _check_placeholders(r, mkey, template, {a.name for a in as_tool_args})
            if resource is not None and not PLACEHOLDER.search(resource) and resource not in resource_uris:
                r.problem(mkey, f"messages[{i}].resource '{resource}' is not the uri of a [resources] table")
            tool = None
            if kinds[0] in ("command", "shell"):
                tool = _command_tool(r, f"prompts.{name}.messages[{i}]", m, mkey, as_tool_args, defaults, base_dir)
            messages.append(PromptMessage(role, text, resource, tool))
        out.append(Prompt(name, tuple(args), tuple(messages), r.typed(t, key, "title", str),
                          r.typed(t, key, "description", str)))
    return tuple(out)


def _read_prompt_arg(r: _Reader, key: tuple[str, ...], name: str, t: dict[str, Any]) -> PromptArg:
    if not ARG_NAME.match(name):
        r.problem(key, f"argument name '{name}' must match [A-Za-z_][A-Za-z0-9_]*")
    r.keys(t, key, PROMPT_ARG_KEYS)
    strings: dict[str, tuple[str, ...] | None] = {}
    for list_key in ("enum", "examples"):
        value = r.typed(t, key, list_key, list)
        if value is not None and not all(isinstance(v, str) for v in value):
            r.problem(key + (list_key,), f"'{list_key}' must be an array of strings (prompt arguments are strings)")
            value = None
        strings[list_key] = tuple(value) if value is not None else None
    return PromptArg(name, r.typed(t, key, "required", bool, False), r.typed(t, key, "title", str),
                     r.typed(t, key, "description", str), strings["enum"], strings["examples"] or (),
                     _argv(r, key + ("complete",), t["complete"]) if "complete" in t else None)
