"""Checking call arguments against a tool's schema (`Tool.call_schema`: its inputSchema with the
elicited arguments required, as they are by the time a call runs) before anything runs.

jsonschema is imported on the first validation, not at start-up, and one
validator is compiled per tool schema and reused. Path arguments are then
resolved (symlinks, '..') and checked against their `within` roots; the
command receives the resolved absolute path, so what was checked is what runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Set
from typing import Any

from mcpwrap.config import PathRule, Tool


_validators: dict[tuple[int, frozenset[str]], tuple[Tool, Any]] = {}


def _validator(tool: Tool, ignore_missing: frozenset[str]) -> Any:
    """One compiled validator per tool (and set of deferred arguments), reused by every call."""
    key = (id(tool), ignore_missing)
    cached = _validators.get(key)
    if cached is not None and cached[0] is tool:   # the tool itself is kept, so its id cannot be reused
        return cached[1]
    from jsonschema import Draft202012Validator

    schema = tool.call_schema
    if ignore_missing and "required" in schema:
        schema = {**schema, "required": [n for n in schema["required"] if n not in ignore_missing]}
    if len(_validators) > 4096:
        _validators.clear()
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    _validators[key] = (tool, validator)
    return validator


def argument_problems(tool: Tool, arguments: Any, ignore_missing: Set[str] = frozenset()) -> list[str]:
    """Human-readable reasons the arguments are invalid; empty when they are fine.

    `ignore_missing` names arguments that will be asked for, so their absence is not a problem yet.
    """
    if not isinstance(arguments, Mapping):
        return ["arguments must be a JSON object"]
    validator = _validator(tool, frozenset(ignore_missing))
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
