"""Elicitation forms at full fidelity, per revision, in memory (issue 13 item 5).

Each form must validate against that revision's ElicitRequest schema (strictly: no field the
revision lacks) and keep the titles in the revision's own shape; an argument elicited when missing
is not `required` in the inputSchema; a 2026-07-28 retry with answers but no requestState is asked
again. tests/blackbox/sdk/test_ts_elicit.py round-trips the same forms through the TypeScript SDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import load as config
from mcpwrap.protocol import asking
from mcpwrap.protocol.actions import StartCall
from mcpwrap.protocol.core import Core
from mcpwrap.protocol.revisions import MODERN
from tests import mcpschema
from tests.harness import modern_meta
from tests.unit.protocol.test_core import KEYRING, feed, init, request, sent

FIXTURE = Path(__file__).parents[2] / "fixtures" / "forms.toml"
ASK = {"elicitation": {}}
TITLED_ONE_OF = [{"const": "stg", "title": "Staging"}, {"const": "prod", "title": "Production"}]
ENUM_NAMES = {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["Small", "Medium", "Large"]}
TITLED_MULTI = {"type": "array", "minItems": 1,
                "items": {"anyOf": [{"const": "a", "title": "Alpha"}, {"const": "b", "title": "Beta"}]}}


def make_core() -> Core:
    return Core(config.load(FIXTURE), lambda: KEYRING, lambda: 1000.0)


def legacy_form(version: str, tool: str = "pick") -> tuple[Core, dict[str, Any]]:
    core = make_core()
    init(core, version, ASK)
    ask = sent(feed(core, request(1, "tools/call", {"name": tool, "arguments": {}})))[0]
    assert ask["method"] == "elicitation/create", ask
    mcpschema.check(version, ask)
    mcpschema.validate(version, "ElicitRequest", ask if version >= "2025-11-25" else
                       {k: ask[k] for k in ("method", "params")})
    return core, ask


def test_2025_11_25_keeps_every_titled_form() -> None:
    core, ask = legacy_form("2025-11-25")
    fields = ask["params"]["requestedSchema"]["properties"]
    assert fields["env"] == {"type": "string", "title": "Environment", "oneOf": TITLED_ONE_OF}
    assert fields["size"] == ENUM_NAMES
    assert fields["tags"] == TITLED_MULTI
    for name, definition in (("env", "TitledSingleSelectEnumSchema"), ("size", "LegacyTitledEnumSchema"),
                             ("tags", "TitledMultiSelectEnumSchema")):
        mcpschema.validate("2025-11-25", definition, fields[name])
    answer = {"action": "accept", "content": {"env": "prod", "size": "m", "tags": ["a", "b"]}}
    start = feed(core, {"jsonrpc": "2.0", "id": ask["id"], "result": answer})[1]
    assert isinstance(start, StartCall) and start.arguments == {"env": "prod", "size": "m", "tags": ["a", "b"]}


def test_2025_06_18_asks_a_titled_single_select_as_enum_names() -> None:
    """2025-06-18 has no oneOf form: the titles travel as enumNames, the one form it has for them."""
    core, ask = legacy_form("2025-06-18", "single")
    assert ask["params"]["requestedSchema"]["properties"]["env"] == {
        "type": "string", "enum": ["stg", "prod"], "enumNames": ["Staging", "Production"]}
    mcpschema.validate("2025-06-18", "EnumSchema", ask["params"]["requestedSchema"]["properties"]["env"])
    start = feed(core, {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"env": "stg"}}})[1]
    assert isinstance(start, StartCall) and start.arguments == {"env": "stg"}


def test_2025_06_18_cannot_ask_for_a_list_and_says_so() -> None:
    core = make_core()
    init(core, "2025-06-18", ASK)
    out = sent(feed(core, request(1, "tools/call", {"name": "pick", "arguments": {}})))
    assert len(out) == 1 and "method" not in out[0], out          # no form the revision cannot express
    mcpschema.check("2025-06-18", out[0], "tools/call")
    assert out[0]["result"]["isError"] is True and "2025-06-18" in out[0]["result"]["content"][0]["text"]


def test_2026_07_28_input_required_keeps_every_titled_form() -> None:
    core = make_core()
    params = {"_meta": modern_meta(ASK), "name": "pick", "arguments": {}}
    first = sent(feed(core, request(1, "tools/call", params)))[0]
    mcpschema.check("2026-07-28", first, "tools/call")
    question = first["result"]["inputRequests"]["arguments"]
    mcpschema.validate("2026-07-28", "ElicitRequest", question)
    fields = question["params"]["requestedSchema"]["properties"]
    assert fields["env"]["oneOf"] == TITLED_ONE_OF and fields["size"] == ENUM_NAMES and fields["tags"] == TITLED_MULTI
    retry = {**params, "requestState": first["result"]["requestState"],
             "inputResponses": {"arguments": {"action": "accept", "content": {"env": "stg", "size": "l", "tags": ["b"]}}}}
    start = feed(core, request(2, "tools/call", retry))[0]
    assert isinstance(start, StartCall) and start.arguments == {"env": "stg", "size": "l", "tags": ["b"]}


@pytest.mark.parametrize("responses", [{}, {"arguments": {"action": "accept", "content": {"env": "prod"}}},
                                       {"confirm": {"action": "accept"}}])
def test_2026_07_28_answers_without_request_state_are_asked_again(responses: dict[str, Any]) -> None:
    """SEP-2322's SHOULD: a new input_required, not -32602; and an unsigned answer counts for nothing."""
    core = make_core()
    params = {"_meta": modern_meta(ASK), "name": "single", "arguments": {}, "inputResponses": responses}
    actions = feed(core, request(1, "tools/call", params))
    [answer] = sent(actions)
    mcpschema.check("2026-07-28", answer, "tools/call")
    assert answer["result"]["resultType"] == "input_required", answer
    assert "arguments" in answer["result"]["inputRequests"] and not any(isinstance(a, StartCall) for a in actions)


