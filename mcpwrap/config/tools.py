"""A [tools.NAME] table: its arguments, its argv template, its output, its confinement.

`read_tool` turns one table into a `Tool`, reporting every problem on the `Reader`. The
confinement keys (`sandbox`, `limits`, `env_inherit`) are read here for a tool and for [server],
whose values a tool inherits and may override; a resource's or a prompt's command is checked
with the same `read_args` and `check_command` (`config.content`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from mcpwrap.config.asking import read_ask, read_ask_times
from mcpwrap.config.model import PLACEHOLDER, SUCCESS, Arg, Limits, PathRule, Sandbox, Tool
from mcpwrap.config.reader import TYPE_NAMES, Reader, closest, is_table, parse_duration, parse_size
from mcpwrap.config.schema import elicitable

T = TypeVar("T")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MEDIA_OUTPUT = re.compile(r"^(image|audio)/[A-Za-z0-9.+-]+$")
TASK_MODES = ("never", "optional", "always")
ANNOTATION_KEYS = {"title": str, "readOnlyHint": bool, "destructiveHint": bool,
                   "idempotentHint": bool, "openWorldHint": bool}
# Keys of an args.NAME table that belong to mcpwrap, not to JSON Schema.
ARG_OWN_KEYS = {"flag", "elicit", "optional", "within", "must_exist", "kind", "secret"}
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
# Keys a tool inherits from [server] and may override.
CONFINEMENT_KEYS = {"sandbox", "limits", "env_inherit"}
TOOL_KEYS = {"title", "description", "command", "shell", "args", "cwd", "env", "timeout",
             "max_output", "output", "output_schema", "annotations", "stdin", "success_codes",
             "protocol_error_codes", "progress", "concurrency", "confirm", "task", "task_ttl", "task_poll", "task_asks", "kill_grace", "allow",
             "ask", "ask_timeout", "ask_quiet", "tty"} | CONFINEMENT_KEYS
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
# An `allow` entry (`protocol.access` decides with them): anyone authenticated, or one kind of name.
ALLOW_RULE = re.compile(r"^(\*|(token|user|scope|group):\S+)$")


def _made(cls: type[T], **fields: Any) -> T:
    """What the frozen dataclass `cls` makes of all of its fields (none may be left out: no default
    applies), without its __init__'s object.__setattr__ per field: a tenth of building 10,000 tools."""
    made = object.__new__(cls)
    object.__setattr__(made, "__dict__", fields)
    return made


def read_env(r: Reader, table: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, str]:
    """The `env` table, each value with the server's ${VAR}s filled (argument values never are)."""
    env = r.typed(table, key, "env", dict, {})
    found = {}
    for name, value in env.items():
        if isinstance(value, str):
            found[name] = r.expanded(key + ("env", name), f"env value '{name}'", value)
        else:
            r.problem(key + ("env", name), f"env value '{name}' must be a string")
    return found


def where_it_runs(r: Reader, t: Mapping[str, Any], key: tuple[str, ...], defaults: dict[str, Any],
                  base_dir: Path) -> tuple[Path, dict[str, str]]:
    """Where a command of the tools file runs and the variables it gets over the inherited ones, whatever
    asks for it (a tool, a resource, a prompt message, a completion): its table's `cwd` (${VAR}s filled,
    relative to the tools file) else [server] cwd, and [server] env with the table's `env` over it. The
    one rule, stated once in mcpwrap-tools(5) (WHERE COMMANDS RUN)."""
    cwd = r.typed(t, key, "cwd", str)
    place = defaults["cwd"] if cwd is None else base_dir / r.expanded(key + ("cwd",), "cwd", cwd)
    return place, {**defaults["env"], **read_env(r, t, key)}


def read_tool(r: Reader, name: str, t: dict[str, Any], defaults: dict[str, Any],
              base_dir: Path) -> Tool | None:
    """One [tools.NAME] table as a `Tool`, every problem in it reported on `r`."""
    key = ("tools", name)
    if not TOOL_NAME.match(name):
        r.problem(key, f"tool name '{name}' must be 1-128 characters of A-Z a-z 0-9 _ - .")
    r.keys(t, key, TOOL_KEYS)
    cwd, env = where_it_runs(r, t, key, defaults, base_dir)
    args = read_args(r, t, key, cwd)
    argv, shell = _read_command(r, t, key, name, args)
    output, output_schema = _read_output(r, t, key)
    stdin_arg = _read_stdin(r, t, key, name, args)
    confirm = r.typed(t, key, "confirm", str)
    if confirm is not None:
        check_placeholders(r, key + ("confirm",), confirm, {a.name for a in args})
    progress, (codes, protocol_codes) = _read_progress(r, t, key), _read_exit_codes(r, t, key)
    concurrency = r.typed(t, key, "concurrency", int)
    if concurrency is not None and concurrency < 1:
        r.problem(key + ("concurrency",), "concurrency must be at least 1")
    annotations = _read_annotations(r, t, key)
    timeout_s = r.converted(t, key, "timeout", parse_duration, defaults["timeout"])
    ask_timeout_s, ask_quiet_s = read_ask_times(r, t, key, timeout_s)
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
        timeout_s=timeout_s,
        max_output=r.converted(t, key, "max_output", parse_size, defaults["max_output"]),
        output=output,
        output_schema=output_schema,
        annotations=annotations,
        stdin_arg=stdin_arg,
        success_codes=codes,
        protocol_error_codes=protocol_codes,
        progress=progress,
        concurrency=concurrency,
        confirm=confirm,
        **_read_task(r, t, key),
        kill_grace_s=r.converted(t, key, "kill_grace", parse_duration, 2.0),
        sandbox=sandbox_of(r, t, key, defaults["sandbox"], cwd, args),
        limits=limits_of(r, t, key, defaults["limits"]),
        env_inherit=env_inherit(r, t, key, defaults["env_inherit"]),
        allow=read_allow(r, t, key, defaults["allow"]),
        ask=read_ask(r, t, key),
        ask_timeout_s=ask_timeout_s,
        ask_quiet_s=ask_quiet_s,
        tty=r.typed(t, key, "tty", bool, False),
    )


def _read_task(r: Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, Any]:
    """How the tool runs as a task: its mode, ttl, poll interval and whether the task asks itself."""
    task = r.typed(t, key, "task", str, "never")
    if task not in TASK_MODES:
        r.problem(key + ("task",), f"task '{task}' must be one of: {', '.join(TASK_MODES)}")
    task_asks = r.typed(t, key, "task_asks", bool, False)
    if task_asks and task == "never":
        r.problem(key + ("task_asks",), "task_asks needs task = \"optional\" or \"always\"")
    return {"task": task, "task_asks": task_asks,
            "task_ttl_s": r.converted(t, key, "task_ttl", parse_duration, 3600.0),
            "task_poll_s": r.converted(t, key, "task_poll", parse_duration, 1.0)}


def _read_command(r: Reader, t: Mapping[str, Any], key: tuple[str, ...], name: str,
                  args: list[Arg]) -> tuple[tuple[str | tuple[str, ...], ...] | None, str | None]:
    """`command` (an argv template, checked) or `shell` (a script): exactly one of them."""
    command = r.typed(t, key, "command", list)
    shell = r.typed(t, key, "shell", str)
    if ("command" in t) == ("shell" in t) and not any(closest(k, {"command", "shell"})
                                                     for k in t if k not in TOOL_KEYS):   # a misspelt one was told
        r.problem(key, f"tool '{name}' needs exactly one of 'command' (an argv array) or 'shell' (a script)")
    return (check_command(r, key, command, args) if command is not None else None), shell


def _read_stdin(r: Reader, t: Mapping[str, Any], key: tuple[str, ...], name: str, args: list[Arg]) -> str | None:
    """`stdin`: the argument whose value the command reads on stdin; not with `ask` or `tty`, whose
    answers are written there while it runs."""
    stdin_arg = r.typed(t, key, "stdin", str)
    if stdin_arg is not None and stdin_arg not in {a.name for a in args}:
        r.problem(key + ("stdin",), f"stdin names '{stdin_arg}', which is not an argument of '{name}'")
    for conflict in ("ask", "tty"):
        if stdin_arg is not None and t.get(conflict):
            r.problem(key + (conflict,), f"a tool with '{conflict}' cannot also take 'stdin' (an argument's value ends "
                      "with the end of stdin; answers go there while it runs)")
    return stdin_arg


