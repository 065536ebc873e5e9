"""config/tools: a [tools.NAME] table read into a `Tool` — its arguments and inputSchema, its argv template,
its success codes, its confinement inherited from [server] — every mistake a located problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpwrap.config import load as config
from mcpwrap.config import model, tools


def test_defaults_and_input_schema(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("""
[server]
timeout = "2m"
max_output = "64KiB"
[tools.t]
command = ["x", "{a}", "{b}"]
timeout = 1.5
args.a = { type = "string" }
args.b = { type = "integer", default = 3 }
args.c = { type = "boolean", flag = "-c", optional = true }
""")
    cfg = config.load(path)
    tool = cfg.tool("t")
    assert tool is not None and cfg.name == "t"
    assert tool.timeout_s == 1.5 and tool.max_output == 64 * 1024
    assert tool.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer", "default": 3}, "c": {"type": "boolean"}},
        "additionalProperties": False,
        "required": ["a"],
    }
    assert tool.cwd == tmp_path



def test_elicit_needs_a_primitive(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[tools.t]\ncommand = ["x"]\nargs.o = { type = "object", elicit = true }\n')
    with pytest.raises(config.ConfigError, match="'elicit' needs"):
        config.load(path)



def test_argument_tables_accept_the_schema_vocabulary(tmp_path: Path) -> None:
    """Every accepted keyword loads (none is refused by mistake) and reaches the inputSchema."""
    path = tmp_path / "t.toml"
    path.write_text("""
[tools.t]
command = ["x", "{a}", "{n}", "{o}"]
[tools.t.args.a]
type = "string"
title = "A"
description = "d"
minLength = 1
maxLength = 9
pattern = "^x"
format = "hostname"
examples = ["x"]
deprecated = false
readOnly = false
writeOnly = false
contentMediaType = "text/plain"
contentEncoding = "7bit"
default = "x"
enum = ["x", "xy"]
enumNames = ["Ex", "Ex why"]
[tools.t.args.n]
type = "integer"
minimum = 0
maximum = 9
exclusiveMinimum = -1
exclusiveMaximum = 10
multipleOf = 1
const = 3
optional = true
[tools.t.args.o]
anyOf = [{ type = "object" }]
oneOf = [{ type = "object" }]
allOf = [{ type = "object" }]
not = { type = "null" }
required = ["k"]
additionalProperties = false
patternProperties = { "^k" = {} }
propertyNames = { pattern = "^k" }
minProperties = 1
maxProperties = 2
elicit = false
properties = { k = { type = "string" } }
[tools.t.args.l]
type = "array"
items = { type = "string" }
prefixItems = [{ type = "string" }]
minItems = 0
maxItems = 3
uniqueItems = true
contains = { type = "string" }
[tools.t.args.f]
type = "boolean"
flag = "-f"
[tools.t.args.p]
type = "string"
within = ["."]
must_exist = false
kind = "dir"
secret = true
""")
    tool = config.load(path).tool("t")
    assert tool is not None
    used = set().union(*(a.schema for a in tool.args)) | {"flag", "optional", "elicit", "within", "must_exist", "kind", "secret"}
    assert used == tools.ARG_KEYS



def test_schema_file_lists_the_argument_keys() -> None:
    """tools-file.schema.json refuses the same unknown argument keys as the loader."""
    doc = json.loads((Path(config.__file__).parent / "tools-file.schema.json").read_text())
    arg = doc["$defs"]["arg"]
    assert set(arg["propertyNames"]["enum"]) == tools.ARG_KEYS
    assert set(arg["properties"]) == tools.ARG_OWN_KEYS
    assert set(doc["$defs"]["tool"]["properties"]["annotations"]["properties"]) == set(tools.ANNOTATION_KEYS)



CONFINED = """
[server]
env_inherit = ["HOME"]
[server.sandbox]
read = ["{cwd}", "/srv"]
[server.limits]
memory = "64MiB"

[tools.inherits]
command = ["cat", "--", "{path}"]
limits = { processes = 8 }
args.path = { type = "string", within = ["{cwd}/data"], must_exist = true, kind = "file" }

[tools.opts_out]
shell = "echo hi"
sandbox = false
limits = false
env_inherit = true

