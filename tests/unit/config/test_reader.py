"""config/reader: the value forms a tools file writes as strings (durations, sizes) and problems placed
at the line and column of the key they are about."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwrap.config import load as config


def test_inline_table_keys_are_located(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[tools.x]\ncommand = ["x", "{a}"]\nargs.a = { type = "string", maxLength = -1 }\n')
    with pytest.raises(config.ConfigError) as caught:
        config.load(path)
    problem = caught.value.problems[0]
    assert (problem.line, problem.col) == (3, 29)



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

