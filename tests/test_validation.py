"""Path arguments, attacked at the unit level: every item of an array is confined, odd values
(NUL, empty, '..' chains, symlink loops) are refused with a reason, and a root of '/' admits
everything without a string-prefix slip (the check is by path components, not characters)."""

from __future__ import annotations

import os
from pathlib import Path

from mcpwrap import config
from mcpwrap.validation import resolve_paths


def _tool(tmp_path: Path, arg: str) -> config.Tool:
    (tmp_path / "t.toml").write_text(f'[tools.t]\ncommand = ["cat", "--", "{{p}}"]\nargs.p = {arg}\n')
    tool = config.load(tmp_path / "t.toml").tool("t")
    assert tool is not None
    return tool


def test_every_item_of_an_array_is_confined(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    tool = _tool(tmp_path, '{ type = "array", items = { type = "string" }, within = ["{cwd}/data"] }')
    resolved, problems = resolve_paths(tool, {"p": ["data/a", "data/../data/b"]})
    assert not problems and resolved["p"] == [str(tmp_path / "data" / "a"), str(tmp_path / "data" / "b")]
    _, problems = resolve_paths(tool, {"p": ["data/a", "data/../../escape"]})
    assert len(problems) == 1 and "outside the allowed root" in problems[0]


def test_a_sibling_that_shares_the_roots_prefix_is_outside(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data-secrets").mkdir()
    tool = _tool(tmp_path, '{ type = "string", within = ["{cwd}/data"] }')
    _, problems = resolve_paths(tool, {"p": str(tmp_path / "data-secrets" / "key")})
    assert problems and "outside" in problems[0]


def test_odd_values_are_refused_with_a_reason(tmp_path: Path) -> None:
    tool = _tool(tmp_path, '{ type = "string", within = ["{cwd}"] }')
    for value in ["", "a\x00b", "../" * 40 + "etc/passwd"]:
        _, problems = resolve_paths(tool, {"p": value})
        assert problems, value
    loop = tmp_path / "loop"
    os.symlink(loop, loop)                                  # resolves to itself: inside, never an escape
    resolved, problems = resolve_paths(tool, {"p": str(loop / "x")})
    assert not problems and resolved["p"] == str(loop / "x")


def test_a_root_of_slash_admits_every_absolute_path(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    tool = _tool(tmp_path, '{ type = "string", within = ["/"], must_exist = true }')
    resolved, problems = resolve_paths(tool, {"p": str(tmp_path / "sub" / ".." / "f")})
    assert not problems and resolved["p"] == str(tmp_path / "f")
