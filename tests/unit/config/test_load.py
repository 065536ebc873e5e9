"""The tools-file loader: located errors, defaults, and the inputSchema it builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpwrap.config import load as config
from mcpwrap.config import model, tools

BROKEN = Path(__file__).parents[2] / "fixtures" / "broken"
# file -> (line, col, words the message must contain)
EXPECTED = {
    "misspelt_key.toml": (2, 1, "unknown key 'tools.echo.comand' (did you mean 'command'?)"),
    "syntax.toml": (3, 1, "TOML syntax"),
    "wrong_type.toml": (2, 1, "'tools.echo.command' must be an array"),
    "unknown_placeholder.toml": (2, 1, "placeholder '{mesage}' names no argument"),
    "bad_timeout.toml": (3, 1, "bad duration 'soon'"),
    "bad_schema.toml": (3, 30, "invalid JSON Schema"),
    "bad_name.toml": (1, 1, "tool name 'has space'"),
    "both_command_and_shell.toml": (1, 1, "exactly one of 'command'"),
    "bad_output.toml": (3, 1, "output 'yaml'"),
    "bad_task.toml": (3, 1, "task 'sometimes'"),
    "no_tools.toml": (1, 1, "no tools defined"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_files_are_located(name: str) -> None:
    line, col, words = EXPECTED[name]
    with pytest.raises(config.ConfigError) as caught:
        config.load(BROKEN / name)
    problem = caught.value.problems[0]
    assert (problem.line, problem.col) == (line, col), str(problem)
    assert words in problem.message
    assert str(problem).startswith(f"{BROKEN / name}:{line}:{col}: ")


def test_every_broken_fixture_is_covered() -> None:
    assert {p.name for p in BROKEN.glob("*.toml")} == set(EXPECTED)


def test_inline_table_keys_are_located(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[tools.x]\ncommand = ["x", "{a}"]\nargs.a = { type = "string", maxLength = -1 }\n')
    with pytest.raises(config.ConfigError) as caught:
        config.load(path)
    problem = caught.value.problems[0]
    assert (problem.line, problem.col) == (3, 29)


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


@pytest.mark.parametrize("text,seconds", [("20s", 20), ("2m", 120), ("1.5s", 1.5), (7, 7), ("250ms", 0.25), ("1h", 3600)])
def test_durations(text: object, seconds: float) -> None:
    assert config.parse_duration(text) == seconds


@pytest.mark.parametrize("text,size", [("1MiB", 1 << 20), ("64KiB", 65536), (100, 100), ("1MB", 10**6), ("2 GiB", 2 << 30)])
def test_sizes(text: object, size: int) -> None:
    assert config.parse_size(text) == size


@pytest.mark.parametrize("bad", ["", "-1s", "0", "1 parsec", True, -3])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        config.parse_duration(bad)


def test_elicit_needs_a_primitive(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[tools.t]\ncommand = ["x"]\nargs.o = { type = "object", elicit = true }\n')
    with pytest.raises(config.ConfigError, match="'elicit' needs"):
        config.load(path)


# (TOML of the typo, its line and column, the message): an argument table in both spellings,
# nested and inline, and the annotations table; each typo silently did nothing before.
TYPOS = {
    "optinal": ('[tools.t.args.a]\ntype = "string"\noptinal = true\n', 5, 1,
                "unknown key 'tools.t.args.a.optinal' (did you mean 'optional'?)"),
    "defualt": ('args.a = { type = "string", defualt = "x" }\n', 3, 29,
                "unknown key 'tools.t.args.a.defualt' (did you mean 'default'?)"),
    "descripton": ('args.a.type = "string"\nargs.a.descripton = "the a"\n', 4, 1,
                   "unknown key 'tools.t.args.a.descripton' (did you mean 'description'?)"),
    "readOnlyHnt": ('annotations = { readOnlyHnt = true }\n', 3, 17,
                    "unknown key 'tools.t.annotations.readOnlyHnt' (did you mean 'readOnlyHint'?)"),
}


@pytest.mark.parametrize("typo", sorted(TYPOS))
def test_typos_in_nested_tables_are_located(typo: str, tmp_path: Path) -> None:
    body, line, col, message = TYPOS[typo]
    path = tmp_path / "t.toml"
    path.write_text('[tools.t]\ncommand = ["x"]\n' + body)
    with pytest.raises(config.ConfigError) as caught:
        config.load(path)
    assert [str(p) for p in caught.value.problems] == [f"{path}:{line}:{col}: {message}"]


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


def test_toolsets_select_by_name_and_read_only_hint(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[tools.a]\ncommand = ["true"]\nannotations = { readOnlyHint = true }\n'
                                     '[tools.b]\ncommand = ["true"]\n[tools.c]\ncommand = ["true"]\n')
    loaded = config.load(tmp_path / "t.toml")

    def names(toolset: config.Toolset) -> list[str]:
        return [t.name for t in toolset.apply(loaded).tools]

    assert names(config.Toolset(read_only=True)) == ["a"]
    assert names(config.Toolset(only=frozenset({"b", "c"}))) == ["b", "c"]
    assert names(config.Toolset(exclude=frozenset({"a"}), read_only=False)) == ["b", "c"]
    assert config.Toolset(only=frozenset({"b", "zz"})).unknown(loaded) == ["zz"]


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


@pytest.mark.parametrize(("snippet", "codes"), [
    ("", {0}), ("success_codes = [0, 1]", {0, 1}), ("success_codes = []", None), ("success_codes = [256]", None),
    ("success_codes = [true]", None), ('success_codes = "0"', None)])
def test_success_codes(tmp_path: Path, snippet: str, codes: set[int] | None) -> None:
    (tmp_path / "t.toml").write_text(f'[tools.t]\ncommand = ["true"]\n{snippet}\n')
    if codes is not None:
        assert config.load(tmp_path / "t.toml").tools[0].success_codes == codes
        return
    with pytest.raises(config.ConfigError) as caught:
        config.load(tmp_path / "t.toml")
    assert "success_codes" in str(caught.value) and caught.value.problems[0].line == 3


def test_loaded_tools_and_arguments_are_what_their_dataclasses_make(tmp_path: Path) -> None:
    """The loader sets their fields without the generated __init__: every field, nothing else,
    so a tool equals the one its __init__ makes of the same values."""
    from dataclasses import fields

    tools = config.load(Path(__file__).parents[2] / "fixtures" / "conformance.toml").tools
    tools += config.load(Path(__file__).parents[2] / "fixtures" / "census.toml").tools
    assert any(t.args for t in tools)
    for made in [*tools, *(a for t in tools for a in t.args)]:
        names = [f.name for f in fields(made)]
        assert set(names) <= set(vars(made)) <= set(names) | {"input_schema", "call_schema"}   # and cached schemas
        again = type(made)(**{name: getattr(made, name) for name in names})
        assert again == made and repr(again) == repr(made)
