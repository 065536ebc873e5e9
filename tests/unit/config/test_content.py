"""The tools file's [spool], [resources.NAME] and [prompts.NAME]: loaded, located errors, schema file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from mcpwrap.config import content, model, tools
from mcpwrap.config import load as config

SCHEMA = json.loads((Path(config.__file__).parent / "tools-file.schema.json").read_text())
GOOD = """
[spool]
quota = "10MiB"
ttl = "10m"
[resources.readme]
path = "README.md"
[resources.log]
uri_template = "git://log/{branch}{?limit}"
command = ["git", "log", "--max-count={limit}", "--", "{branch}"]
args.branch = { type = "string", complete = ["git", "branch"] }
args.limit = { type = "integer", default = 20 }
cache_ttl = "5s"
cache_scope = "public"
[prompts.review]
args.branch = { required = true, examples = ["main"] }
messages = [{ text = "Review {branch}" }, { role = "assistant", resource = "git://log/{branch}" },
            { command = ["echo", "{branch}"] }]
"""


def load(text: str) -> config.Config:
    return config.loads(text.encode(), Path("/tmp/project/tools.toml"))


def problems(text: str) -> list[str]:
    with pytest.raises(config.ConfigError) as info:
        load(text)
    return [f"{p.line}:{p.col}: {p.message}" for p in info.value.problems]


def test_a_file_with_resources_and_prompts_only() -> None:
    cfg = load(GOOD)
    assert cfg.tools == () and cfg.spool == config.Spool(10 * 1024 * 1024, 600.0)
    readme, log = cfg.resources
    assert readme.uri == "file:///tmp/project/README.md" and readme.mime_type == "text/markdown"
    assert log.uri is None and log.tool is not None and log.completers.keys() == {"branch"}
    complete = log.completers["branch"]    # a command of the file like any other: where it runs, its limits
    assert (complete.command, complete.cwd, complete.timeout_s) == (("git", "branch"), Path("/tmp/project"), 10.0)
    assert (log.cache_ttl_ms, log.cache_scope) == (5000, "public")
    prompt = cfg.prompts[0]
    assert prompt.arg("branch") == model.PromptArg("branch", True, examples=("main",))
    assert [m.role for m in prompt.messages] == ["user", "assistant", "user"]
    assert not list(Draft202012Validator(SCHEMA).iter_errors(__import__("tomllib").loads(GOOD)))
    assert load("[spool]\nquota = 0\n[tools.t]\ncommand = [\"true\"]\n").spool.quota == 0


@pytest.mark.parametrize("text, expected", [
    ('[resources.r]\ncommand = ["x"]\npath = "p"\n', "1:1: resource 'r' needs exactly one of"),
    ('[resources.r]\nuri = "not a uri"\ncommand = ["x"]\n', "2:1: 'uri' must be an absolute URI"),
    ('[resources.r]\nuri = "mcpwrap://output/x"\ncommand = ["x"]\n', "2:1: 'uri' must be an absolute URI"),
    ('[resources.r]\nuri_template = "x://{a}"\ncommand = ["x"]\n', "2:1: template variable '{a}' names no argument"),
    ('[resources.r]\nuri_template = "x://y"\ncommand = ["x", "{a}"]\nargs.a = { type = "string" }\n',
     "4:1: argument 'a' is not a variable of uri_template"),
    ('[resources.r]\npath = "p"\nargs.a = { type = "string" }\n', "'args' is for command resources"),
    ('[resources.r]\ncommand = ["x"]\noutput = "json"\n', "3:1: output must be \"text\" or \"blob\""),
    ('[resources.r]\ncommand = ["x"]\ncache_scope = "shared"\n', "3:1: cache_scope must be"),
    ('[resources.a]\nuri = "x://1"\ncommand = ["x"]\n[resources.b]\nuri = "x://1"\ncommand = ["y"]\n',
     "4:1: URI 'x://1' is used by two resources"),
    ('[prompts.p]\nmessages = [{ text = "{who}" }]\n', "2:1: placeholder '{who}' names no argument"),
    ('[prompts.p]\nmessages = [{ text = "a", command = ["b"] }]\n', "2:1: messages[0] needs exactly one of"),
    ('[prompts.p]\nmessages = [{ resource = "x://unknown" }]\n', "is not the uri of a [resources] table"),
    ('[prompts.p]\nargs.a = { enum = [1] }\nmessages = [{ text = "a" }]\n', "'enum' must be an array of strings"),
    ('[prompts.p]\nargs.a = { requird = true }\nmessages = [{ text = "a" }]\n', "(did you mean 'required'?)"),
    ('[prompts.p]\n', "needs 'messages'"),
    ('[prompts.p]\nmessages = [{ text = "a", output = "image/png" }]\n', "and only for a command or shell message"),
    ('[prompts.p]\nmessages = [{ command = ["b"], output = "json" }]\n', "messages[0].output must be"),
    ('[spool]\nquota = "lots"\n[tools.t]\ncommand = ["x"]\n', "2:1: 'spool.quota': bad size"),
])
def test_located_problems(text: str, expected: str) -> None:
    found = problems(text)
    assert any(expected in p for p in found), found


def test_a_command_message_may_be_an_image() -> None:
    prompt = load('[prompts.p]\nmessages = [{ shell = "cat logo.png", output = "image/png" }, { command = ["x"] }]\n'
                  ).prompts[0]
    assert [m.tool.output for m in prompt.messages if m.tool] == ["image/png", "text"]


def test_schema_file_lists_the_new_keys() -> None:
    defs = SCHEMA["$defs"]
    assert set(defs["resource"]["properties"]) == content.RESOURCE_KEYS
    assert set(defs["prompt"]["properties"]) == content.PROMPT_KEYS
    assert set(defs["promptArg"]["properties"]) == content.PROMPT_ARG_KEYS
    assert set(defs["message"]["properties"]) == content.MESSAGE_KEYS
    assert set(SCHEMA["properties"]["spool"]["properties"]) == content.SPOOL_KEYS
    assert set(defs["resourceArg"]["propertyNames"]["enum"]) == tools.ARG_KEYS | {"complete"}
