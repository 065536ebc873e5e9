"""The JSON Schema side of a tools file: the fragments an argument or an output declares,
checked against the 2020-12 meta-schema (and a default against its own schema), once per verdict.

A fragment that passed vouches for every later fragment with the same `verdict_key` (10,000 tools
often share a handful of fragments), and the checks run once the whole file is read, so a file
whose bytes are already known good (`SchemaChecks(enabled=False)`) imports no jsonschema at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from mcpwrap.config.model import string_consts

Key = tuple[str, ...]


def elicitable(schema: Mapping[str, Any]) -> bool:
    """Whether an elicitation form can ask for a value of this schema: a primitive, or an array of
    enumerated or titled strings."""
    kind = schema.get("type")
    items = schema.get("items")
    return kind in ("string", "number", "integer", "boolean") or (
        kind == "array" and isinstance(items, dict) and (items.get("type") == "string" and "enum" in items
                                                         or string_consts(items.get("anyOf"))))


def verdict_key(schema: Mapping[str, Any]) -> str:
    """Equal only for fragments whose checks pass alike: the same keys in the same order with
    the same values (repr tells 1, 1.0 and True apart), except the text of a top-level string
    `description` or `title`, which the meta-schema only requires to be a string and which no
    default is validated against."""
    key = dict(schema)
    for name in ("description", "title"):
        if isinstance(key.get(name), str):
            key[name] = ""                # in place: the keys keep their order
    return repr(key)


def schema_problem(key: Key, schema: Mapping[str, Any]) -> tuple[Key, str] | None:
    """What is wrong with the schema fragment at key, as (where, message), or None."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        error = _not_a_choice(exc) or exc
        return (key + tuple(str(p) for p in error.absolute_path),
                f"invalid JSON Schema at '{'.'.join(key)}': {error.message}")
    if "default" in schema:
        error = next(Draft202012Validator(schema).iter_errors(schema["default"]), None)
        if error is not None:
            return key + ("default",), f"default does not match its own schema: {error.message}"
    return None


def _not_a_choice(error: Any) -> Any:
    """The deepest value that is not one of its choices under `error` (jsonschema's own message for
    it names them: "'int' is not one of ['array', ...]"), said as the choices; None when there is none.
    An anyOf of the meta-schema ("'int' is not valid under any of the given schemas") hides it."""
    found = [e for e in _descendants(error) if e.validator == "enum"]
    if not found:
        return None
    deepest = max(found, key=lambda e: len(e.absolute_path))
    deepest.message = f"{deepest.instance!r} is not one of {', '.join(map(str, deepest.validator_value))}"
    return deepest


def _descendants(error: Any) -> Iterator[Any]:
    yield error
    for sub in error.context or ():
        yield from _descendants(sub)


class SchemaChecks:
    """The fragments of one file, to check once all of it is read (`enabled` False: its bytes are
    known good, nothing is checked)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.passed: set[str] = set()        # verdict keys of fragments that passed the checks
        self.unchecked: list[tuple[Key, Mapping[str, Any]]] = []

    def add(self, key: Key, schema: Mapping[str, Any]) -> None:
        if self.enabled:
            self.unchecked.append((key, schema))

    def problems(self) -> Iterator[tuple[Key, str]]:
        """The problems of the fragments added since, each (where, message); a verdict key that
        passes is checked once, a failure again (to be located)."""
        unchecked, self.unchecked = self.unchecked, []
        for key, schema in unchecked:
            if (vkey := verdict_key(schema)) not in self.passed:
                problem = schema_problem(key, schema)
                if problem is None:
                    self.passed.add(vkey)
                else:
                    yield problem
