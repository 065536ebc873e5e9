"""config/schema: an argument's or output's schema fragment checked against the 2020-12 meta-schema (and
its default against itself), each verdict once: a fragment that passed vouches for its equals."""

from __future__ import annotations

from mcpwrap.config.schema import SchemaChecks, elicitable, schema_problem, verdict_key


def test_a_bad_fragment_is_placed_at_its_key_and_says_the_choices() -> None:
    where, message = schema_problem(("tools", "t", "args", "a"), {"type": "int"}) or ((), "")
    assert where == ("tools", "t", "args", "a", "type")
    assert "invalid JSON Schema at 'tools.t.args.a'" in message and "'int' is not one of array" in message
    assert schema_problem(("k",), {"type": "string"}) is None


def test_a_default_must_match_its_own_schema() -> None:
    assert schema_problem(("k",), {"type": "integer", "default": "x"}) == (
        ("k", "default"), "default does not match its own schema: 'x' is not of type 'integer'")
    assert schema_problem(("k",), {"type": "integer", "default": 3}) is None


def test_a_verdict_is_shared_by_fragments_that_differ_only_in_their_words() -> None:
    assert verdict_key({"type": "string", "description": "a"}) == verdict_key({"type": "string", "description": "b"})
    assert verdict_key({"enum": [1]}) != verdict_key({"enum": [True]})
    checks = SchemaChecks()
    for n in range(3):
        checks.add(("args", str(n)), {"type": "string", "title": f"t{n}"})
    checks.add(("args", "bad"), {"type": "int"})
    checks.add(("args", "bad2"), {"type": "int"})
    assert [where[:2] for where, _ in checks.problems()] == [("args", "bad"), ("args", "bad2")]
    assert len(checks.passed) == 1 and list(checks.problems()) == []
    off = SchemaChecks(enabled=False)
    off.add(("k",), {"type": "int"})
    assert list(off.problems()) == []


def test_only_a_primitive_or_a_list_of_choices_can_be_asked_for() -> None:
    assert elicitable({"type": "string"}) and elicitable({"type": "array", "items": {"type": "string", "enum": ["a"]}})
    assert not elicitable({"type": "object"}) and not elicitable({"type": "array", "items": {"type": "string"}})
