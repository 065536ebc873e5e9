"""Argv templating: a value never becomes an option, wherever its placeholder sits.

The rule under test is about what reaches the command: an argv element (after
the program) whose first character comes from an argument value and is "-" is
refused unless a literal "--" element came earlier in the template. The
property test builds random templates with `config.loads` and checks
`build_argv` against an oracle that knows where every character came from.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpwrap.config import load as config
from mcpwrap.protocol.argv import ArgumentError, build_argv, build_env


def tool(command: list[Any], args: str) -> config.Tool:
    toml = f"[tools.t]\ncommand = {orjson.dumps(command).decode()}\n{args}"
    found = config.loads(toml.encode(), Path("/tmp/templating.toml")).tool("t")
    assert found is not None
    return found


def test_a_value_with_a_literal_suffix_cannot_become_an_option() -> None:
    git_log = tool(["git", "log", "{rev}..HEAD"], 'args.rev = { type = "string" }')
    assert build_argv(git_log, {"rev": "main"}) == ["git", "log", "main..HEAD"]
    with pytest.raises(ArgumentError, match=r"argument 'rev'.*starts with '-'"):
        build_argv(git_log, {"rev": "--output=FILE"})


def test_an_empty_value_does_not_hide_the_next_values_dash() -> None:
    joined = tool(["rm", "{a}{b}"], 'args.a = { type = "string" }\nargs.b = { type = "string" }')
    with pytest.raises(ArgumentError, match="argument 'b'"):
        build_argv(joined, {"a": "", "b": "-rf"})
    assert build_argv(joined, {"a": "x", "b": "-rf"}) == ["rm", "x-rf"]


def test_an_array_item_cannot_become_an_option() -> None:
    listing = tool(["ls", "{paths}.txt"], 'args.paths = { type = "array", items = { type = "string" } }')
    assert build_argv(listing, {"paths": ["a", "b"]}) == ["ls", "a.txt", "b.txt"]
    with pytest.raises(ArgumentError, match="argument 'paths'"):
        build_argv(listing, {"paths": ["a", "-R"]})


def test_a_literal_first_character_or_an_earlier_separator_allows_a_dash() -> None:
    grep = tool(["grep", "--regexp={pattern}", "{pattern}x", "--", "{pattern}y"],
                'args.pattern = { type = "string" }')
    with pytest.raises(ArgumentError) as refused:
        build_argv(grep, {"pattern": "-v"})                     # "{pattern}x" comes before the "--"
    assert '"--"' in str(refused.value) and "--regexp={pattern}" in str(refused.value)
    attached = tool(["grep", "--regexp={pattern}", "--", "{pattern}y"], 'args.pattern = { type = "string" }')
    assert build_argv(attached, {"pattern": "-v"}) == ["grep", "--regexp=-v", "--", "-vy"]
    empty_then_literal = tool(["prog", "{a}-x"], 'args.a = { type = "string" }')
    assert build_argv(empty_then_literal, {"a": ""}) == ["prog", "-x"]   # the dash is the tools file's own


def test_the_program_is_never_a_value() -> None:
    """build_argv judges every element alike; that argv[0] is the tools file's own text is config's promise."""
    with pytest.raises(config.ConfigError, match=r"command\[0\] \(the program\) cannot be a placeholder"):
        tool(["{prog}x", "y"], 'args.prog = { type = "string" }')


def test_the_refusal_advises_attaching_a_value_to_its_option() -> None:
    short = tool(["rg", "-e", "{pattern}", "--", "{path}"], 'args.pattern = { type = "string" }\nargs.path = { type = "string" }')
    with pytest.raises(ArgumentError) as refused:
        build_argv(short, {"pattern": "-> None", "path": "."})
    assert "'-e{pattern}' instead of '-e', '{pattern}'" in str(refused.value) and '"--"' not in str(refused.value)
    long = tool(["grep", "--regexp", "{pattern}"], 'args.pattern = { type = "string" }')
    with pytest.raises(ArgumentError, match="'--regexp={pattern}' instead of '--regexp', '{pattern}'"):
        build_argv(long, {"pattern": "-v"})
    operand = tool(["ls", "{path}"], 'args.path = { type = "string" }')
    with pytest.raises(ArgumentError, match="put \"--\" before '{path}' if it is an operand"):
        build_argv(operand, {"path": "-R"})
    flag = tool(["git", "diff", "--stat", "{from}..{to}"], 'args.from = { type = "string" }\nargs.to = { type = "string" }')
    with pytest.raises(ArgumentError) as refused:         # --stat takes no value here: "--" comes first
        build_argv(flag, {"from": "-1", "to": "HEAD"})
    advice = str(refused.value).split("option; ", 1)[1]
    assert advice.startswith("the tools file can put \"--\" before '{from}..{to}' if it is an operand; if it is "
                             "the value of '--stat', attach it")
    attached = tool(["rg", "-e{pattern}", "--regexp={pattern}"], 'args.pattern = { type = "string" }')
    assert build_argv(attached, {"pattern": "-> None"}) == ["rg", "-e-> None", "--regexp=-> None"]


def test_a_group_is_dropped_whole_when_its_argument_is_absent() -> None:
    pytest_k = tool(["pytest", ["-k", "{k}"], "{path}"],
                    'args.k = { type = "string", optional = true }\nargs.path = { type = "string", default = "tests" }')
    assert build_argv(pytest_k, {"path": "tests"}) == ["pytest", "tests"]
    assert build_argv(pytest_k, {"k": "slow", "path": "t"}) == ["pytest", "-k", "slow", "t"]
    with pytest.raises(ArgumentError, match="'-k{k}' instead of '-k', '{k}'"):
        build_argv(pytest_k, {"k": "-x", "path": "t"})         # a group keeps the first-character rule
    since = tool(["git", "log", ["--since", "{since}", "--until={until}"], ["-n", "{n}"]],
                 'args.since = { type = "string", optional = true }\nargs.until = { type = "string", optional = true }\n'
                 'args.n = { type = "integer", optional = true }')
    assert build_argv(since, {"since": "monday", "n": 3}) == ["git", "log", "-n", "3"]   # every name must be present
    assert build_argv(since, {"since": "monday", "until": "friday"}) == ["git", "log", "--since", "monday", "--until=friday"]
    repeated = tool(["grep", ["-e", "{patterns}"], "--", "{file}"],
                    'args.patterns = { type = "array", items = { type = "string" } }\nargs.file = { type = "string" }')
    assert build_argv(repeated, {"patterns": ["a", "b"], "file": "f"}) == ["grep", "-e", "a", "-e", "b", "--", "f"]
    assert build_argv(repeated, {"patterns": [], "file": "f"}) == ["grep", "--", "f"]


@pytest.mark.parametrize(("command", "message"), [
    (["pytest", ["-q"], "{k}"], r"command\[1\] is a group with no placeholder"),
    (["pytest", []], r"command\[1\] is a group with no placeholder"),
    (["pytest", ["-k", ["{k}"]]], r"command\[1\]\[1\] must be a string; groups do not nest"),
    (["pytest", ["-k", 3]], r"command\[1\]\[1\] must be a string"),
    ([["pytest"], "{k}"], r"command\[0\] must be a string"),
    (["ls", ["{v}"]], r"command\[1\] holds flag argument '\{v\}'"),
    (["ls", ["{a}", "{b}"]], r"command\[1\] names two arrays"),
    (["ls", ["-k", "{nope}"]], r"placeholder '\{nope\}' names no argument"),
])
def test_bad_groups_are_located_errors(command: list[Any], message: str) -> None:
    args = ('args.k = { type = "string", optional = true }\nargs.v = { type = "boolean", flag = "-v", default = false }\n'
            'args.a = { type = "array", items = { type = "string" }, optional = true }\n'
            'args.b = { type = "array", items = { type = "string" }, optional = true }')
    with pytest.raises(config.ConfigError) as error:
        tool(command, args)
    assert any(p.line == 2 and p.col == 1 and re.search(message, p.message) for p in error.value.problems), error.value


# --- property: random templates, values that start with "-" or are empty -------------------------------

SCALARS = ("s0", "s1", "n")
ARGS = ('args.s0 = { type = "string", optional = true }\n'
        'args.s1 = { type = "string", optional = true }\n'
        'args.n = { type = "integer", optional = true }\n'
        'args.arr = { type = "array", items = { type = "string" }, optional = true }\n'
        'args.f = { type = "boolean", flag = "-v", optional = true }\n')
Piece = tuple[str, str | None]               # (literal text, None) or ("", argument name)

literals = st.sampled_from(["x", "-", "--", "..HEAD", "=", "-o", "a b"])
dashed = st.sampled_from(["-", "-rf", "--output=F", "--"])
strings = dashed | dashed | st.sampled_from(["", "", "x", "a b"]) | st.text(st.characters(exclude_characters="\x00"), max_size=4)
values = st.fixed_dictionaries({"s0": strings, "s1": strings, "n": st.integers(-3, 3),
                                "arr": st.lists(strings, max_size=3), "f": st.booleans()})
# Most arguments present, a few absent (their elements drop).
arguments = st.tuples(values, st.sets(st.sampled_from((*SCALARS, "arr", "f")), max_size=2)).map(
    lambda drawn: {name: value for name, value in drawn[0].items() if name not in drawn[1]})
piece_lists = st.lists(st.sampled_from((*SCALARS, "arr")).map(lambda name: ("", name)) | literals.map(lambda text: (text, None)),
                      min_size=1, max_size=4)


@st.composite
def simple(draw: Any, flag: bool = True) -> list[Piece]:
    kind = draw(st.sampled_from(["pieces"] * 6 + ["flag"] * flag + ["separator"]))
    if kind != "pieces":
        return [("", "f")] if kind == "flag" else [("--", None)]
    drawn: list[Piece] = draw(piece_lists)
    arrays = [i for i, (_, name) in enumerate(drawn) if name == "arr"]
    return drawn if len(arrays) < 2 else [piece for i, piece in enumerate(drawn) if i not in arrays[1:]]


def named(pieces: list[Piece]) -> set[str]:
    return {name for _, name in pieces if name is not None}


# A group: 1-3 elements with no flag argument and at least one placeholder (what config accepts).
groups = st.lists(simple(flag=False), min_size=1, max_size=3).filter(lambda g: any(map(named, g))).map(tuple)
element = st.one_of(simple(), simple(), simple(), groups)
Part = list[Piece] | tuple[list[Piece], ...]


def template_text(pieces: list[Piece]) -> str:
    return "".join(text if name is None else "{" + name + "}" for text, name in pieces)


def template(part: Part) -> str | list[str]:
    return template_text(part) if isinstance(part, list) else [template_text(p) for p in part]


@cache
def cached_tool(command: str) -> config.Tool:
    return tool(orjson.loads(command), ARGS)


def expected(parts: list[Part], args: dict[str, Any]) -> tuple[list[str], bool]:
    """The oracle: the argv, and whether some value would lead an element with '-' before a literal '--'."""
    argv, refused, separated = ["prog"], False, False

    def emit(pieces: list[Piece], args: dict[str, Any]) -> None:
        nonlocal refused, separated
        names = named(pieces)
        if not names and "".join(text for text, _ in pieces) == "--":   # "--" however the template spells it
            separated = True
        if any(name not in args for name in names):
            return
        if names == {"f"}:
            argv.extend(["-v"] if args["f"] else [])
            return
        for item in args["arr"] if "arr" in names and isinstance(args["arr"], list) else [None]:
            texts = [(text, False) if name is None else (str(item if item is not None and name == "arr" else args[name]), True)
                     for text, name in pieces]
            lead = next(((text, from_value) for text, from_value in texts if text), ("", False))
            refused = refused or (lead[1] and lead[0].startswith("-") and not separated)
            argv.append("".join(text for text, _ in texts))

    for part in parts:
        if isinstance(part, list):
            emit(part, args)
            continue
        names = set().union(*map(named, part))
        if any(name not in args for name in names):
            continue                                   # a group goes whole, its literals too
        for item in args["arr"] if "arr" in names else [None]:
            for pieces in part:
                emit(pieces, {**args, "arr": item} if "arr" in names else args)
    return argv, refused


@settings(max_examples=200, deadline=None)
@given(st.lists(element, min_size=1, max_size=6), arguments)
def test_no_value_ever_leads_an_element_with_a_dash(parts: list[Part], args: dict[str, Any]) -> None:
    want, must_refuse = expected(parts, args)
    try:
        argv = build_argv(cached_tool(orjson.dumps(["prog", *map(template, parts)]).decode()), args)
    except ArgumentError:
        assert must_refuse, "refused although no value would lead an element with '-'"
        return
    assert not must_refuse, f"a value leads an element with '-' before any literal '--': {want}"
    assert argv == want                       # every value inside exactly one element, never split or re-parsed


def test_the_environment_is_filtered_per_base_and_every_call_gets_its_own_copy() -> None:
    """The inherited part is filtered once per base mapping (the runner passes the same one to every
    call); a call's environment is still its own, and another base is filtered afresh."""
    inheriting = tool(["env"], "")
    shell = config.loads(b'[tools.s]\nshell = "env"\nargs.v = { type = "string", optional = true }\n',
                         Path("/tmp/templating.toml")).tool("s")
    assert shell is not None
    base = {"PATH": "/bin", "HOME": "/h", "MCPWRAP_SECRET": "x"}
    first = build_env(inheriting, {}, base)
    assert first == {"PATH": "/bin", "HOME": "/h"}
    first["HOME"] = "changed"
    assert build_env(inheriting, {}, base) == {"PATH": "/bin", "HOME": "/h"}
    assert build_env(shell, {"v": "1"}, base)["MCP_ARG_V"] == "1"
    assert "MCP_ARG_V" not in build_env(shell, {}, {**base, "MCP_ARG_V": "inherited"})
    assert build_env(inheriting, {}, {"PATH": "/usr/bin"}) == {"PATH": "/usr/bin"}
    assert build_env(inheriting, {}, base) == {"PATH": "/bin", "HOME": "/h"}
    assert build_env(inheriting, {}, {}) == {}
