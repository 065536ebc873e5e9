"""A running call's question in the core: out as `elicitation/create` to a legacy client that declared
elicitation, the client's answer back as an `AnswerQuestion` for the waiting call; anyone else is
answered at once that nobody can be asked; a question the call gave up on is withdrawn."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mcpwrap.config.model import AskRule
from mcpwrap.protocol.actions import AnswerQuestion, StartCall
from mcpwrap.protocol.answers import Asked
from mcpwrap.protocol.core import Core
from tests import mcpschema
from tests.unit.protocol.test_core import feed, init, make_core, request, sent

ASKED = Asked(AskRule(re.compile("Enter a value: $"), "Apply this plan?", {"type": "boolean"},
                      {"true": "yes\n", "false": "no\n"}), "Enter a value: ", "Plan: 1 to add")


def running(version: str = "2025-11-25", caps: dict[str, Any] | None = None) -> tuple[Core, Any]:
    core = make_core()
    init(core, version, {"elicitation": {}} if caps is None else caps)
    (start,) = [a for a in feed(core, request(1, "tools/call", {"name": "echo", "arguments": {"msg": "x"}}))
                if isinstance(a, StartCall)]
    return core, start.ctx


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
@pytest.mark.parametrize(("result", "expected"), [
    ({"action": "accept", "content": {"answer": True}}, AnswerQuestion(7, True)),
    ({"action": "decline"}, AnswerQuestion(7, refusal="the user declined the question")),
    ({"action": "cancel"}, AnswerQuestion(7, refusal="the user cancelled the question"))])
def test_a_running_calls_question_goes_out_and_its_answer_comes_back(version: str, result: dict[str, Any],
                                                                      expected: AnswerQuestion) -> None:
    core, ctx = running(version)
    (ask,) = sent(core.question_asked(ctx, 7, ASKED))
    mcpschema.check(version, ask)
    assert ask["method"] == "elicitation/create" and ask["params"]["message"] == "Apply this plan?\n\nPlan: 1 to add"
    assert feed(core, {"jsonrpc": "2.0", "id": ask["id"], "result": result}) == [expected]
    assert feed(core, {"jsonrpc": "2.0", "id": ask["id"], "result": result}) == []     # answered once


def test_an_error_response_ends_the_question() -> None:
    core, ctx = running()
    (ask,) = sent(core.question_asked(ctx, 7, ASKED))
    (answer,) = feed(core, {"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -1, "message": "no UI"}})
    assert answer == AnswerQuestion(7, refusal="the client could not ask the user: no UI")


@pytest.mark.parametrize(("version", "caps"), [("2025-11-25", {}), ("2024-11-05", {"elicitation": {}})])
def test_a_client_that_cannot_be_asked_is_answered_at_once(version: str, caps: dict[str, Any]) -> None:
    core, ctx = running(version, caps)
    assert core.question_asked(ctx, 7, ASKED) == [AnswerQuestion(7)]


def test_a_question_the_call_gave_up_on_is_withdrawn() -> None:
    core, ctx = running()
    (ask,) = sent(core.question_asked(ctx, 7, ASKED))
    (withdrawn,) = sent(core.question_over(7))
    assert withdrawn["method"] == "notifications/cancelled" and withdrawn["params"]["requestId"] == ask["id"]
    assert core.question_over(7) == []
    assert feed(core, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}}) == []
