"""Checking call arguments against a tool's schema (`Tool.call_schema`: its inputSchema with the
elicited arguments required, as they are by the time a call runs) before anything runs.

jsonschema is imported on the first validation, not at start-up, and one
validator is compiled per tool schema and reused. Most tools' schemas only give
each argument a type (or strings to choose from): for those a plain check of keys, types
and choices comes first, and jsonschema runs only when it does not pass (it words the problems). Path arguments are then
resolved (symlinks, '..') and checked against their `within` roots; the
command receives the resolved absolute path, so what was checked is what runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Set
from typing import Any

from mcpwrap.config import PathRule, Tool


# Keywords that never make a value invalid, and the exact Python types a JSON value of a type
# decodes to that jsonschema accepts (an integral float is an integer too: that one goes to jsonschema).
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
                         "$comment"})
PLAIN_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "boolean": (bool,), "integer": (int,),
                                            "number": (int, float)}
Plain = Callable[[Mapping[str, Any]], bool]

_validators: dict[tuple[int, frozenset[str]], tuple[Tool, Any, Plain | None]] = {}


def plain_check(schema: Mapping[str, Any]) -> Plain | None:
    """For an object schema whose arguments have at most a type and a list of strings to choose from:
    a check that passes only arguments jsonschema finds valid (False means "ask jsonschema");
    None for a schema with more in it."""
    if schema.get("type") != "object" or not set(schema) <= {"type", "properties", "additionalProperties", "required"}:
        return None
    extra_allowed = schema.get("additionalProperties", True)
    if not isinstance(extra_allowed, bool):
        return None
    rules: dict[str, tuple[tuple[type, ...] | None, frozenset[str] | None]] = {}
    for name, spec in schema.get("properties", {}).items():
        if not isinstance(spec, Mapping) or not set(spec) - {"type", "enum", "enumNames"} <= ANNOTATIONS:
            return None
        kind, choices = spec.get("type"), spec.get("enum")
        if kind is not None and not (isinstance(kind, str) and kind in PLAIN_TYPES):   # an array, a list of types...
            return None
        if choices is not None:           # strings only: a str equals no other JSON value
            if kind not in (None, "string") or not isinstance(choices, list) or not all(
                    isinstance(c, str) for c in choices):
                return None
            kind = "string"
        rules[name] = (PLAIN_TYPES[kind] if kind is not None else None,
                       frozenset(choices) if choices is not None else None)
    required = frozenset(schema.get("required", ()))

    def check(arguments: Mapping[str, Any]) -> bool:
        if not required <= arguments.keys():
            return False
        for name, value in arguments.items():
            rule = rules.get(name)
            if rule is None:
                if not extra_allowed:
                    return False
                continue
            types, choices = rule
            if (types is not None and type(value) not in types) or (choices is not None and value not in choices):
                return False
        return True
    return check


def _validator(tool: Tool, ignore_missing: frozenset[str]) -> tuple[Any, Plain | None]:
    """One compiled validator (and plain check) per tool and set of deferred arguments, reused by every call."""
    key = (id(tool), ignore_missing)
    cached = _validators.get(key)
    if cached is not None and cached[0] is tool:   # the tool itself is kept, so its id cannot be reused
        return cached[1], cached[2]
    from jsonschema import Draft202012Validator

    schema = tool.call_schema
    if ignore_missing and "required" in schema:
        schema = {**schema, "required": [n for n in schema["required"] if n not in ignore_missing]}
    if len(_validators) > 4096:
        _validators.clear()
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    plain = plain_check(schema)
    _validators[key] = (tool, validator, plain)
    return validator, plain


def argument_problems(tool: Tool, arguments: Any, ignore_missing: Set[str] = frozenset()) -> list[str]:
    """Human-readable reasons the arguments are invalid; empty when they are fine.

    `ignore_missing` names arguments that will be asked for, so their absence is not a problem yet.
    """
    if not isinstance(arguments, Mapping):
        return ["arguments must be a JSON object"]
    validator, plain = _validator(tool, frozenset(ignore_missing))
    if plain is not None and plain(arguments):
        return []
    problems = []
    for error in sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems


def _confined(name: str, value: str, rule: PathRule, cwd: str) -> tuple[str, str | None]:
    """The resolved path, and why it is refused (None when it is fine)."""
    if "\x00" in value or not value:
        return value, f"{name}: a path must be non-empty and hold no NUL byte"
    real = os.path.realpath(os.path.join(cwd, value))
    roots = [os.path.realpath(root) for root in rule.within]
    if roots and not any(os.path.commonpath([real, root]) == root for root in roots):
        return real, (f"{name}: {value!r} resolves to {real}, outside the allowed "
                      f"{'root' if len(roots) == 1 else 'roots'} {', '.join(roots)}")
    if rule.must_exist and not os.path.exists(real):
        return real, f"{name}: {value!r} does not exist"
    if rule.kind == "file" and os.path.exists(real) and not os.path.isfile(real):
        return real, f"{name}: {value!r} is not a regular file"
    if rule.kind == "dir" and os.path.exists(real) and not os.path.isdir(real):
        return real, f"{name}: {value!r} is not a directory"
    return real, None


def resolve_paths(tool: Tool, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The arguments with every path argument resolved, and the reasons any is refused."""
    resolved = dict(arguments)
    problems: list[str] = []
    for spec in tool.args:
        if spec.path is None or spec.name not in arguments:
            continue
        value = arguments[spec.name]
        items = value if isinstance(value, list) else [value]
        checked = [_confined(spec.name, item, spec.path, str(tool.cwd)) if isinstance(item, str) else (item, None)
                   for item in items]
        problems += [why for _, why in checked if why]
        paths = [path for path, _ in checked]
        resolved[spec.name] = paths if isinstance(value, list) else paths[0]
    return resolved, problems
