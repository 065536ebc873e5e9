"""[spool], [resources.NAME] and [prompts.NAME]: the parts of a tools file that are more of MCP than tools.

A command resource, a command message and a `complete` command are read as a tool is
(`config.tools`: same argument and argv rules, the same `where_it_runs`, the server's sandbox, limits
and env_inherit), so the runner runs them alike. A file resource's path is canonical (its directory
resolved, `..` gone), and so is the `file://` URI it is listed under.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from mcpwrap.config.model import PLACEHOLDER, TEMPLATE_EXPR, Arg, Prompt, PromptArg, PromptMessage, Resource, Spool, Tool
from mcpwrap.config.reader import Reader, is_table, parse_duration, parse_size
from mcpwrap.config.tools import (ARG_NAME, MEDIA_OUTPUT, TOOL_NAME, check_command, check_placeholders, limits_of,
                                  read_allow, read_args, sandbox_of, where_it_runs)

SPOOL_KEYS = {"quota", "ttl"}
RESOURCE_KEYS = {"title", "description", "uri", "uri_template", "path", "mime_type", "command", "shell", "args",
                 "cwd", "env", "timeout", "max_output", "kill_grace", "output", "cache_ttl", "cache_scope", "allow"}
PROMPT_KEYS = {"title", "description", "args", "messages", "allow"}
PROMPT_ARG_KEYS = {"title", "description", "required", "default", "enum", "examples", "complete"}
MESSAGE_KEYS = {"role", "text", "resource", "command", "shell", "output"}
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$")
OUTPUT_URI = "mcpwrap://output/"   # reserved for the spool (kept output beyond max_output)
COMPLETE_TIMEOUT_S = 10.0          # a `complete` command answers a keystroke: it gets at most this long
COMPLETE_OUTPUT = 1024 * 1024      # and this much output


def template_variables(template: str) -> list[tuple[str, bool]]:
    """(name, in the query) for each variable of a URI template."""
    return [(name, bool(q)) for q, names in TEMPLATE_EXPR.findall(template) for name in names.split(",")]


def read_spool(r: Reader, doc: dict[str, Any]) -> Spool:
    table = r.typed(doc, (), "spool", dict, {})
    r.keys(table, ("spool",), SPOOL_KEYS)
    quota = 0 if table.get("quota") in (0, "0") else r.converted(table, ("spool",), "quota", parse_size, Spool.quota)
    return Spool(quota, r.converted(table, ("spool",), "ttl", parse_duration, Spool.ttl_s))


def _completers(r: Reader, t: dict[str, Any], key: tuple[str, ...], defaults: dict[str, Any],
                base_dir: Path) -> tuple[dict[str, Any], dict[str, Tool]]:
    """The table without its args' `complete` keys (not JSON Schema), and those commands by argument."""
    found: dict[str, Tool] = {}
    args = t.get("args")
    if not isinstance(args, dict):
        return t, found
    stripped = {}
    for name, fragment in args.items():
        if isinstance(fragment, dict) and "complete" in fragment:
            tool = _complete_tool(r, key + ("args", name, "complete"), fragment["complete"], defaults, base_dir)
            if tool is not None:
                found[name] = tool
            fragment = {k: v for k, v in fragment.items() if k != "complete"}
        stripped[name] = fragment
    return {**t, "args": stripped}, found


def _complete_tool(r: Reader, key: tuple[str, ...], value: Any, defaults: dict[str, Any],
                   base_dir: Path) -> Tool | None:
    """An argument's `complete` command: a command of the file like any other (where it runs, its
    confinement), with no arguments and a keystroke's time and output."""
    if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
        r.problem(key, f"'{'.'.join(key)}' must be a non-empty array of strings (an argv)")
        return None
    tool = _command_tool(r, ".".join(key), {"command": value}, key, [], defaults,
                         where_it_runs(r, {}, key, defaults, base_dir))
    if tool is None:
        return None
    return replace(tool, timeout_s=min(tool.timeout_s, COMPLETE_TIMEOUT_S),
                   max_output=min(tool.max_output, COMPLETE_OUTPUT))


def _command_tool(r: Reader, name: str, t: dict[str, Any], key: tuple[str, ...], args: list[Arg],
                  defaults: dict[str, Any], place: tuple[Path, dict[str, str]], output: str = "text") -> Tool | None:
    """A resource's, prompt message's or completion's command, run exactly like a tool's (same runner,
    same rules, `place` from `where_it_runs`, and the server's sandbox, limits and env_inherit)."""
    command = r.typed(t, key, "command", list)
    argv = check_command(r, key, command, args) if command is not None else None
    if command is not None and argv is None:
        return None
    cwd, env = place
    return Tool(name=name, description="", args=tuple(args),
                command=argv, shell=r.typed(t, key, "shell", str),
                cwd=cwd, env=env,
                timeout_s=r.converted(t, key, "timeout", parse_duration, defaults["timeout"]),
                max_output=r.converted(t, key, "max_output", parse_size, defaults["max_output"]),
                output=output, kill_grace_s=r.converted(t, key, "kill_grace", parse_duration, 2.0),
                sandbox=sandbox_of(r, {}, key, defaults["sandbox"], cwd, args),
                limits=limits_of(r, {}, key, defaults["limits"]), env_inherit=defaults["env_inherit"])


