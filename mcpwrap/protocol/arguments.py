"""Checking call arguments against a tool's schema (`Tool.call_schema`: its inputSchema with the
elicited arguments required, as they are by the time a call runs) before anything runs. Pure: no I/O.

This is the one argument checker: `serve` (through `protocol.asking`), resources' template
arguments and `mcpwrap call` all use it. Most tools' schemas give each argument a type, choices,
bounds or a length: for those a plain check comes first, and jsonschema runs only when it does not
pass (it words the problems) or a schema has more in it; jsonschema is imported then, not before,
and one validator is compiled per tool schema and reused. Path arguments are resolved against the
filesystem elsewhere, by the side that runs the call (`run.arguments`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Set
from typing import Any

from mcpwrap.config.model import Tool


# The keywords the plain check decides: those that never make a value invalid (enumNames: an enum's
# titles for legacy forms, which JSON Schema ignores), and simple constraints. A value whose schema has
# any other keyword is left to jsonschema.
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
                         "$comment", "enumNames"})
PLAIN = ANNOTATIONS | {"type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                       "minLength", "maxLength", "pattern", "items", "minItems", "maxItems"}
JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool), "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
    "array": lambda v: isinstance(v, list), "object": lambda v: isinstance(v, dict)}
BOUNDS: tuple[tuple[str, Callable[[Any, Any], bool]], ...] = (
    ("minimum", lambda v, b: v >= b), ("maximum", lambda v, b: v <= b),
    ("exclusiveMinimum", lambda v, b: v > b), ("exclusiveMaximum", lambda v, b: v < b))
Plain = Callable[[Mapping[str, Any]], bool]


def plain_check(schema: Mapping[str, Any]) -> Plain | None:
    """For an object schema (`Tool.call_schema`'s shape): a check that passes only arguments
    jsonschema finds valid, each value judged by `plain_fits` (False means "ask jsonschema");
    None for a schema with more at its top."""
    if schema.get("type") != "object" or not set(schema) <= {"type", "properties", "additionalProperties", "required"}:
        return None
    extra_allowed, properties = schema.get("additionalProperties", True), schema.get("properties", {})
    if not isinstance(extra_allowed, bool) or not isinstance(properties, Mapping):
        return None
    required = frozenset(schema.get("required", ()))

    def check(arguments: Mapping[str, Any]) -> bool:
        return required <= arguments.keys() and all(
            plain_fits(properties[name], value) if name in properties else extra_allowed
            for name, value in arguments.items())
    return check


def plain_fits(schema: Any, value: Any) -> bool:
    """Whether `value` surely matches `schema`, a schema made of `PLAIN` keywords; False means
    "not sure" (also for any other schema): jsonschema decides."""
    if not isinstance(schema, Mapping) or not schema.keys() <= PLAIN:
        return False
    kinds = schema.get("type", list(JSON_TYPES))
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if not all(k in JSON_TYPES for k in kinds) or not any(JSON_TYPES[k](value) for k in kinds):
        return False
    if "enum" in schema and not (isinstance(schema["enum"], list) and any(_same(e, value) for e in schema["enum"])):
        return False
    if "const" in schema and not _same(schema["const"], value):
        return False
    if JSON_TYPES["number"](value) and not all(_bound(schema.get(k), value, op) for k, op in BOUNDS):
        return False
    if isinstance(value, str):
        return (schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
                and ("pattern" not in schema or re.search(schema["pattern"], value) is not None))
    if isinstance(value, list):
        return (schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value))
                and all(plain_fits(schema.get("items", {}), item) for item in value))
    return True


def _bound(bound: Any, value: Any, op: Callable[[Any, Any], bool]) -> bool:
    return bound is None or JSON_TYPES["number"](bound) and op(value, bound)


def _same(a: Any, b: Any) -> bool:
    """JSON equality of scalars (true is not 1; 1 is 1.0); containers are left to jsonschema."""
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


class _Check:
    """A tool's call schema (less the arguments still to be asked for) with its plain check;
    the jsonschema validator is compiled on the first call the plain check does not pass."""

    def __init__(self, tool: Tool, ignore_missing: frozenset[str]) -> None:
        schema = tool.call_schema
        if ignore_missing and "required" in schema:
            schema = {**schema, "required": [n for n in schema["required"] if n not in ignore_missing]}
        self.tool, self.schema, self.plain = tool, schema, plain_check(schema)
        self._validator: Any = None

    def problems(self, arguments: Mapping[str, Any]) -> list[str]:
        if self.plain is not None and self.plain(arguments):
            return []
        if self._validator is None:
            from jsonschema import Draft202012Validator   # the largest import there is: only when needed

            self._validator = Draft202012Validator(self.schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        problems = []
        for error in sorted(self._validator.iter_errors(dict(arguments)), key=lambda e: list(e.path)):
            where = "/".join(str(p) for p in error.absolute_path)
            problems.append(f"{where}: {error.message}" if where else error.message)
        return problems


_checks: dict[tuple[int, frozenset[str]], _Check] = {}


def _check(tool: Tool, ignore_missing: frozenset[str]) -> _Check:
    """One check per tool and set of deferred arguments, reused by every call."""
    key = (id(tool), ignore_missing)
    cached = _checks.get(key)
    if cached is not None and cached.tool is tool:   # the tool itself is kept, so its id cannot be reused
        return cached
    if len(_checks) > 4096:
        _checks.clear()
    _checks[key] = check = _Check(tool, ignore_missing)
    return check


def argument_problems(tool: Tool, arguments: Any, ignore_missing: Set[str] = frozenset()) -> list[str]:
    """Human-readable reasons the arguments are invalid; empty when they are fine.

    `ignore_missing` names arguments that will be asked for, so their absence is not a problem yet.
    """
    if not isinstance(arguments, Mapping):
        return ["arguments must be a JSON object"]
    return _check(tool, frozenset(ignore_missing)).problems(arguments)


def value_problems(schema: Mapping[str, Any], value: Any) -> list[str]:
    """Why one value does not fit one schema (an `ask` rule's answer); empty when it does. The plain
    check first, jsonschema (which words the problems) when it does not pass."""
    if plain_fits(schema, value):
        return []
    from jsonschema import Draft202012Validator

    return [error.message for error in Draft202012Validator(dict(schema)).iter_errors(value)]
