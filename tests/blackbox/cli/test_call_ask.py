"""`mcpwrap call` answers a running command's questions: on the terminal, from `--answer` in turn, yes
to a yes/no one with `--yes`; with none of those, the rule's default, else exit 1 quoting the question
(tests/fixtures/ask.toml: each command writes the line it received to a file)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.blackbox.cli.test_more import run
from tests.harness import HANG_S, mcpwrap_cmd

FIXTURE = str(Path(__file__).parents[2] / "fixtures" / "ask.toml")


@pytest.mark.parametrize(("tool", "flags", "received"), [
    ("apply", ["--answer", "yes"], b"yes\n"), ("apply", ["--answer", "no"], b"no\n"), ("apply", ["--yes"], b"yes\n"),
    ("upgrade", [], b"n\n"), ("migrate", ["--answer", "prod", "--answer", "v2"], b"prod\nv2\n")])
def test_answers_from_the_command_line(tmp_path: Path, tool: str, flags: list[str], received: bytes) -> None:
    out = tmp_path / "received"
    done = run("call", FIXTURE, tool, "--arg", f"out={out}", *flags, stdin="")
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == received and done.stdout.endswith("done\n")


def test_without_an_answer_the_call_ends_quoting_the_question(tmp_path: Path) -> None:
    done = run("call", FIXTURE, "apply", "--arg", f"out={tmp_path / 'received'}", stdin="")
    assert done.returncode == 1
    assert "the command asked 'Enter a value:' (Terraform asks: apply this plan?) and nobody could be asked" in done.stdout


def test_an_answer_with_an_escape_sequence_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "received"
    done = run("call", FIXTURE, "migrate", "--arg", f"out={out}", "--answer", "dev", "--answer", "v\x1b[2J", stdin="")
    assert done.returncode == 1 and out.read_bytes() == b"dev\n"
    assert "holds a newline or another control character; nothing was written" in done.stdout


def test_the_question_is_asked_on_the_terminal(tmp_path: Path) -> None:
    out = tmp_path / "received"
    primary, secondary = os.openpty()
    try:
        os.write(primary, b"maybe\ny\n")              # waits in the terminal until the question reads it
        done = subprocess.run(mcpwrap_cmd("call", FIXTURE, "apply", "--arg", f"out={out}"), stdin=secondary,
                              capture_output=True, text=True, timeout=HANG_S)
    finally:
        os.close(primary)
        os.close(secondary)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == b"yes\n"
    assert "Terraform asks: apply this plan?\n\nPlan: 1 to add" in done.stderr and "try again" in done.stderr
