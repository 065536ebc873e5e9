"""Checking call arguments against a tool's inputSchema before anything runs.

jsonschema is imported on the first validation, not at start-up, and one
validator is compiled per tool schema and reused.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from mcpwrap.config import Tool


_validators: dict[tuple[int, frozenset[str]], tuple[Tool, Any]] = {}


def _validator(tool: Tool, ignore_missing: frozenset[str]) -> Any:
    """One compiled validator per tool (and set of deferred arguments), reused by every call."""
    key = (id(tool), ignore_missing)
    cached = _validators.get(key)
    if cached is not None and cached[0] is tool:   # the tool itself is kept, so its id cannot be reused
        return cached[1]
    from jsonschema import Draft202012Validator

    schema = tool.input_schema
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