def test_malformed_input_responses_are_still_32602() -> None:
    core = make_core()
    params = {"_meta": modern_meta(ASK), "name": "single", "arguments": {}, "inputResponses": ["accept"]}
    assert sent(feed(core, request(1, "tools/call", params)))[0]["error"]["code"] == -32602


def test_elicited_arguments_are_not_required_in_the_input_schema() -> None:
    core = make_core()
    init(core, "2025-11-25")
    tools = {t["name"]: t for t in sent(feed(core, request(1, "tools/list")))[0]["result"]["tools"]}
    assert "required" not in tools["pick"]["inputSchema"] and "required" not in tools["single"]["inputSchema"]
    tool = core.config.tool("pick")
    assert tool is not None and tool.call_schema["required"] == ["env", "size", "tags"]   # required when it runs


def test_the_loader_accepts_titled_forms_and_checks_enum_names(tmp_path: Path) -> None:
    loaded = config.load(FIXTURE).tool("pick")
    assert loaded is not None and all(a.elicit for a in loaded.args)
    path = tmp_path / "bad.toml"
    for fragment, problem in (('{ type = "string", enum = ["a", "b"], enumNames = ["A"] }', "enumNames"),
                              ('{ type = "array", items = { anyOf = [{ type = "string" }] }, elicit = true }',
                               "'elicit' needs")):
        path.write_text(f'[tools.t]\ncommand = ["x", "{{v}}"]\nargs.v = {fragment}\n')
        with pytest.raises(config.ConfigError, match=problem):
            config.load(path)


SIGN = config.loads(b"""
[tools.sign]
command = ["echo", "{name}", "{size}"]
confirm = "Sign as {name}?"
args.name = { type = "string", elicit = true }
args.size = { type = "integer", elicit = true, default = 3 }
""", Path("/tmp/sign.toml")).tools[0]


def test_a_task_asks_each_missing_argument_as_its_own_question_then_the_confirmation() -> None:
    question = asking.next_question(SIGN, {}, False, None)
    assert isinstance(question, asking.Question)
    parts = asking.one_by_one(SIGN, question)
    assert [p.key for p in parts] == ["name", "size"]
    for part in parts:
        form = part.request(MODERN)["params"]["requestedSchema"]
        assert list(form["properties"]) == [part.key]
    confirm = asking.next_question(SIGN, {"name": "ada", "size": 3}, False, None)
    assert isinstance(confirm, asking.Question) and asking.one_by_one(SIGN, confirm) == (confirm,)
    assert confirm.message == "Sign as ada?"


@pytest.mark.parametrize(("key", "response", "taken"), [
    ("name", {"action": "accept", "content": {"name": "ada", "confirm": True}}, (True, "ada")),  # only the field asked
    ("size", {"action": "accept", "content": {"name": "x"}}, (True, 3)),               # left empty: the default
    ("confirm", {"action": "accept"}, (True, True)),
])
def test_an_answer_to_a_task_question_takes_only_the_field_asked(key: str, response: dict[str, Any],
                                                                 taken: tuple[bool, Any]) -> None:
    assert asking.taken(_part(key), response) == taken


@pytest.mark.parametrize(("key", "response", "words"), [
    ("name", {"action": "accept", "content": {"name": "a\nrm -rf /"}}, "control character"),
    ("name", {"action": "accept", "content": {"name": "\x1b[2J"}}, "control character"),
    ("name", {"action": "accept", "content": {"name": 7}}, "name"),
    ("name", {"action": "accept", "content": {}}, "without"),
    ("name", {"action": "decline"}, "declined"),
    ("confirm", {"action": "cancel"}, "cancelled"),
    ("name", {"action": "maybe"}, "malformed"),
])
def test_an_answer_to_a_task_question_that_cannot_be_used_is_refused_with_why(key: str, response: dict[str, Any],
                                                                             words: str) -> None:
    ok, why = asking.taken(_part(key), response)
    assert not ok and words in why


def _part(key: str) -> asking.Question:
    if key == "confirm":
        question = asking.next_question(SIGN, {"name": "ada", "size": 3}, False, None)
        assert isinstance(question, asking.Question)
        return question
    question = asking.next_question(SIGN, {}, False, None)
    assert isinstance(question, asking.Question)
    return next(p for p in asking.one_by_one(SIGN, question) if p.key == key)
