"""[prompts.NAME] and completion/complete: the core in memory per revision, then over real pipes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwrap.protocol.actions import Complete, GetPrompt
from mcpwrap.result import Resource as Contents
from mcpwrap.result import Text
from tests import mcpschema
from tests.harness import MODERN, modern_meta
from tests.unit.protocol.test_core import feed, request, sent
from tests.unit.protocol.test_resources import LEGACY, answer, init, make

TOOLS = """
[tools.echo]
command = ["echo", "hi"]
[resources.notes]
path = "notes.md"
[resources.branches]
uri_template = "git://branch/{name}"
command = ["echo", "{name}"]
args.name = { type = "string", complete = ["printf", "main\\\\nmaint\\\\ndev\\\\n"] }
[prompts.review]
title = "Review a branch"
description = "Review the diff of a branch"
args.branch = { required = true, description = "the branch", examples = ["main", "maint", "dev"] }
args.focus = { title = "Focus", enum = ["security", "speed"] }
messages = [
  { role = "user", text = "Review {branch}, focusing on {focus}." },
  { role = "assistant", text = "Which files?" },
]
[prompts.context]
args.who = { required = true, complete = ["printf", "ann\\\\nbob\\\\n"] }
messages = [
  { text = "Context for {who}:" },
  { resource = "NOTES_URI" },
  { command = ["printf", "%s", "{who}"] },
]
"""


def tools(tmp_path: Path) -> str:
    return TOOLS.replace("NOTES_URI", (tmp_path / "notes.md").as_uri())


@pytest.mark.parametrize("rev", LEGACY + [MODERN])
def test_list_and_get_per_revision(tmp_path: Path, rev: str) -> None:
    core = make(tmp_path, tools(tmp_path))
    assert init(core, rev)["capabilities"]["prompts"] == {"listChanged": True}
    prompts = answer(core, rev, 1, "prompts/list")["result"]["prompts"]
    assert [p["name"] for p in prompts] == ["review", "context"]
    review = prompts[0]
    assert ("title" in review) == (rev >= "2025-06-18")
    assert [(a["name"], a["required"]) for a in review["arguments"]] == [("branch", True), ("focus", False)]
    got = answer(core, rev, 2, "prompts/get", {"name": "review", "arguments": {"branch": "main", "focus": "speed"}})
    assert got["result"]["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Review main, focusing on speed."}},
        {"role": "assistant", "content": {"type": "text", "text": "Which files?"}}]
    assert got["result"]["description"] == "Review the diff of a branch"


@pytest.mark.parametrize("rev", ["2024-11-05", MODERN])
def test_bad_prompt_requests(tmp_path: Path, rev: str) -> None:
    core = make(tmp_path, tools(tmp_path))
    init(core, rev)
    for params in ({"name": "nope"}, {"name": "review"}, {"name": "review", "arguments": {"branch": 1}},
                   {"name": "review", "arguments": {"branch": "x", "focus": "looks"}},
                   {"name": "review", "arguments": {"branch": "x", "extra": "y"}}):
        assert answer(core, rev, 1, "prompts/get", params)["error"]["code"] == -32602


@pytest.mark.parametrize("rev", ["2024-11-05", "2025-06-18", MODERN])
def test_prompt_with_resource_and_command_is_resolved_by_the_driver(tmp_path: Path, rev: str) -> None:
    core = make(tmp_path, tools(tmp_path))
    init(core, rev)
    meta = {"_meta": modern_meta()} if rev == MODERN else {}
    action = feed(core, request(1, "prompts/get", {**meta, "name": "context", "arguments": {"who": "ann"}}))[0]
    assert isinstance(action, GetPrompt) and action.arguments == {"who": "ann"}
    uri = (tmp_path / "notes.md").as_uri()
    blocks = [("user", Text("Context for ann:")), ("user", Contents(uri, "text/markdown", text="# n")),
              ("user", Text("ann"))]
    out = sent(core.prompt_done(action.ctx, action.prompt, blocks))[0]
    mcpschema.check(rev, out, "prompts/get")
    assert out["result"]["messages"][1]["content"] == {
        "type": "resource", "resource": {"uri": uri, "mimeType": "text/markdown", "text": "# n"}}


@pytest.mark.parametrize("rev", ["2025-03-26", MODERN])
def test_completion_from_lists_and_commands(tmp_path: Path, rev: str) -> None:
    core = make(tmp_path, tools(tmp_path))
    init(core, rev)
    done = answer(core, rev, 1, "completion/complete", {"ref": {"type": "ref/prompt", "name": "review"},
                                                        "argument": {"name": "branch", "value": "mai"}})
    assert done["result"]["completion"] == {"values": ["main", "maint"], "total": 2, "hasMore": False}
    meta = {"_meta": modern_meta()} if rev == MODERN else {}
    action = feed(core, request(2, "completion/complete", {**meta, "ref": {"type": "ref/resource",
                                                                            "uri": "git://branch/{name}"},
                                                           "argument": {"name": "name", "value": "d"}}))[0]
    assert isinstance(action, Complete) and action.command.command[0] == "printf"
    many = [f"d{i:03}" for i in range(150)]
    out = sent(core.completed(action.run, ["main", *many, "d000"]))[0]
    mcpschema.check(rev, out, "completion/complete")
    assert out["result"]["completion"] == {"values": many[:100], "total": 150, "hasMore": True}
    for bad in ({"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "nope", "value": ""}},
                {"ref": {"type": "ref/resource", "uri": "x://y"}, "argument": {"name": "name", "value": ""}},
                {"ref": {"type": "ref/tool"}, "argument": {"name": "a", "value": ""}}, {}):
        assert answer(core, rev, 3, "completion/complete", bad)["error"]["code"] == -32602


def test_reload_announces_prompts_only_when_they_change(tmp_path: Path) -> None:
    from mcpwrap.config import load as config

    core = make(tmp_path, tools(tmp_path))
    init(core, "2025-11-25")
    path = tmp_path / "tools.toml"

    def announced(text: str) -> list[str]:
        notes = [m for m in sent(core.reload(config.loads(text.encode(), path))) if "method" in m]
        for note in notes:
            mcpschema.check("2025-11-25", note)
        return [m["method"] for m in notes]

    assert announced(tools(tmp_path) + '[tools.more]\ncommand = ["true"]\n') == ["notifications/tools/list_changed"]
    assert announced(tools(tmp_path).replace("Which files?", "Which dirs?")) == [
        "notifications/tools/list_changed", "notifications/prompts/list_changed"]
