"""The tools-file loader: located errors, defaults, and the inputSchema it builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwrap.config import load as config

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
    "task_asks_without_task.toml": (3, 1, "task_asks needs task"),
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
