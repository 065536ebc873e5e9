"""An answer to a running command's question: checked against its schema, refused when it holds a
newline or an escape sequence, and written as the rule's own bytes with the value as data."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mcpwrap.config.model import AskRule
from mcpwrap.protocol.answers import Asked, Refused, answer_bytes, from_elicitation, shown, typed

BOOLEAN = AskRule(re.compile(r"Enter a value: $"), "Apply this plan?", {"type": "boolean"},
                  {"true": "yes\n", "false": "no\n"}, default=False)
CHOICE = AskRule(re.compile(r"Environment: $"), "Which environment?", {"type": "string", "enum": ["dev", "prod"]},
                 "{value}\n")
TEXT = AskRule(re.compile(r"Name: $"), "Which name?", {"type": "string", "maxLength": 40}, "{value}\n")
COUNT = AskRule(re.compile(r"How many\? $"), "How many?", {"type": "integer", "minimum": 1}, "{value} {value}\n")


@pytest.mark.parametrize(("rule", "value", "written"), [
    (BOOLEAN, True, b"yes\n"), (BOOLEAN, False, b"no\n"), (CHOICE, "prod", b"prod\n"),
    (TEXT, "my {value} é", "my {value} é\n".encode()), (COUNT, 3, b"3 3\n")])
def test_an_answer_is_written_as_the_rules_bytes_with_the_value_as_data(rule: AskRule, value: Any, written: bytes) -> None:
    assert answer_bytes(rule, value) == written


@pytest.mark.parametrize("value", ["yes\nrm -rf /", "a\rb", "\x1b[2J", "\x1b]0;title\x07", "\x9b31m", "nul\x00",
                                   "tab\tbed", "\x7f"])
def test_an_answer_with_a_newline_or_an_escape_sequence_is_refused(value: str) -> None:
    with pytest.raises(Refused, match="control character"):
        answer_bytes(TEXT, value)


@pytest.mark.parametrize(("rule", "value"), [(BOOLEAN, "yes"), (BOOLEAN, 1), (CHOICE, "staging"), (TEXT, "x" * 41),
                                             (COUNT, 0), (COUNT, "3"), (TEXT, None)])
def test_an_answer_that_does_not_fit_its_schema_is_refused(rule: AskRule, value: Any) -> None:
    with pytest.raises(Refused, match="does not fit"):
        answer_bytes(rule, value)


def test_the_question_is_a_one_field_form_with_the_default_and_the_output_shown() -> None:
    asked = Asked(BOOLEAN, "  Enter a value: ", shown("Plan: 1 to add\n\x1b[1mdestroy\x1b[0m: 0\n", 5))
    assert asked.text == "Apply this plan?\n\nPlan: 1 to add\ndestroy: 0"
    params = asked.request()["params"]
    assert params["requestedSchema"] == {"type": "object", "properties": {"answer": {"type": "boolean", "default": False}},
                                         "required": ["answer"]}
    assert "'Enter a value:'" in asked.unanswered("nobody could be asked")


def test_shown_keeps_the_last_lines_only() -> None:
    assert shown("a\nb\nc\n", 2) == "b\nc" and shown("a\nb", 0) == ""


@pytest.mark.parametrize(("result", "expected"), [
    ({"action": "accept", "content": {"answer": True}}, (True, True)),
    ({"action": "decline"}, (False, "the user declined the question")),
    ({"action": "cancel"}, (False, "the user cancelled the question")),
    ({"action": "accept", "content": {}}, (False, "the answer to the question was malformed")),
    ({"action": "maybe"}, (False, "the answer to the question was malformed"))])
def test_an_elicitation_result_becomes_the_answer_or_why_there_is_none(result: dict[str, Any], expected: Any) -> None:
    assert from_elicitation(result) == expected


@pytest.mark.parametrize(("kind", "text", "value"), [("boolean", "Y", True), ("boolean", "no", False),
                                                     ("boolean", "maybe", "maybe"), ("integer", "3", 3),
                                                     ("number", "2.5", 2.5), ("integer", "x", "x"), ("string", "n", "n")])
def test_an_answer_typed_as_text_becomes_its_schemas_type(kind: str, text: str, value: Any) -> None:
    assert typed(kind, text) == value
