"""`mcpwrap list`, `call` and `read` show and do what `serve` would (issue 28 item 11), and `call`,
`list`, `read` and `client-config` take `--tool`/`--describe` wherever they take a tools FILE
(issue 28 item 15)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.blackbox.cli.test_more import run

TOOLS = """
[tools.remove]
description = "Remove a file"
command = ["echo", "removed", "{path}", "{mode}"]
confirm = "Remove {path}?"
args.path = { type = "string", elicit = true, description = "What to remove" }
args.mode = { type = "string", enum = ["soft", "hard"], default = "soft" }
[tools.slow]
description = "A long job"
command = ["echo", "slow done"]
task = "always"
[tools.lots]
command = ["seq", "1", "20000"]
max_output = "1KiB"
[resources.notes]
path = "notes.md"
[resources.other]
uri = "note://other"
command = ["echo", "the other one"]
[resources.greeting]
uri_template = "greet://{who}"
command = ["echo", "hello", "{who}"]
args.who = { type = "string" }
"""


@pytest.fixture()
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    (tmp_path / "notes.md").write_text("# Notes\n")
    return path


def places(tmp_path: Path) -> tuple[str, ...]:
    return ("--state-dir", str(tmp_path / "state"), "--secret-file", str(tmp_path / "secret"))


def test_list_shows_confirmation_task_support_elicitation_and_choices(tools: Path) -> None:
    listed = run("list", str(tools))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    remove = lines[lines.index("remove  Remove a file") + 1:lines.index("slow  A long job")]
    assert '    asks first: "Remove {path}?"' in remove
    assert any(line.startswith("    path: string (asked of the user when missing)") for line in remove), remove
    assert any(line.startswith("    mode: string, one of soft/hard (default \"soft\")") for line in remove), remove
    assert "    runs only as a task (task = \"always\")" in lines


def test_list_json_carries_what_serve_publishes_and_what_mcpwrap_adds(tools: Path) -> None:
    listed = run("list", str(tools), "--json")
    assert listed.returncode == 0, listed.stderr
    by_name = {t["name"]: t for t in json.loads(listed.stdout)["tools"]}
    assert by_name["slow"]["execution"] == {"taskSupport": "required"}
    assert by_name["remove"]["inputSchema"]["properties"]["mode"]["enum"] == ["soft", "hard"]
    assert by_name["remove"]["mcpwrap"] == {"confirm": "Remove {path}?", "elicit": ["path"]}
    assert "mcpwrap" not in by_name["lots"]


def test_call_runs_a_task_always_tool_as_a_durable_task(tools: Path, tmp_path: Path) -> None:
    called = run("call", str(tools), "slow", *places(tmp_path))
    assert (called.returncode, called.stdout) == (0, "slow done\n"), called.stderr
    assert 'task = "always"' in called.stderr and "runs as a durable task" in called.stderr
    listed = run("tasks", "list", str(tools), "--state-dir", str(tmp_path / "state"), "--json")
    assert [t["status"] for t in json.loads(listed.stdout)] == ["completed"]


def test_call_keeps_output_beyond_max_output_where_read_finds_it(tools: Path, tmp_path: Path) -> None:
    called = run("call", str(tools), "lots", "--state-dir", str(tmp_path / "state"))
    assert called.returncode == 0, called.stderr
    assert "[output truncated" in called.stdout
    hint = re.search(r"mcpwrap read (.*)$", called.stderr, re.M)
    assert hint, called.stderr
    words = shlex.split(hint[1])
    assert words[0] == str(tools) and words[1].startswith("mcpwrap://output/")
    whole = run("read", *words, "--state-dir", str(tmp_path / "state"))
    assert (whole.returncode, whole.stdout) == (0, "".join(f"{n}\n" for n in range(1, 20001))), whole.stderr
    as_json = run("call", str(tools), "lots", "--state-dir", str(tmp_path / "state"), "--json")
    assert [b["type"] for b in json.loads(as_json.stdout)["content"]][-1] == "resource_link"


def test_read_takes_a_resource_name_as_well_as_its_uri(tools: Path) -> None:
    """A name never has a ':' and a URI always has one: the rule that tells them apart."""
    for given, text in (("notes", "# Notes\n"), ("other", "the other one\n"), ("note://other", "the other one\n"),
                        ("greet://you", "hello you\n")):
        read = run("read", str(tools), given)
        assert (read.returncode, read.stdout) == (0, text), (given, read.stderr)
    unknown = run("read", str(tools), "nothing")
    assert unknown.returncode == 2 and "resources: notes, other, greeting" in unknown.stderr, unknown.stderr
    template = run("read", str(tools), "greeting")
    assert template.returncode == 2 and "greet://{who}" in template.stderr, template.stderr


INLINE = ("--tool", "greet=echo hello {who}", "--describe", "greet=Say hello")


def test_call_takes_inline_tools(tmp_path: Path) -> None:
    called = run("call", *INLINE, "greet", "--arg", "who=world")
    assert (called.returncode, called.stdout) == (0, "hello world\n"), called.stderr
    with_json = run("call", *INLINE, "greet", '{"who": "json"}')
    assert (with_json.returncode, with_json.stdout) == (0, "hello json\n"), with_json.stderr
    both = run("call", str(tmp_path / "t.toml"), "greet", *INLINE)
    assert both.returncode == 2 and "with --tool options there is no tools FILE" in both.stderr, both.stderr


def test_list_takes_inline_tools() -> None:
    listed = run("list", *INLINE)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[:2] == ["greet  Say hello", "    who: string  "[:-2]]


def test_client_config_takes_inline_tools() -> None:
    printed = run("client-config", *INLINE, "--client", "cursor")
    assert printed.returncode == 0, printed.stderr
    entry = json.loads(printed.stdout)["mcpServers"]["mcpwrap"]
    assert entry["args"][-5:] == ["serve", *INLINE]
    named = run("client-config", *INLINE, "--name", "hi", "--client", "claude-mcp-add")
    assert shlex.split(named.stdout)[-5:] == ["serve", *INLINE], named.stderr


def test_describe_without_tool_is_refused_by_every_verb(tools: Path) -> None:
    for verb in (["list", str(tools)], ["call", str(tools), "slow"], ["client-config", str(tools)]):
        refused = run(*verb, "--describe", "x=y")
        assert refused.returncode == 2 and "--describe NAME=TEXT describes a --tool NAME" in refused.stderr, verb


def test_read_takes_inline_tools_for_a_calls_kept_output(tmp_path: Path) -> None:
    state = ("--state-dir", str(tmp_path / "state"))
    called = run("call", "--tool", "lots=seq 1 {n:integer}", "lots", "-a", "n=200000", *state)
    hint = re.search(r"mcpwrap (read .*)$", called.stderr, re.M)
    assert called.returncode == 0 and hint, called.stderr
    whole = run(*shlex.split(hint[1]))
    assert (whole.returncode, whole.stdout) == (0, "".join(f"{n}\n" for n in range(1, 200001))), whole.stderr
