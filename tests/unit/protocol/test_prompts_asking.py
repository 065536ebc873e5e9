"""A prompts/get missing a required argument (protocol/prompts `question`, `resume_get`): a 2026-07-28
request that declared elicitation gets an input_required result asking for it, with a requestState
sealed as tools/call's is, and its retry with the answer completes; anyone else gets -32602."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import mcpschema
from tests.harness import MODERN, modern_meta
from tests.unit.protocol.test_core import feed, request, sent
from tests.unit.protocol.test_prompts import tools
from tests.unit.protocol.test_resources import answer, init, make

ASKING = {"elicitation": {}}


def get(core: Any, params: dict[str, Any], caps: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    out = sent(feed(core, request(id, "prompts/get", {"_meta": modern_meta(caps or {}), **params})))
    assert len(out) == 1, out
    mcpschema.check(MODERN, out[0], "prompts/get")
    return out[0]


def asked(core: Any, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params = {"name": "review", **({"arguments": arguments} if arguments is not None else {})}
    result: dict[str, Any] = get(core, params, ASKING)["result"]
    assert result["resultType"] == "input_required"
    return result


def test_a_missing_required_argument_is_asked_for_and_the_retry_completes(tmp_path: Path) -> None:
    core = make(tmp_path, tools(tmp_path))
    first = asked(core, {"focus": "speed"})
    assert first["inputRequests"] == {"arguments": {"method": "elicitation/create", "params": {
        "message": "prompt 'review' needs: branch",
        "requestedSchema": {"type": "object", "properties": {"branch": {"type": "string", "description": "the branch"}},
                            "required": ["branch"]}}}}
    retry = {"name": "review", "arguments": {"focus": "speed"}, "requestState": first["requestState"],
             "inputResponses": {"arguments": {"action": "accept", "content": {"branch": "main", "focus": "looks"}}}}
    done = get(core, retry, ASKING, id=2)["result"]
    assert done["resultType"] == "complete"      # only what was asked is taken from the answer
    assert done["messages"][0]["content"]["text"] == "Review main, focusing on speed."
    again = get(core, {**retry, "inputResponses": {}}, ASKING, id=3)["result"]      # no answer yet: asked again
    assert again["resultType"] == "input_required" and again["inputRequests"] == first["inputRequests"]


@pytest.mark.parametrize("change, words", [
    ({"requestState": "v1.AAAA.AAAA"}, "requestState"),
    ({"arguments": {"focus": "security"}}, "issued for other arguments"),
    ({"inputResponses": {"arguments": {"action": "decline"}}}, "the user answered 'decline'"),
    ({"inputResponses": {"arguments": {"action": "accept", "content": {"branch": 7}}}}, "must be a string"),
    ({"inputResponses": []}, "inputResponses must be an object"),
])
def test_a_retry_that_does_not_complete_is_invalid_params(tmp_path: Path, change: dict[str, Any], words: str) -> None:
    core = make(tmp_path, tools(tmp_path))
    first = asked(core, {"focus": "speed"})
    retry = {"name": "review", "arguments": {"focus": "speed"}, "requestState": first["requestState"],
             "inputResponses": {"arguments": {"action": "accept", "content": {"branch": "main"}}}, **change}
    actions = feed(core, request(2, "prompts/get", {"_meta": modern_meta(ASKING), **retry}))
    error = sent(actions)[0]["error"]
    assert error["code"] == -32602
    assert words in error["message"] + " ".join(str(a) for a in actions), (error, actions)


def test_a_state_for_one_prompt_does_not_answer_another(tmp_path: Path) -> None:
    core = make(tmp_path, tools(tmp_path))
    state = asked(core)["requestState"]
    actions = feed(core, request(2, "prompts/get", {"_meta": modern_meta(ASKING), "name": "context",
                                                    "requestState": state}))
    assert sent(actions)[0]["error"]["code"] == -32602
    assert "issued for prompt 'review', not 'context'" in " ".join(str(a) for a in actions)


@pytest.mark.parametrize("rev", ["2025-11-25", MODERN])
def test_who_cannot_be_asked_gets_invalid_params(tmp_path: Path, rev: str) -> None:
    """A legacy session (its prompts/get is not one elicitation may follow here) and a modern request
    without elicitation: -32602 naming the missing argument, as before."""
    core = make(tmp_path, tools(tmp_path))
    init(core, rev)
    error = answer(core, rev, 1, "prompts/get", {"name": "review"})["error"]
    assert error["code"] == -32602 and "missing required argument 'branch'" in error["message"]