def _read_output(r: Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> tuple[str, dict[str, Any] | None]:
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


def _read_progress(r: Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> re.Pattern[str] | None:
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


def _read_exit_codes(r: Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> tuple[frozenset[int], frozenset[int]]:
    """The exit codes that mean success (0 unless `success_codes` says otherwise), and those that mean a
    protocol error (`protocol_error_codes`, none unless given): never one code both."""
    found = []
    for name, default in (("success_codes", SUCCESS), ("protocol_error_codes", frozenset[int]())):
        codes = r.typed(t, key, name, list)
        if codes is not None and not (codes and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255
                                                    for c in codes)):
            r.problem(key + (name,), f"{name} must be a non-empty array of exit codes 0-255")
            codes = None
        found.append(default if codes is None else frozenset(codes))
    success, protocol = found
    if success & protocol:
        r.problem(key + ("protocol_error_codes",), "protocol_error_codes names a success code: "
                  f"{', '.join(map(str, sorted(success & protocol)))} (see success_codes; 0 unless it says otherwise)")
    return success, protocol


def _read_annotations(r: Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, Any]:
    """The MCP tool annotations, each of its type."""
    annotations: dict[str, Any] = r.typed(t, key, "annotations", dict, {})
    r.keys(annotations, key + ("annotations",), set(ANNOTATION_KEYS))
    for ann, value in annotations.items():
        expected = ANNOTATION_KEYS.get(ann)
        if expected is not None and not isinstance(value, expected):
            r.problem(key + ("annotations", ann), f"annotation '{ann}' must be {TYPE_NAMES[expected]}")
    return annotations


def _expand_path(entry: str, cwd: Path) -> str:
    """{cwd} and {home} filled, relative to cwd, normalised (symlinks are resolved when used)."""
    text = entry.replace("{cwd}", str(cwd)).replace("{home}", str(Path.home()))
    return os.path.normpath(cwd / text)


def _paths(r: Reader, table: Mapping[str, Any], key: tuple[str, ...], name: str) -> list[str] | None:
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


def sandbox_table(r: Reader, table: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, Any] | None:
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


def sandbox_of(r: Reader, t: Mapping[str, Any], key: tuple[str, ...], inherited: Mapping[str, Any] | None,
               cwd: Path, args: list[Arg]) -> Sandbox | None:
    """The tool's effective sandbox: its own keys over the server's; `sandbox = false` opts out."""
    if t.get("sandbox") is False or "sandbox" not in t and inherited is None:
        return None
    own = sandbox_table(r, t, key)
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


def limits_table(r: Reader, table: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, Any] | None:
    raw = r.typed(table, key, "limits", (dict, bool))
    if not isinstance(raw, dict):
        return None
    lkey = key + ("limits",)
    r.keys(raw, lkey, LIMIT_KEYS)
    found = {name: r.converted(raw, lkey, name, parse, None) for name, parse in _LIMIT_PARSERS.items()}
    found["required"] = r.typed(raw, lkey, "required", bool)
    return {k: v for k, v in found.items() if v is not None}


def limits_of(r: Reader, t: Mapping[str, Any], key: tuple[str, ...], inherited: Mapping[str, Any]) -> Limits | None:
    if t.get("limits") is False or "limits" not in t and not inherited:
        return None
    merged = {**inherited, **(limits_table(r, t, key) or {})}
    if not set(merged) - {"required"}:
        return None
    return Limits(memory=merged.get("memory"), cpu_s=merged.get("cpu"), processes=merged.get("processes"),
                  open_files=merged.get("open_files"), file_size=merged.get("file_size"),
                  required=merged.get("required", True))


def env_inherit(r: Reader, table: Mapping[str, Any], key: tuple[str, ...],
                default: bool | tuple[str, ...]) -> bool | tuple[str, ...]:
    value = r.typed(table, key, "env_inherit", (bool, list), default)
    if isinstance(value, list):
        bad = [v for v in value if not isinstance(v, str) or not ENV_NAME.match(v)]
        if bad:
            r.problem(key + ("env_inherit",), f"env_inherit lists {bad[0]!r}, which is not a variable name")
        return tuple(v for v in value if v not in bad)
    return value


def read_allow(r: Reader, table: Mapping[str, Any], key: tuple[str, ...],
               default: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """`allow`: who may use a tool, resource or prompt over HTTP (`ALLOW_RULE` entries), else `default`."""
    value = r.typed(table, key, "allow", list)
    if value is None:
        return default
    bad = [v for v in value if not isinstance(v, str) or not ALLOW_RULE.match(v)]
    if bad:
        r.problem(key + ("allow",), f"allow lists {bad[0]!r}: each entry is \"*\" (anyone authenticated) or "
                  "token:NAME, user:SUBJECT, scope:SCOPE or group:GROUP")
    return tuple(v for v in value if v not in bad)


def read_args(r: Reader, t: dict[str, Any], key: tuple[str, ...], cwd: Path) -> list[Arg]:
    args = []
    for name, fragment in r.typed(t, key, "args", dict, {}).items():
        akey = key + ("args", name)
        if not ARG_NAME.match(name):
            r.problem(akey, f"argument name '{name}' must match [A-Za-z_][A-Za-z0-9_]* (it becomes MCP_ARG_{name.upper()})")
        if not is_table(r, akey, fragment):
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
                          path=_path_rule(r, fragment, akey, schema, cwd),
                          secret=r.typed(fragment, akey, "secret", bool, False)))
    return args


def _path_rule(r: Reader, fragment: Mapping[str, Any], key: tuple[str, ...], schema: Mapping[str, Any],
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


def check_placeholders(r: Reader, key: tuple[str, ...], template: str | list[str], names: Collection[str]) -> None:
    """Each placeholder of the template (or these, already found) names an argument."""
    for name in placeholders(template) if isinstance(template, str) else template:
        if name not in names:
            r.problem(key, f"placeholder '{{{name}}}' names no argument"
                      + (f" (arguments: {', '.join(sorted(names))})" if names else " (the tool has no arguments)"))


def check_command(r: Reader, key: tuple[str, ...], command: list[Any],
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


def _check_group(r: Reader, ckey: tuple[str, ...], i: int, group: list[Any], by_name: dict[str, Arg]) -> tuple[str, ...]:
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


def _check_element(r: Reader, ckey: tuple[str, ...], where: str, element: str, by_name: dict[str, Arg]) -> str:
    if "{" not in element:               # most elements: nothing to check
        return element
    whole = PLACEHOLDER.fullmatch(element)
    if whole and (arg := by_name.get(whole[1])) is not None and arg.schema.get("type") != "object":
        return element                    # the next most: one known argument fills the element, as below allows
    named = list(placeholders(element))
    check_placeholders(r, ckey, named, by_name)
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
