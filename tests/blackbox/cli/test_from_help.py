"""`mcpwrap init --from-help`: a draft is safe by default and checks.

The help texts are fixtures captured from real programs (tests/fixtures/help/), printed by a stand-in
program, so the drafts do not depend on what is installed here: options that run a program or write
a file are left out (and said so), changing subcommands ask first, read-only ones say so, and
descriptions are the whole text of a help entry."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.harness import mcpwrap_cmd

HELP = Path(__file__).parents[2] / "fixtures" / "help"


def mcpwrap(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpwrap_cmd(*args), capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def stand_in(tmp_path: Path, name: str) -> Path:
    """A program called `name` whose --help prints the captured help text of the real one."""
    program = tmp_path / "bin" / name
    program.parent.mkdir(exist_ok=True)
    program.write_text(f"#!/bin/sh\ncat {shlex.quote(str(HELP / (name + '.txt')))}\n")
    program.chmod(0o755)
    return program


def drafted(tmp_path: Path, program: str, env: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """The draft's text and its tools, after `init --from-help` wrote it and `check` passed it."""
    draft = tmp_path / "draft.toml"
    done = mcpwrap("init", "--from-help", program, str(draft), env=env)
    assert done.returncode == 0 and "(check: ok)" in done.stdout, done.stderr
    checked = mcpwrap("check", str(draft), env={"MCPWRAP_STATE_DIR": str(tmp_path / "state")})
    assert checked.returncode == 0 and checked.stdout.startswith(f"{draft}: ok"), checked.stderr
    text = draft.read_text()
    return text, tomllib.loads(text)["tools"]


def test_tar_draft_leaves_out_every_option_that_runs_a_program_or_writes_a_file(tmp_path: Path) -> None:
    text, tools = drafted(tmp_path, str(stand_in(tmp_path, "tar")))
    args = tools["tar"]["args"]
    dangerous = {"--to-command": "run", "--rsh-command": "run", "--rmt-command": "run",
                 "--checkpoint-action": "run", "--use-compress-program": "run", "--info-script": "run",
                 "--new-volume-script": "run", "--index-file": "write", "--volno-file": "write"}
    for option, why in dangerous.items():
        assert option[2:].replace("-", "_") not in args, option
        assert option not in " ".join(tools["tar"]["command"]), option
        said = [line for line in text.splitlines() if line.startswith("#") and option + "=" in line]
        assert said and why in said[0], (option, said)        # listed in a comment, with why
    assert {"create", "extract", "directory", "exclude", "file"} <= set(args)


def test_tar_draft_descriptions_are_whole_sentences(tmp_path: Path) -> None:
    _, tools = drafted(tmp_path, str(stand_in(tmp_path, "tar")))
    tar = tools["tar"]
    assert tar["description"] == ("GNU 'tar' saves many files together into a single tape or disk archive, "
                                  "and can restore individual files from the archive.")
    args = tar["args"]
    assert args["exclude_caches"]["description"] == ("Exclude contents of directories containing CACHEDIR.TAG, "
                                                     "except for the tag file itself.")
    assert args["null"]["description"] == "-T reads null-terminated names; implies --verbatim-files-from."
    assert args["keep_old_files"]["description"] == ("Don't replace existing files when extracting, "
                                                     "treat them as errors.")


def test_tar_draft_asks_first_because_its_flags_delete_and_overwrite(tmp_path: Path) -> None:
    _, tools = drafted(tmp_path, str(stand_in(tmp_path, "tar")))
    tar = tools["tar"]
    assert "overwrite" in tar["args"] and "remove_files" in tar["args"]
    assert tar.get("confirm") and tar.get("annotations", {}).get("destructiveHint") is True


GIT_DESTRUCTIVE = {"rm", "clone", "push", "reset", "restore", "rebase", "mv"}
GIT_READ_ONLY = {"status", "log", "show", "diff", "grep"}


def test_git_draft_confirms_what_changes_and_marks_what_only_reads(tmp_path: Path) -> None:
    _, tools = drafted(tmp_path, str(stand_in(tmp_path, "git")))
    for sub in GIT_DESTRUCTIVE:
        tool = tools[f"git_{sub}"]
        assert "{operands}" in tool["confirm"] and tool["annotations"] == {"destructiveHint": True}, sub
    for sub in GIT_READ_ONLY:
        tool = tools[f"git_{sub}"]
        assert "confirm" not in tool and tool["annotations"] == {"readOnlyHint": True}, sub
    assert tools["git_clone"]["description"] == "Clone a repository into a new directory."


def test_a_multi_word_program_pip_drafts_through_python(tmp_path: Path) -> None:
    package = tmp_path / "fakepip"
    package.mkdir()
    (package / "__main__.py").write_text(f"print(open({str(HELP / 'pip.txt')!r}).read(), end='')\n")
    program = f"{shlex.quote(sys.executable)} -m fakepip"
    text, tools = drafted(tmp_path, program, env={"PYTHONPATH": str(tmp_path)})
    assert tomllib.loads(text)["server"]["name"] == "fakepip"
    assert tools["fakepip_install"]["command"] == [sys.executable, "-m", "fakepip", "install", "{operands}"]
    for sub in ("install", "uninstall"):
        assert tools[f"fakepip_{sub}"]["annotations"] == {"destructiveHint": True}
        assert tools[f"fakepip_{sub}"]["confirm"]
    for sub in ("list", "show", "freeze", "check"):
        assert tools[f"fakepip_{sub}"]["annotations"] == {"readOnlyHint": True}, sub


@pytest.mark.parametrize("program", ["tar", "git"])
def test_every_drafted_tool_is_either_confirmed_read_only_or_neither_but_never_both(tmp_path: Path,
                                                                                    program: str) -> None:
    _, tools = drafted(tmp_path, str(stand_in(tmp_path, program)))
    for name, tool in tools.items():
        hints = tool.get("annotations", {})
        assert not (hints.get("readOnlyHint") and ("confirm" in tool or hints.get("destructiveHint"))), name
        assert ("confirm" in tool) == bool(hints.get("destructiveHint")), name
