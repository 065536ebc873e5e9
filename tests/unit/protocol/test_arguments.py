"""Path arguments, attacked at the unit level: every item of an array is confined, odd values
(NUL, empty, '..' chains, symlink loops) are refused with a reason, and a root of '/' admits
everything without a string-prefix slip (the check is by path components, not characters).
The plain check that spares most calls jsonschema never passes what jsonschema refuses."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from mcpwrap.config import load as config
from mcpwrap.protocol.arguments import argument_problems, plain_check, plain_fits
from mcpwrap.run.arguments import resolve_paths


def _tool(tmp_path: Path, arg: str) -> config.Tool:
    (tmp_path / "t.toml").write_text(f'[tools.t]\ncommand = ["cat", "--", "{{p}}"]\nargs.p = {arg}\n')
    tool = config.load(tmp_path / "t.toml").tool("t")
    assert tool is not None
    return tool


def test_every_item_of_an_array_is_confined(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    tool = _tool(tmp_path, '{ type = "array", items = { type = "string" }, within = ["{cwd}/data"] }')
    resolved, problems = resolve_paths(tool, {"p": ["data/a", "data/../data/b"]})
    assert not problems and resolved["p"] == [str(tmp_path / "data" / "a"), str(tmp_path / "data" / "b")]
    _, problems = resolve_paths(tool, {"p": ["data/a", "data/../../escape"]})
    assert len(problems) == 1 and "outside the allowed root" in problems[0]


def test_a_sibling_that_shares_the_roots_prefix_is_outside(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data-secrets").mkdir()
    tool = _tool(tmp_path, '{ type = "string", within = ["{cwd}/data"] }')
    _, problems = resolve_paths(tool, {"p": str(tmp_path / "data-secrets" / "key")})
    assert problems and "outside" in problems[0]


def test_odd_values_are_refused_with_a_reason(tmp_path: Path) -> None:
    tool = _tool(tmp_path, '{ type = "string", within = ["{cwd}"] }')
    for value in ["", "a\x00b", "../" * 40 + "etc/passwd"]:
        _, problems = resolve_paths(tool, {"p": value})
        assert problems, value
    loop = tmp_path / "loop"
    os.symlink(loop, loop)                                  # resolves to itself: inside, never an escape
    resolved, problems = resolve_paths(tool, {"p": str(loop / "x")})
    assert not problems and resolved["p"] == str(loop / "x")


def test_a_root_of_slash_admits_every_absolute_path(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    tool = _tool(tmp_path, '{ type = "string", within = ["/"], must_exist = true }')
    resolved, problems = resolve_paths(tool, {"p": str(tmp_path / "sub" / ".." / "f")})
    assert not problems and resolved["p"] == str(tmp_path / "f")


# --- the plain check before jsonschema ----------------------------------------------------
PLAIN_ARGS = {"s": '{ type = "string" }', "b": '{ type = "boolean" }', "i": '{ type = "integer" }',
              "n": '{ type = "number", optional = true }', "any": '{ description = "anything", optional = true }',
              "c": '{ type = "string", enum = ["a", "b"], enumNames = ["A", "B"] }',
              "e": '{ enum = ["x", "1"], optional = true }',
              "m": '{ type = "integer", minimum = 1, maximum = 3, optional = true }',
              "l": '{ type = "string", maxLength = 1, optional = true }'}
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False),
                   st.sampled_from([1.0, 0.0, "a", "b", "x", "1", ""]), st.lists(st.integers(0, 1), max_size=2),
                   st.dictionaries(st.sampled_from(["k"]), st.integers(0, 1), max_size=1))


@cache
def _plain_tool(names: tuple[str, ...], elicit: str | None) -> config.Tool:
    lines = [f"args.{n} = {PLAIN_ARGS[n][:-1]}{', elicit = true' if n == elicit else ''} }}" for n in names]
    toml = '[tools.t]\ncommand = ["true"]\n' + "\n".join(lines) + "\n"
    tool = config.loads(toml.encode(), Path("/tmp/plain.toml")).tool("t")
    assert tool is not None
    return tool


VALID = {"s": "text", "b": False, "i": 7, "n": 0.5, "any": [], "c": "b", "e": "x", "m": 2, "l": "a"}


@settings(max_examples=500, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(PLAIN_ARGS)), min_size=1, unique=True).map(tuple),
       left_out=st.sets(st.sampled_from(sorted(PLAIN_ARGS)), max_size=1),
       changed=st.dictionaries(st.sampled_from([*PLAIN_ARGS, "extra"]), VALUES, max_size=2),
       elicit=st.sampled_from([None, "s", "i"]))
def test_the_plain_check_agrees_with_jsonschema(names: tuple[str, ...], left_out: set[str], changed: dict[str, Any],
                                                 elicit: str | None) -> None:
    """Whatever the plain check passes jsonschema passes too: the problems are jsonschema's, always.
    (Valid arguments with a value or two changed, or one left out: the cases near the line.)"""
    arguments = {**{n: VALID[n] for n in names if n not in left_out}, **changed}
    tool = _plain_tool(names, elicit if elicit in names else None)
    deferred = {elicit} if elicit in names and elicit not in arguments else set()
    schema = tool.call_schema
    if deferred:
        schema = {**schema, "required": [n for n in schema["required"] if n not in deferred]}
    expected = sorted(Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
                      .iter_errors(arguments), key=lambda e: list(e.path))
    assert plain_check(schema) is not None
    assert argument_problems(tool, arguments, ignore_missing=deferred) == [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" if e.absolute_path else e.message for e in expected]


def test_the_plain_check_leaves_any_other_schema_to_jsonschema() -> None:
    base = {"type": "object", "properties": {"s": {"type": "string"}}, "additionalProperties": False}
    assert plain_check(base) is not None
    assert plain_check({**base, "additionalProperties": {"type": "string"}}) is None
    assert plain_check({**base, "minProperties": 1}) is None
    odd = plain_check({**base, "properties": {"s": {"type": "string", "format": "email"}}})
    assert odd is not None and not odd({"s": "a@b.example"})          # not sure: jsonschema decides


scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.5, 1.0, -2.0, 2.5]) | st.text("ab0-", max_size=4)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
type_names = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])
bounds = st.integers(-2, 2) | st.sampled_from([0.5, -1.5])


def plain_schemas(items: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    keywords: dict[str, st.SearchStrategy[Any]] = {
        "type": type_names | st.lists(type_names, min_size=1, max_size=2, unique=True),
        "enum": st.lists(scalars, min_size=1, max_size=3), "const": scalars,
        "minimum": bounds, "maximum": bounds, "exclusiveMinimum": bounds, "exclusiveMaximum": bounds,
        "minLength": st.integers(0, 3), "maxLength": st.integers(0, 3), "pattern": st.sampled_from(["^a", "b$", "[0-9]", "^-"]),
        "minItems": st.integers(0, 2), "maxItems": st.integers(0, 2), "description": st.just("d"), "default": scalars}
    if items:
        keywords["items"] = plain_schemas(items=False)
    # A few keywords at a time, so that values pass as often as they fail.
    return st.lists(st.sampled_from(sorted(keywords)), max_size=3, unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({k: keywords[k] for k in chosen}))


@settings(max_examples=1000, deadline=None)
@given(plain_schemas(), json_values)
@example({"type": "integer"}, 1.0)            # JSON Schema's integer includes 1.0, but never true
@example({"type": ["integer", "null"]}, True)
@example({"type": "number"}, False)
@example({"enum": [True, "a"]}, 1)            # true is not 1, 0 is not false, 1 is 1.0
@example({"const": 0}, False)
@example({"enum": [1]}, 1.0)
@example({"minimum": 1}, True)                # a bound judges numbers only
@example({"maxLength": 1, "items": {"type": "string"}}, ["ab"])
@example({"items": {"type": "integer"}, "minItems": 1}, ["a"])
def test_a_plain_value_check_agrees_with_jsonschema(schema: dict[str, Any], value: Any) -> None:
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    assert plain_fits(schema, value) == validator.is_valid(value), (schema, value)


@given(json_values)
def test_a_plain_value_check_leaves_other_keywords_to_jsonschema(value: Any) -> None:
    for schema in ({"format": "date"}, {"anyOf": [{}]}, {"enum": [[1]]}, {"multipleOf": 2}, {"type": "float"}):
        assert not plain_fits(schema, value)
    assert not plain_fits({"items": True}, [value])
