"""protocol.rounds: a call's rounds of questions with a client, through its public names only.

What `asking` decides is tested in test_asking.py (through the core); here: a sealed state resumes
the call where it left it, for the same caller, tool, arguments and tools file only; answers fold
in or end the call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import load as config
from mcpwrap.protocol import asking, rounds
from mcpwrap.protocol.actions import Context
from mcpwrap.protocol.revisions import MODERN
from mcpwrap.protocol.tools import CallRequest, ProtocolError
from mcpwrap.result import ToolResult
from mcpwrap.state import signing

KEYRING = signing.Keyring(b"k" * 32)
NOW = 1_000_000.0
CONFIG = config.loads(b'[tools.deploy]\ncommand = ["echo", "{env}", "{note}"]\nconfirm = "deploy to {env}?"\n'
                      b'args.env = { type = "string", enum = ["staging", "prod"], elicit = true }\n'
                      b'args.note = { type = "string", default = "none" }\n', Path("t.toml"))
TOOL = CONFIG.tools[0]


def ctx(params: dict[str, Any], principal: str = "token:a") -> Context:
    return Context(1, "tools/call", MODERN, {"elicitation": {}}, params=params, principal=principal)


def asked(arguments: dict[str, Any]) -> tuple[rounds.Pending, asking.Question]:
    pending = rounds.Pending(ctx({}), TOOL, dict(arguments), original=dict(arguments))
    step = rounds.next_step(pending)
    assert isinstance(step, asking.Question)
    return pending, step


def test_a_call_missing_an_elicited_argument_is_asked_for_it_then_to_confirm() -> None:
    pending, question = asked({"note": "hi"})
    assert (question.key, [a.name for a in question.fields]) == ("arguments", ["env"])
    answered = rounds.apply_answer(pending, "arguments", {"action": "accept", "content": {"env": "prod"}})
    assert isinstance(answered, rounds.Pending) and answered.round == 1
    step = rounds.next_step(answered)
    assert isinstance(step, asking.Question) and (step.key, step.message) == ("confirm", "deploy to prod?")
    confirmed = rounds.apply_answer(answered, "confirm", {"action": "accept"})
    assert isinstance(confirmed, rounds.Pending)
    assert rounds.next_step(confirmed) == asking.Ready({"env": "prod", "note": "hi"})


@pytest.mark.parametrize("answer", [{"action": "decline"}, {"action": "cancel"}, {"action": "maybe"},
                                    {"action": "accept", "content": []}, {"action": "accept", "content": {}}])
def test_an_answer_that_gives_nothing_ends_the_call_and_nothing_runs(answer: dict[str, Any]) -> None:
    pending, _ = asked({})
    outcome = rounds.apply_answer(pending, "arguments", answer)
    assert isinstance(outcome, ToolResult) and outcome.is_error and "nothing ran" in outcome.text


def test_a_sealed_state_resumes_the_call_with_its_answers_so_far() -> None:
    pending, question = asked({"note": "hi"})
    state = rounds.seal_state(pending, question, CONFIG, KEYRING, NOW)
    retry = ctx({"requestState": state, "inputResponses": {"arguments": {"action": "accept", "content": {"env": "staging"}}}})
    resumed, key, answer = rounds.resume(retry, CallRequest(TOOL, {"note": "hi"}), CONFIG, KEYRING, NOW + 1, False)
    assert (resumed.arguments, resumed.round, key) == ({"note": "hi"}, 0, "arguments")
    assert answer == {"action": "accept", "content": {"env": "staging"}}
    assert resumed.state is not None and resumed.state.expires_at > NOW     # one accepted state, one run


@pytest.mark.parametrize("change", ["caller", "arguments", "tool file", "tampered", "not a string"])
def test_a_state_is_refused_for_another_caller_other_arguments_a_changed_file_or_tampering(change: str) -> None:
    pending, question = asked({"note": "hi"})
    state: Any = rounds.seal_state(pending, question, CONFIG, KEYRING, NOW)
    principal, arguments, cfg = "token:a", {"note": "hi"}, CONFIG
    if change == "caller":
        principal = "token:b"
    elif change == "arguments":
        arguments = {"note": "hi\nrm -rf /"}
    elif change == "tool file":
        cfg = config.loads(b"# changed\n" + b'[tools.deploy]\ncommand = ["true"]\n', Path("t.toml"))
    elif change == "tampered":
        state = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
    else:
        state = {"a": 1}
    with pytest.raises(ProtocolError) as refused:
        rounds.resume(ctx({"requestState": state}, principal), CallRequest(TOOL, arguments), cfg, KEYRING, NOW + 1,
                      False)
    assert (refused.value.code, refused.value.message) == (-32602, "invalid or expired requestState")


def test_answers_without_a_state_start_the_call_afresh_and_malformed_ones_are_refused() -> None:
    fresh, key, answer = rounds.resume(ctx({"inputResponses": {"arguments": {"action": "accept"}}}),
                                       CallRequest(TOOL, {}), CONFIG, KEYRING, NOW, False)
    assert (fresh.arguments, fresh.round, key, answer) == ({}, 0, None, None)
    with pytest.raises(ProtocolError):
        rounds.resume(ctx({"inputResponses": ["x"]}), CallRequest(TOOL, {}), CONFIG, KEYRING, NOW, False)
