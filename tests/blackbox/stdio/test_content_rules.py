"""Where a tools file's commands run, and what resources and prompts look like to a client (issue 28, 2 and 10).

One rule for every command of a tools file, whatever asks for it (a tool, a resource, a prompt
message, a completion): its table's `cwd` else `[server] cwd`, the server's `env` under its own.
A completion command is a helper: when it fails, the request gets no candidates and stderr a line.
A file resource is listed under its canonical URI; a prompt argument may have a `default`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import load as config
from tests.harness import MODERN, Server, modern_meta
from tests.unit.protocol.test_core import feed, request
from tests.unit.protocol.test_resources import answer, init, make

PRINT = '["sh", "-c", "ls; echo $GREETING"]'
EVERYWHERE = f"""
[server]
cwd = "work"
env = {{ GREETING = "hello" }}
[tools.where]
command = {PRINT}
[resources.here]
command = {PRINT}
[resources.each]
uri_template = "where://{{name}}"
command = ["echo", "{{name}}"]
args.name = {{ type = "string", complete = {PRINT} }}
[prompts.where]
args.word = {{ complete = {PRINT} }}
messages = [{{ command = {PRINT} }}]
"""


def _completion(server: Server, ref: dict[str, Any], name: str) -> dict[str, Any]:
    return server.call("completion/complete", {"ref": ref, "argument": {"name": name, "value": ""}})


def test_every_command_of_a_tools_file_runs_in_the_server_cwd_with_the_server_env(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "marker").write_text("")
    path = tmp_path / "tools.toml"
    path.write_text(EVERYWHERE)
    expected = "marker\nhello\n"
    with Server(path, tmp_path) as server:
        server.initialize("2025-11-25")
        tool = server.call("tools/call", {"name": "where", "arguments": {}})["result"]
        assert tool["content"][0]["text"] == expected
        read = server.call("resources/read", {"uri": "mcpwrap://resource/here"})["result"]
        assert read["contents"][0]["text"] == expected
        got = server.call("prompts/get", {"name": "where"})["result"]
        assert got["messages"][0]["content"]["text"] == expected
        for ref, name in (({"type": "ref/prompt", "name": "where"}, "word"),
                          ({"type": "ref/resource", "uri": "where://{name}"}, "name")):
            values = _completion(server, ref, name)["result"]["completion"]["values"]
            assert values == ["marker", "hello"], (ref, values)


def test_a_failing_completion_command_answers_no_candidates_and_says_why_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "tools.toml"
    path.write_text('[prompts.p]\nargs.word = { complete = ["sh", "-c", "echo no-branches-here >&2; exit 3"] }\n'
                    'messages = [{ text = "{word}" }]\n')
    with Server(path, tmp_path) as server:
        server.initialize("2025-11-25")
        answer = _completion(server, {"type": "ref/prompt", "name": "p"}, "word")
        assert answer.get("result") == {"completion": {"values": [], "total": 0, "hasMore": False}}, answer
        line = server.wait_stderr("no-branches-here")
        assert "prompts.p.args.word.complete" in line and "no candidates" in line, line


README_VIA = """
[tools.echo]
command = ["echo", "hi"]
[resources.readme]
path = "work/../README.md"
"""


@pytest.mark.parametrize("rev", ["2025-06-18", MODERN])
def test_a_file_resource_is_listed_by_its_canonical_uri(tmp_path: Path, rev: str) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "README.md").write_text("# read me\n")
    core = make(tmp_path, README_VIA)
    init(core, rev)
    canonical = (tmp_path / "README.md").as_uri()
    listed = answer(core, rev, 1, "resources/list")["result"]["resources"]
    assert [r["uri"] for r in listed] == [canonical]
    # A URI is the resource's identity (resources.mdx): another spelling of it is not found, and the
    # refusal names the URI to read instead.
    dotted = (tmp_path / "work").as_uri() + "/../README.md"
    refused = answer(core, rev, 2, "resources/read", {"uri": dotted})["error"]
    assert refused["data"] == {"uri": dotted} and canonical in refused["message"], refused


PROMPT = """
[tools.echo]
command = ["echo", "hi"]
[prompts.review]
args.branch = { required = true }
args.focus = { description = "What to look at", default = "correctness", enum = ["correctness", "speed"] }
args.note = { }
messages = [{ text = "Review {branch}, focusing on {focus}.{note}" },
            { command = ["echo", "{focus}"] }]
"""


@pytest.mark.parametrize("rev", ["2024-11-05", MODERN])
def test_an_absent_prompt_argument_takes_its_default(tmp_path: Path, rev: str) -> None:
    core = make(tmp_path, PROMPT)
    init(core, rev)
    listed = answer(core, rev, 1, "prompts/list")["result"]["prompts"][0]["arguments"]
    assert listed[1] == {"name": "focus", "description": "What to look at (default: correctness)", "required": False}
    meta = {"_meta": modern_meta()} if rev == MODERN else {}
    action = feed(core, request(2, "prompts/get", {**meta, "name": "review", "arguments": {"branch": "main"}}))[0]
    assert action.arguments == {"branch": "main", "focus": "correctness"}


@pytest.mark.parametrize("bad, problem", [
    ('args.x = { required = true, default = "a" }', "a required argument has no default"),
    ('args.x = { default = "c", enum = ["a", "b"] }', "not one of its enum"),
    ("args.x = { default = 3 }", "'prompts.p.args.x.default' must be"),
])
def test_a_prompt_default_is_checked_at_load(tmp_path: Path, bad: str, problem: str) -> None:
    text = f'[tools.e]\ncommand = ["true"]\n[prompts.p]\n{bad}\nmessages = [{{ text = "{{x}}" }}]\n'
    with pytest.raises(config.ConfigError) as raised:
        config.loads(text.encode(), tmp_path / "tools.toml")
    assert problem in str(raised.value), str(raised.value)
