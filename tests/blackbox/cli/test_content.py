"""`mcpwrap read`, `mcpwrap prompt`, and `check`/`list` on resources and prompts (issue 13 item 7);
and the capabilities each revision is offered for what a file defines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import load as config
from mcpwrap.run.spool import Spool
from tests import mcpschema
from tests.blackbox.cli.test_more import run
from tests.unit.protocol.test_resources import LEGACY, MODERN, init, make

TOOLS = """
[server]
name = "content-cli"
[tools.echo]
command = ["echo", "{msg}"]
args.msg = { type = "string" }
[resources.notes]
title = "Notes"
path = "notes.md"
[resources.greeting]
description = "A greeting"
uri_template = "greet://{who}"
command = ["printf", "hello %s", "{who}"]
args.who = { type = "string", maxLength = 20 }
[resources.raw]
uri = "raw://bytes"
output = "blob"
command = ["printf", "\\\\001\\\\002\\\\377"]
[resources.broken]
uri = "broken://x"
shell = "echo nope >&2; exit 3"
[prompts.review]
description = "Review a topic"
args.topic = { required = true }
messages = [
  { text = "Review the {topic}." },
  { resource = "greet://{topic}" },
  { role = "assistant", command = ["printf", "%s?", "{topic}"] },
]
"""


PICTURE = """
[prompts.picture]
messages = [{ text = "This one:" }, { command = ["printf", "\\\\211PNG"], output = "image/png" }]
"""


@pytest.fixture()
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    (tmp_path / "notes.md").write_text("# Notes\nshort\n")
    return path


def test_read_prints_files_and_command_resources(tools: Path) -> None:
    notes = run("read", str(tools), (tools.parent / "notes.md").as_uri())
    assert (notes.returncode, notes.stdout) == (0, "# Notes\nshort\n"), notes.stderr
    greeting = run("read", str(tools), "greet://ann%20lee")
    assert (greeting.returncode, greeting.stdout) == (0, "hello ann lee\n"), greeting.stderr
    as_json = json.loads(run("read", str(tools), "greet://bo", "--json").stdout)
    mcpschema.check("2025-11-25", {"jsonrpc": "2.0", "id": 1, "result": as_json}, "resources/read")
    assert as_json["contents"] == [{"uri": "greet://bo", "mimeType": "text/plain", "text": "hello bo"}]


def test_read_writes_binary_contents_to_a_file(tools: Path, tmp_path: Path) -> None:
    target = tmp_path / "raw.bin"
    done = run("read", str(tools), "raw://bytes", "--output", str(target))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert target.read_bytes() == b"\x01\x02\xff" and f"to {target}" in done.stderr


def test_read_refusals_and_failures(tools: Path) -> None:
    unknown = run("read", str(tools), "nope://x")
    assert unknown.returncode == 2 and "Resource not found (nope://x)" in unknown.stderr and unknown.stdout == ""
    invalid = run("read", str(tools), "greet://" + "x" * 30)
    assert invalid.returncode == 2 and "invalid arguments for resource 'greeting'" in invalid.stderr
    broken = run("read", str(tools), "broken://x")
    assert broken.returncode == 1 and "nope" in broken.stderr


def test_read_gives_a_kept_output_stream_whole_or_the_part_asked_for(tools: Path, tmp_path: Path) -> None:
    loaded = config.load(tools)
    spool = Spool.for_tools_file(tmp_path / "state", tools, loaded.spool.quota, loaded.spool.ttl_s)
    text = "".join(f"line {n}\n" for n in range(300_000)).encode()        # > 3 pages of 1 MiB
    call, binary = spool.new_call(), spool.new_call()
    for name, data in ((call, text), (binary, bytes(range(256)) * 10)):
        sink = spool.open(name, "stdout")
        assert sink.write(data)
        sink.close()
    state = ("--state-dir", str(tmp_path / "state"))
    whole = run("read", str(tools), f"mcpwrap://output/{call}/stdout", *state)
    assert whole.returncode == 0 and whole.stdout.encode() == text, whole.stderr
    part = run("read", str(tools), f"mcpwrap://output/{call}/stdout?offset=7&length=13", *state)
    assert part.stdout.encode() == text[7:20] + b"\n"                      # printed as `call` prints text
    target = tmp_path / "out.bin"
    raw = run("read", str(tools), f"mcpwrap://output/{binary}/stdout", "-o", str(target), *state)
    assert raw.returncode == 0 and target.read_bytes() == bytes(range(256)) * 10, raw.stderr
    gone = run("read", str(tools), f"mcpwrap://output/{'0' * 32}/stdout", *state)
    assert gone.returncode == 2 and "Resource not found" in gone.stderr


def test_prompt_prints_the_messages(tools: Path) -> None:
    done = run("prompt", str(tools), "review", "--arg", "topic=style")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("[user]\nReview the style.\n\n[user] greet://style\nhello style\n\n"
                           "[assistant]\nstyle?\n")
    as_json = json.loads(run("prompt", str(tools), "review", "-a", "topic=x", "--json").stdout)
    mcpschema.check("2025-11-25", {"jsonrpc": "2.0", "id": 1, "result": as_json}, "prompts/get")
    assert [m["content"]["type"] for m in as_json["messages"]] == ["text", "resource", "text"]
    tools.write_text(TOOLS + PICTURE)
    picture = run("prompt", str(tools), "picture")
    assert picture.returncode == 0, picture.stderr
    assert picture.stdout == "[user]\nThis one:\n\n[user]\n(image/png image: see --json)\n"


def test_prompt_refusals(tools: Path) -> None:
    missing = run("prompt", str(tools), "review")
    assert missing.returncode == 2 and "missing required argument 'topic'" in missing.stderr
    unknown = run("prompt", str(tools), "nope")
    assert unknown.returncode == 2 and "no prompt named 'nope'" in unknown.stderr and "review" in unknown.stderr
    extra = run("prompt", str(tools), "review", "-a", "topic=x", "-a", "other=y")
    assert extra.returncode == 2 and "unknown argument 'other'" in extra.stderr


def test_check_and_list_mention_resources_and_prompts(tools: Path) -> None:
    checked = run("check", str(tools))
    assert checked.returncode == 0 and checked.stdout.startswith(f"{tools}: ok, 1 tool(s), 4 resource(s), 1 prompt(s)\n")
    listed = run("list", str(tools)).stdout.splitlines()
    assert f"resource notes  {(tools.parent / 'notes.md').as_uri()}  Notes" in listed
    assert listed[listed.index("resource greeting  greet://{who}  A greeting") + 1] == "    who: string"
    assert listed[-2:] == ["prompt review  Review a topic", "    topic: required"]
    as_json = json.loads(run("list", str(tools), "--json").stdout)
    assert [t["name"] for t in as_json["tools"]] == ["echo"]
    assert [r["name"] for r in as_json["resources"]] == ["notes", "greeting", "raw", "broken"]
    assert as_json["prompts"] == [{"name": "review", "description": "Review a topic",
                                   "arguments": [{"name": "topic", "required": True}]}]


FILES = {"tools only": ('[spool]\nquota = 0\n[tools.t]\ncommand = ["true"]\n', set()),
         "prompts only": ('[spool]\nquota = 0\n[tools.t]\ncommand = ["true"]\n'
                          '[prompts.p]\nmessages = [{ text = "hi" }]\n', {"prompts", "completions"}),
         "a file resource": ('[spool]\nquota = 0\n[tools.t]\ncommand = ["true"]\n'
                             '[resources.n]\npath = "notes.md"\n', {"resources", "subscribe"}),
         "a template resource": ('[spool]\nquota = 0\n[tools.t]\ncommand = ["true"]\n[resources.g]\n'
                                 'uri_template = "g://{x}"\ncommand = ["echo", "{x}"]\nargs.x = { type = "string" }\n',
                                 {"resources", "completions"}),
         "kept output only": ('[tools.t]\ncommand = ["true"]\n', {"resources"})}


@pytest.mark.parametrize("rev", LEGACY + [MODERN])
@pytest.mark.parametrize("file", FILES)
def test_capabilities_only_for_what_the_file_defines(tmp_path: Path, rev: str, file: str) -> None:
    text, expected = FILES[file]
    caps: dict[str, Any] = init(make(tmp_path, text), rev)["capabilities"]     # schema-checked for `rev`
    offered = {k for k in ("resources", "prompts", "completions") if k in caps}
    offered |= {"subscribe"} if caps.get("resources", {}).get("subscribe") else set()
    if rev == "2024-11-05":
        expected = expected - {"completions"}                                 # 2025-03-26 brought them
    assert offered == expected


def test_the_terminal_prompt_shows_titled_choices(tmp_path: Path) -> None:
    """`call` on a terminal asks for titled choices by value, with their titles (tests/fixtures/forms.toml)."""
    from tests.blackbox.cli.test_more import Terminal
    from tests.unit.protocol.test_asking import FIXTURE
    from tests.harness import mcpwrap_cmd

    term = Terminal(mcpwrap_cmd("call", str(FIXTURE), "pick"))
    try:
        term.expect(b"env [stg (Staging)/prod (Production)]: ")
        term.send(b"prod\n")
        term.expect(b"size [s/m/l]: ")
        term.send(b"m\n")
        term.expect(b"tags [a (Alpha)/b (Beta) (several: a,b)]: ")
        term.send(b"a,b\n")
        term.expect(b"prod m a b")
    finally:
        assert term.close() == 0
