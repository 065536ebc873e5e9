"""What `mcpwrap check` (and `serve` at start) say about a tools file and the machine it is served on:
each problem at its FILE:LINE:COL, each sentence once, the fix named (issue 28, items 1, 4, 9, 14)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcpwrap.run import landlock


def mcpwrap(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`python -m mcpwrap ...` in `cwd`, plain output, this environment plus `env`."""
    return subprocess.run([sys.executable, "-m", "mcpwrap", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd, input=stdin, env={**os.environ, "NO_COLOR": "1", "TERM": "dumb", **(env or {})})


# --- item 4: a cwd that is not a directory -----------------------------------------------------
CWD_FILE = """\
[server]
cwd = "gone"

[tools.inherits]
command = ["true"]

[tools.also_inherits]
command = ["true"]

[tools.own]
command = ["true"]
cwd = "afile"
"""


def test_check_locates_a_cwd_that_is_no_directory_once_per_key(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text(CWD_FILE)
    (tmp_path / "afile").write_text("")
    done = mcpwrap("check", "t.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr          # a warning: the directory may be made on the serving machine
    lines = done.stderr.splitlines()
    assert [line for line in lines if "gone" in line] == [
        f"t.toml:2:1: warning: cwd {tmp_path / 'gone'} does not exist, so tool(s) 'inherits', 'also_inherits' "
        "cannot start: create it, or change 'cwd'"]
    assert [line for line in lines if "afile" in line] == [
        f"t.toml:12:1: warning: cwd {tmp_path / 'afile'} is not a directory, so tool(s) 'own' "
        "cannot start: create it, or change 'cwd'"]
    assert mcpwrap("check", "--strict", "t.toml", cwd=tmp_path).returncode == 3


def test_a_call_in_a_missing_cwd_names_the_directory_not_the_program(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[tools.l]\ncommand = ["ls"]\ncwd = "gone"\n')
    done = mcpwrap("call", "t.toml", "l", cwd=tmp_path)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert f"its cwd {tmp_path / 'gone'} does not exist" in said, said
    assert "cannot start 'ls': No such file or directory" not in said


# --- item 9: check says each thing once, located ------------------------------------------------
def test_check_says_the_sandbox_once_then_one_line_per_tool(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[tools.a]\ncommand = ["true"]\nsandbox = { network = false }\n\n'
                                     '[tools.b]\ncommand = ["true"]\nsandbox = { read = ["/etc"], write = ["{cwd}"] }\n')
    done = mcpwrap("check", "t.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert sum("signals and abstract unix sockets" in line or "not restricted by Landlock" in line
               for line in out) <= 3           # the shared block, once
    assert sum(line.startswith("a:") for line in out) == 1 and sum(line.startswith("b:") for line in out) == 1
    assert f"a: sandbox: read {tmp_path} and the system paths; write a private TMPDIR; network denied" in out
    assert f"b: sandbox: read /etc and the system paths; write {tmp_path} and a private TMPDIR; network denied" in out


def test_the_missing_program_warning_is_located(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[tools.a]\ncommand = ["true"]\n\n[tools.b]\ncommand = ["no-such-program-28"]\n')
    done = mcpwrap("check", "t.toml", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stderr.startswith("t.toml:5:1: warning: tool 'b': program 'no-such-program-28' is not on PATH"), done.stderr


def test_serve_names_each_program_missing_from_its_path_at_start_on_stderr(tmp_path: Path) -> None:
    """The Claude Desktop case: the host starts `serve` with a minimal PATH."""
    (tmp_path / "t.toml").write_text('[tools.a]\ncommand = ["true"]\n\n[tools.b]\ncommand = ["no-such-program-28"]\n\n'
                                     '[tools.c]\ncommand = ["no-such-program-28", "x"]\n')
    done = mcpwrap("serve", "t.toml", cwd=tmp_path, env={"PATH": "/usr/bin:/bin",
                                                         "MCPWRAP_STATE_DIR": str(tmp_path / "state")})
    assert done.stdout == ""                          # never on stdout: it is the protocol's
    warned = [line for line in done.stderr.splitlines() if "no-such-program-28" in line]
    assert [line.split(": warning: ")[0] for line in warned] == ["t.toml:5:1", "t.toml:8:1"], done.stderr
    assert "is not on PATH (/usr/bin:/bin)" in warned[0]


def test_a_misspelt_command_gets_a_did_you_mean(tmp_path: Path) -> None:
    done = mcpwrap("chek", "t.toml", cwd=tmp_path)
    assert done.returncode == 2
    assert "No such command 'chek'. Did you mean 'check'?" in done.stderr
    assert "Did you mean 'list'?" in mcpwrap("tasks", "lsit", cwd=tmp_path).stderr


def test_argument_values_are_never_expanded(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[tools.t]\nshell = \'printf "%s|%s" "$MCP_ARG_V" "$GREETING"\'\n'
                                     'args.v = { type = "string" }\nenv = { GREETING = "hi ${MCPWRAP_T28}" }\n')
    done = mcpwrap("call", "t.toml", "t", "--arg", "v=${HOME} ${MCPWRAP_T28}", cwd=tmp_path,
                   env={"MCPWRAP_T28": "there", "MCPWRAP_STATE_DIR": str(tmp_path / "state")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "${HOME} ${MCPWRAP_T28}|hi there"


# --- item 1: a sandboxed program must be readable under its grants -------------------------------
def _prefixes_outside_system(program: Path) -> list[str]:
    """The install prefixes of the program as named and as resolved, where the system grants miss them."""
    from mcpwrap.config.tools import SYSTEM_READ

    found = [str(p.parent.parent) for p in (program, program.resolve()) if p.parent.name == "bin"]
    return [p for p in dict.fromkeys(found)
            if not any(p == root or p.startswith(root + "/") for root in SYSTEM_READ)]


VENV_PYTHON = Path(sys.prefix) / "bin" / "python"   # the suite runs in a venv (often on a pyenv interpreter)


@pytest.mark.skipif(not _prefixes_outside_system(VENV_PYTHON), reason="this interpreter lives under /usr")
def test_check_names_the_read_grant_a_sandboxed_venv_interpreter_needs(tmp_path: Path) -> None:
    prefixes = _prefixes_outside_system(VENV_PYTHON)
    (tmp_path / "t.toml").write_text(f'[tools.py]\ncommand = ["{VENV_PYTHON}", "-c", "print(7)"]\n'
                                     'sandbox = { network = false }\n')
    done = mcpwrap("check", "t.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    print(done.stderr)
    fix = "sandbox.read = " + "[" + ", ".join(f'"{p}"' for p in ["{cwd}", *prefixes]) + "]"
    warned = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1 and warned[0].startswith("t.toml:3:1: warning: tool 'py': "), done.stderr
    assert "which its sandbox does not grant" in warned[0] and fix in warned[0], warned[0]
    if landlock.abi() >= 1:                           # the warning is true: the call fails, the fix makes it run
        failed = mcpwrap("call", "t.toml", "py", cwd=tmp_path, env={"MCPWRAP_STATE_DIR": str(tmp_path / "s")})
        assert failed.returncode != 0 and "7" not in failed.stdout
    text = (tmp_path / "t.toml").read_text().replace("sandbox = { network = false }",
                                                     fix.replace("sandbox.read = ", "sandbox = { network = false, read = ") + " }")
    (tmp_path / "t.toml").write_text(text)
    done = mcpwrap("check", "t.toml", cwd=tmp_path)
    assert "warning" not in done.stderr, done.stderr
    if landlock.abi() >= 1:
        ran = mcpwrap("call", "t.toml", "py", cwd=tmp_path, env={"MCPWRAP_STATE_DIR": str(tmp_path / "s")})
        assert ran.returncode == 0 and ran.stdout.strip() == "7", ran.stderr


@pytest.mark.skipif(not _prefixes_outside_system(VENV_PYTHON), reason="this interpreter lives under /usr")
def test_check_follows_a_scripts_interpreter_line_on_the_path_in_force(tmp_path: Path) -> None:
    """`#!/usr/bin/env python3` finds python3 on the tool's PATH: the venv's, outside the grants."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hello").write_text("#!/usr/bin/env python\nprint('hello')\n")
    (bin_dir / "hello").chmod(0o755)
    (tmp_path / "t.toml").write_text(f'[tools.h]\ncommand = ["hello"]\nsandbox = {{ read = ["{bin_dir}"] }}\n'
                                     f'env = {{ PATH = "{bin_dir}:{VENV_PYTHON.parent}:/usr/bin:/bin" }}\n')
    done = mcpwrap("check", "t.toml", cwd=tmp_path)
    warned = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1 and "its interpreter python" in warned[0], done.stderr
    assert _prefixes_outside_system(VENV_PYTHON)[0] in warned[0]