def _named_tables(r: Reader, doc: dict[str, Any], section: str,
                  allowed: set[str]) -> Iterator[tuple[str, tuple[str, ...], dict[str, Any]]]:
    """[section.NAME] tables with a valid name and only allowed keys (problems located, tables kept)."""
    for name, table in r.typed(doc, (), section, dict, {}).items():
        key = (section, name)
        if not is_table(r, key, table):
            continue
        if not TOOL_NAME.match(name):
            r.problem(key, f"{section[:-1]} name '{name}' must be 1-128 characters of A-Z a-z 0-9 _ - .")
        r.keys(table, key, allowed)
        yield name, key, table


def _canonical(path: Path) -> Path:
    """`path` with its directory resolved (symlinks, `.` and `..` taken as the kernel takes them) and its
    own name kept, so a symlinked file stays the link the author named."""
    return path.resolve() if path.name == ".." else path.parent.resolve() / path.name


def read_resources(r: Reader, doc: dict[str, Any], defaults: dict[str, Any], base_dir: Path) -> tuple[Resource, ...]:
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


def _read_resource(r: Reader, name: str, t: dict[str, Any], key: tuple[str, ...], defaults: dict[str, Any],
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
                  cache_scope=scope, allow=read_allow(r, t, key, defaults["allow"]),
                  cache_ttl_ms=int(r.converted(t, key, "cache_ttl", parse_duration, 0.0) * 1000))
    mime = r.typed(t, key, "mime_type", str)
    if "path" in t:
        for bad in sorted({"uri_template", "args", "command", "shell", "cwd", "env", "timeout", "kill_grace",
                           "output"} & set(t)):
            r.problem(key + (bad,), f"'{bad}' is for command resources; a 'path' resource is one fixed file")
        import mimetypes                  # here: only a file resource without a mime_type needs it

        path = _canonical(base_dir / r.typed(t, key, "path", str, ""))
        return Resource(uri=uri or path.as_uri(), uri_template=None, path=path,
                        mime_type=mime or mimetypes.guess_type(path.name)[0] or "application/octet-stream",
                        **common)
    table, completers = _completers(r, t, key, defaults, base_dir)
    place = where_it_runs(r, table, key, defaults, base_dir)
    args = read_args(r, table, key, place[0])
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
    tool = _command_tool(r, f"resources.{name}", table, key, args, defaults, place,
                         "blob" if output == "blob" else "text")
    if tool is None:
        return None
    return Resource(uri=None if template else uri or f"mcpwrap://resource/{name}", uri_template=template,
                    tool=tool, blob=output == "blob", completers=completers,
                    mime_type=mime or ("application/octet-stream" if output == "blob" else "text/plain"), **common)


def read_prompts(r: Reader, doc: dict[str, Any], defaults: dict[str, Any], base_dir: Path,
                 resource_uris: set[str]) -> tuple[Prompt, ...]:
    out = []
    for name, key, t in _named_tables(r, doc, "prompts", PROMPT_KEYS):
        args = [_read_prompt_arg(r, key + ("args", arg_name), arg_name, fragment, defaults, base_dir)
                for arg_name, fragment in r.typed(t, key, "args", dict, {}).items()
                if is_table(r, key + ("args", arg_name), fragment)]
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
                    check_placeholders(r, mkey, template, {a.name for a in as_tool_args})
            if resource is not None and not PLACEHOLDER.search(resource) and resource not in resource_uris:
                r.problem(mkey, f"messages[{i}].resource '{resource}' is not the uri of a [resources] table")
            tool = None
            output = r.typed(m, mkey, "output", str, "text")
            if output != "text" and not (MEDIA_OUTPUT.match(output) and kinds[0] in ("command", "shell")):
                r.problem(mkey, f"messages[{i}].output must be \"text\" or a MIME type image/TYPE or audio/TYPE, "
                          "and only for a command or shell message")
            if kinds[0] in ("command", "shell"):
                tool = _command_tool(r, f"prompts.{name}.messages[{i}]", m, mkey, as_tool_args, defaults,
                                     where_it_runs(r, m, mkey, defaults, base_dir), output)
            messages.append(PromptMessage(role, text, resource, tool))
        out.append(Prompt(name, tuple(args), tuple(messages), r.typed(t, key, "title", str),
                          r.typed(t, key, "description", str), read_allow(r, t, key, defaults["allow"])))
    return tuple(out)


def _read_prompt_arg(r: Reader, key: tuple[str, ...], name: str, t: dict[str, Any], defaults: dict[str, Any],
                     base_dir: Path) -> PromptArg:
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
    required, default = r.typed(t, key, "required", bool, False), r.typed(t, key, "default", str)
    if default is not None and required:
        r.problem(key + ("default",), f"'{name}' has a default, but a required argument has no default "
                  "(drop one of them)")
    if default is not None and strings["enum"] is not None and default not in strings["enum"]:
        r.problem(key + ("default",), f"the default {default!r} is not one of its enum: {', '.join(strings['enum'])}")
    return PromptArg(name, required, r.typed(t, key, "title", str), r.typed(t, key, "description", str),
                     strings["enum"], strings["examples"] or (),
                     _complete_tool(r, key + ("complete",), t["complete"], defaults, base_dir) if "complete" in t
                     else None, default)
