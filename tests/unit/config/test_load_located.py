"""What `mcpwrap check` (and `serve` at start) say about a tools file and the machine it is served on:
each problem at its FILE:LINE:COL, each sentence once, the fix named (issue 28, items 1, 4, 9, 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwrap.config import load as config


def problems_of(path: Path) -> list[str]:
    with pytest.raises(config.ConfigError) as caught:
        config.load(path)
    return [str(p) for p in caught.value.problems]


def test_an_unknown_top_level_table_is_located_at_its_header(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[tools.a]\ncommand = ["true"]\n\n[tool.b]\ncommand = ["true"]\n')
    assert problems_of(tmp_path / "t.toml") == [f"{tmp_path / 't.toml'}:4:1: unknown key 'tool' (did you mean 'tools'?)"]


JSON_TYPES = "array, boolean, integer, null, number, object, string"


@pytest.mark.parametrize("snippet, words", [
    ('args.n = { type = "int" }', f"'int' is not one of {JSON_TYPES}"),
    ('args.n = { type = "array", items = { type = "str" } }', f"'str' is not one of {JSON_TYPES}"),
    ('args.n = { type = ["string", "nul"] }', f"'nul' is not one of {JSON_TYPES}"),
    ('args.n = { type = "object", properties = { a = { type = "bool" } } }', f"'bool' is not one of {JSON_TYPES}"),
    ('task = "sometimes"', "task 'sometimes' must be one of: never, optional, always"),
    ('output = "yaml"', "output 'yaml' must be \"text\", \"json\", \"mcp\""),
])
def test_a_key_with_choices_names_them(tmp_path: Path, snippet: str, words: str) -> None:
    (tmp_path / "t.toml").write_text(f'[tools.t]\ncommand = ["true"]\n{snippet}\n')
    found = problems_of(tmp_path / "t.toml")
    assert len(found) == 1 and words in found[0] and ":3:" in found[0], found
    assert "is not valid under any of the given schemas" not in found[0]


# --- item 14: ${VAR} in env values and cwd ------------------------------------------------------
def test_env_values_and_cwd_expand_the_servers_variables_once_at_load(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPWRAP_T28", "value")
    monkeypatch.setenv("MCPWRAP_T28_DIR", str(tmp_path))
    monkeypatch.delenv("MCPWRAP_T28_UNSET", raising=False)
    (tmp_path / "t.toml").write_text(
        '[server]\nenv = { A = "${MCPWRAP_T28}/x", B = "${MCPWRAP_T28_UNSET:-fallback}", C = "$$HOME costs $$5",'
        ' D = "a $ b" }\n\n[tools.t]\ncommand = ["true"]\ncwd = "${MCPWRAP_T28_DIR}/sub"\n')
    tool = config.load(tmp_path / "t.toml").tools[0]
    assert dict(tool.env) == {"A": "value/x", "B": "fallback", "C": "$HOME costs $5", "D": "a $ b"}
    assert tool.cwd == tmp_path / "sub"


@pytest.mark.parametrize("value, words", [
    ('"${MCPWRAP_T28_UNSET}"', "env value 'A': ${MCPWRAP_T28_UNSET} is not set in the server's environment "
                               "(give a default: ${MCPWRAP_T28_UNSET:-...}; write $$ for a literal $)"),
    ('"${MCPWRAP T28}"', "env value 'A': '${MCPWRAP T28}' is not ${NAME} or ${NAME:-default} (write $$ for a literal $)"),
    ('"${MCPWRAP_T28"', "env value 'A': '${MCPWRAP_T28' is not ${NAME} or ${NAME:-default} (write $$ for a literal $)"),
])
def test_a_variable_that_cannot_be_expanded_is_a_located_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              value: str, words: str) -> None:
    monkeypatch.delenv("MCPWRAP_T28_UNSET", raising=False)
    (tmp_path / "t.toml").write_text(f'[tools.t]\ncommand = ["true"]\nenv.A = {value}\n')
    assert problems_of(tmp_path / "t.toml") == [f"{tmp_path / 't.toml'}:3:1: {words}"]