[tools.overrides]
shell = "echo hi"
sandbox = { network = true, system = false, write = ["out"] }
"""



def test_sandbox_limits_and_env_policy_inherit_from_server(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text(CONFINED)
    tools = {t.name: t for t in config.load(tmp_path / "t.toml").tools}
    inherits, opts_out, overrides = tools["inherits"], tools["opts_out"], tools["overrides"]
    assert inherits.sandbox is not None and overrides.sandbox is not None
    assert {str(tmp_path), "/srv", "/usr", str(tmp_path / "data")} <= set(inherits.sandbox.read)  # within is granted
    assert inherits.sandbox.write == ("/dev/null",) and not inherits.sandbox.network and inherits.sandbox.required
    assert inherits.limits == model.Limits(memory=64 << 20, processes=8)
    assert inherits.env_inherit == ("HOME",)
    assert inherits.args[0].path == model.PathRule(within=(str(tmp_path / "data"),), must_exist=True, kind="file")
    assert opts_out.sandbox is None and opts_out.limits is None and opts_out.env_inherit is True
    assert overrides.sandbox == model.Sandbox(read=(str(tmp_path), "/srv"), write=(str(tmp_path / "out"),),
                                               network=True, required=True)



@pytest.mark.parametrize("snippet, words", [
    ('sandbox = { reed = ["/x"] }', "unknown key 'tools.t.sandbox.reed' (did you mean 'read'?)"),
    ('sandbox = { read = [3] }', "'tools.t.sandbox.read[0]' must be a non-empty path"),
    ('sandbox = { read = ["{home}/{nope}"] }', "'{nope}' in 'tools.t.sandbox.read' is not a path placeholder"),
    ('sandbox = "yes"', "'tools.t.sandbox' must be a table or a boolean"),
    ('limits = { memory = "lots" }', "'tools.t.limits.memory': bad size 'lots'"),
    ('limits = { procs = 1 }', "unknown key 'tools.t.limits.procs' (did you mean 'processes'?)"),
    ('limits = { processes = 0 }', "'tools.t.limits.processes': 0 must be a positive integer"),
    ('env_inherit = ["A-B"]', "env_inherit lists 'A-B', which is not a variable name"),
    ('env_inherit = "no"', "'tools.t.env_inherit' must be a boolean or an array"),
    ('args.p = { type = "integer", within = ["/x"] }', "a path argument (format = \"path\""),
    ('args.p = { type = "string", kind = "fil" }', "kind 'fil' must be \"file\" or \"dir\""),
])
def test_confinement_mistakes_are_located(tmp_path: Path, snippet: str, words: str) -> None:
    (tmp_path / "t.toml").write_text(f'[tools.t]\ncommand = ["true"]\n{snippet}\n')
    with pytest.raises(config.ConfigError) as caught:
        config.load(tmp_path / "t.toml")
    problem = caught.value.problems[0]
    assert words in problem.message and problem.line == 3, str(caught.value)



ELEMENT_ARGS = ('args.o = { type = "object" }\nargs.b = { type = "boolean", flag = "--b" }\n'
                'args.l = { type = "array", items = { type = "string" } }\n'
                'args.m = { type = "array", items = { type = "string" } }\nargs.s = { type = "string" }\n')



@pytest.mark.parametrize(("command", "words"), [
    ('["x", "{o}"]', "object argument 'o' cannot be a placeholder"),
    ('["x", "-{o}"]', "object argument 'o' cannot be a placeholder"),
    ('["x", "{nope}"]', "placeholder '{nope}' names no argument"),
    ('["x", "{s}{nope}"]', "placeholder '{nope}' names no argument"),
    ('["x", "--f={b}"]', "flag argument '{b}' must be a whole command element"),
    ('["x", "{l}{m}"]', "command[1] holds two array placeholders"),
    ('["x", "{b}", "{l}", "{s}", "-{s}-", ["-o", "{s}"]]', None),
])
def test_command_elements_are_checked_whole_or_in_part(tmp_path: Path, command: str, words: str | None) -> None:
    """An element that is one placeholder takes a shorter way through the checks than one with
    text around it: both must refuse the same things."""
    (tmp_path / "t.toml").write_text(f'[tools.t]\ncommand = {command}\n{ELEMENT_ARGS}')
    if words is None:
        assert config.load(tmp_path / "t.toml").tools[0].command is not None
        return
    with pytest.raises(config.ConfigError) as caught:
        config.load(tmp_path / "t.toml")
    assert [p.message for p in caught.value.problems if words in p.message], str(caught.value)



@pytest.mark.parametrize(("key", "snippet", "codes"), [
    ("success_codes", "", {0}), ("success_codes", "success_codes = [0, 1]", {0, 1}),
    ("success_codes", "success_codes = []", None), ("success_codes", "success_codes = [256]", None),
    ("success_codes", "success_codes = [true]", None), ("success_codes", 'success_codes = "0"', None),
    ("protocol_error_codes", "", set()), ("protocol_error_codes", "protocol_error_codes = [2, 70]", {2, 70}),
    ("protocol_error_codes", "protocol_error_codes = []", None),
    ("protocol_error_codes", "protocol_error_codes = [256]", None),
    ("protocol_error_codes", "protocol_error_codes = [0]", None),             # never a success code too
    ("protocol_error_codes", "success_codes = [0, 1]\nprotocol_error_codes = [1]", None)])
def test_exit_codes(tmp_path: Path, key: str, snippet: str, codes: set[int] | None) -> None:
    """success_codes, and the exit statuses that are a protocol error (never a success code too)."""
    (tmp_path / "t.toml").write_text(f'[tools.t]\ncommand = ["true"]\n{snippet}\n')
    if codes is not None:
        assert getattr(config.load(tmp_path / "t.toml").tools[0], key) == codes
        return
    with pytest.raises(config.ConfigError) as caught:
        config.load(tmp_path / "t.toml")
    assert [p for p in caught.value.problems if key in p.message and p.line >= 3], str(caught.value)
