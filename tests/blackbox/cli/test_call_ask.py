"""`mcpwrap call` answers a running command's questions: on the terminal, from `--answer` in turn, yes
to a yes/no one with `--yes`; with none of those, the rule's default, else exit 1 quoting the question
(tests/fixtures/ask.toml: each command writes the line it received to a file)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.blackbox.cli.test_more import run
from tests.harness import HANG_S, mcpwrap_cmd, until

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


def on_a_terminal(args: list[str], typed: bytes) -> subprocess.CompletedProcess[str]:
    """`mcpwrap ARGS` with a terminal for stdin, `typed` waiting in it until the question reads it."""
    primary, secondary = os.openpty()
    try:
        os.write(primary, typed)
        return subprocess.run(mcpwrap_cmd(*args), stdin=secondary, capture_output=True, text=True, timeout=HANG_S)
    finally:
        os.close(primary)
        os.close(secondary)


def test_the_question_is_asked_on_the_terminal(tmp_path: Path) -> None:
    out = tmp_path / "received"
    done = on_a_terminal(["call", FIXTURE, "apply", "--arg", f"out={out}"], b"maybe\ny\n")
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == b"yes\n"
    assert "Terraform asks: apply this plan?\n\nPlan: 1 to add" in done.stderr and "try again" in done.stderr


# --- call --task: the task parks on the question, and call answers it as it answers a running command's ---
def task_fixture(tmp_path: Path) -> tuple[Path, list[str]]:
    """ask.toml's tools, each also runnable as a task, and the flags that keep the task store in tmp_path."""
    tools = tmp_path / "ask.toml"
    text = Path(FIXTURE).read_text()
    tools.write_text(text.replace('args.out = { type = "string" }', 'args.out = { type = "string" }\ntask = "optional"'))
    return tools, ["--state-dir", str(tmp_path / "state"), "--secret-file", str(tmp_path / "secret")]


@pytest.mark.parametrize(("tool", "flags", "received"), [
    ("apply", ["--answer", "yes"], b"yes\n"), ("apply", ["--yes"], b"yes\n"), ("upgrade", [], b"n\n"),
    ("migrate", ["--answer", "prod", "--answer", "v2"], b"prod\nv2\n")])
def test_call_task_answers_from_the_command_line(tmp_path: Path, tool: str, flags: list[str], received: bytes) -> None:
    tools, store = task_fixture(tmp_path)
    out = tmp_path / "received"
    done = run("call", str(tools), tool, "--task", "--arg", f"out={out}", *flags, *store, stdin="")
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == received and done.stdout.endswith("done\n")


def test_call_task_without_an_answer_ends_quoting_the_question(tmp_path: Path) -> None:
    tools, store = task_fixture(tmp_path)
    done = run("call", str(tools), "apply", "--task", "--arg", f"out={tmp_path / 'received'}", *store, stdin="")
    assert done.returncode == 1
    assert "the command asked 'Enter a value:' (Terraform asks: apply this plan?) and the user declined" in done.stdout


def test_call_task_asks_on_the_terminal(tmp_path: Path) -> None:
    tools, store = task_fixture(tmp_path)
    out = tmp_path / "received"
    done = on_a_terminal(["call", str(tools), "apply", "--task", "--arg", f"out={out}", *store], b"maybe\nn\n")
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == b"no\n"
    assert "Terraform asks: apply this plan?\n\nPlan: 1 to add" in done.stderr and "try again" in done.stderr


def test_a_call_task_left_running_parks_and_tasks_answer_answers_it(tmp_path: Path) -> None:
    tools, store = task_fixture(tmp_path)
    out = tmp_path / "received"
    started = run("call", str(tools), "apply", "--task", "--no-wait", "--arg", f"out={out}", *store, stdin="")
    task_id = started.stdout.strip()
    state = store[:2]
    until(lambda: json.loads(run("tasks", "show", str(tools), task_id, "--json", *state).stdout)["status"]
          == "input_required", what="the task to park")
    assert run("tasks", "answer", str(tools), task_id, "--answer", "n", *state).returncode == 0
    done = run("tasks", "result", str(tools), task_id, "--wait", *state)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == b"no\n"
