"""Checking call arguments against a tool's inputSchema before anything runs.

jsonschema is imported on the first validation, not at start-up, and one
validator is compiled per tool schema and reused.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from functools import lru_cache
from typing import Any

import orjson

from mcpwrap.config import Tool


@lru_cache(maxsize=4096)
def _validator(schema_json: bytes) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(orjson.loads(schema_json), format_checker=Draft202012Validator.FORMAT_CHECKER)


def argument_problems(tool: Tool, arguments: Any, ignore_missing: Set[str] = frozenset()) -> list[str]:
    """Human-readable reasons the arguments are invalid; empty when they are fine.

    `ignore_missing` names arguments that will be asked for, so their absence is not a problem yet.
    """
    if not isinstance(arguments, Mapping):
        return ["arguments must be a JSON object"]
    schema = tool.input_schema
    if ignore_missing and "required" in schema:
        schema = {**schema, "required": [n for n in schema["required"] if n not in ignore_missing]}
    validator = _validator(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    problems = []
    for error in sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems
