"""config/machine: what a tools file asks of this machine (each cwd a directory, each program found on
the PATH its command runs with), said as warnings at the key to change; it looks, it runs nothing."""

from __future__ import annotations

import os
from pathlib import Path

from mcpwrap.config import load as config
from mcpwrap.config.machine import machine_problems


def test_a_missing_cwd_and_a_program_off_path_are_warnings_at_their_keys(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    program = tmp_path / "bin" / "here"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o700)
    (tmp_path / "t.toml").write_text(f"""
[tools.found]
command = ["here"]
env = {{ PATH = "{tmp_path / 'bin'}" }}
[tools.lost]
command = ["no-such-program-t"]
[tools.nowhere]
command = ["true"]
cwd = "{tmp_path / 'gone'}"
[tools.relative]
command = ["./missing.sh"]
""")
    problems = machine_problems(config.load(tmp_path / "t.toml"), {"PATH": "/nonexistent"})
    said = {(p.line, p.message.split(":")[0]) for p in problems}
    assert (6, "tool 'lost'") in said and (11, "tool 'relative'") in said
    assert any(p.line == 9 and f"cwd {tmp_path / 'gone'} " in p.message and "'nowhere'" in p.message for p in problems)
    assert not any("'found'" in p.message for p in problems)
    assert "is not on PATH (/nonexistent)" in next(p.message for p in problems if "'lost'" in p.message)
    assert "not an executable file" in next(p.message for p in problems if "'relative'" in p.message)


def test_a_machine_that_has_it_all_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[tools.t]\ncommand = ["sh", "-c", "true"]\n')
    assert machine_problems(config.load(tmp_path / "t.toml"), {"PATH": os.defpath}) == []
