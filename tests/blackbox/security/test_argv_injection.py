"""Argv templating: a value never becomes an option, wherever its placeholder sits.

The rule under test is about what reaches the command: an argv element (after
the program) whose first character comes from an argument value and is "-" is
refused unless a literal "--" element came earlier in the template. The
property test builds random templates with `config.loads` and checks
`build_argv` against an oracle that knows where every character came from.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio

from mcpwrap.protocol.argv import ArgumentError
from mcpwrap.run import process as runner
from tests.unit.protocol.test_argv import tool


def test_git_log_cannot_be_made_to_write_a_file(tmp_path: Path) -> None:
    """The issue's attack end to end: `git log {rev}..HEAD` with rev = --output=FILE wrote FILE..HEAD."""
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    git_log = tool(["git", "log", "{rev}..HEAD"], f'cwd = "{tmp_path}"\nargs.rev = {{ type = "string" }}')
    with pytest.raises(ArgumentError, match="argument 'rev'"):
        trio.run(runner.run, git_log, {"rev": f"--output={tmp_path / 'pwned'}"})
    assert not list(tmp_path.glob("pwned*"))


# --- property: random templates, values that start with "-" or are empty -------------------------------
