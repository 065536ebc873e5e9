"""The tools-file loader: located errors, defaults, and the inputSchema it builds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcpwrap.config import load as config
from tests.unit.config.test_load import BROKEN


def test_check_command_exit_codes(tmp_path: Path) -> None:
    bad = subprocess.run([sys.executable, "-m", "mcpwrap", "check", str(BROKEN / "misspelt_key.toml")],
                         check=False, capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0
    assert f"{BROKEN / 'misspelt_key.toml'}:2:1: unknown key" in bad.stderr
    good = tmp_path / "ok.toml"
    good.write_text('[tools.echo]\ncommand = ["echo"]\n')
    ok = subprocess.run([sys.executable, "-m", "mcpwrap", "check", str(good)], check=False, capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stderr


def test_a_file_nested_past_the_parsers_recursion_is_a_located_problem(tmp_path: Path) -> None:
    """tomllib recurses per level: 100,000 nested arrays raised RecursionError through `check` and
    `serve` as a traceback; it is a problem of the file like any other (exit 3, FILE:1:1)."""
    deep = tmp_path / "deep.toml"
    deep.write_text("y = " + "[" * 100_000 + "1" + "]" * 100_000 + "\n")
    with pytest.raises(config.ConfigError) as caught:
        config.load(deep)
    assert str(caught.value.problems[0]).startswith(f"{deep}:1:1: nested too deeply")
    run = subprocess.run([sys.executable, "-m", "mcpwrap", "check", str(deep)], check=False,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 3 and "Traceback" not in run.stderr and "nested too deeply" in run.stderr, run.stderr
