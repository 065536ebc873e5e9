"""What a task says about itself while it works, and a cancel of what is already cancelled (issue 28, item 12).

A working task's `statusMessage` is its last progress line (the tool's `progress` pattern found it),
not the message it was created with. `mcpwrap tasks cancel` of a cancelled task did what was asked
(exit 0, and it says it already was); of a completed or failed one it exits 1 with the reason.
"""

from __future__ import annotations

from pathlib import Path

from mcpwrap.tasks import store as tasks
from tests.harness import until
from tests.blackbox.cli.test_more import finished_task, run

TOOLS = """
[tools.copy]
shell = 'echo "1/3 copying the first part"; while [ ! -e "$MCP_ARG_GO" ]; do sleep 0.05; done'
task = "optional"
timeout = "5m"
progress = '(\\d+)/(\\d+)'
args.go = { type = "string" }
"""


def test_a_working_task_shows_its_last_progress_line_and_a_second_cancel_says_it_already_was(tmp_path: Path) -> None:
    tools, state, go = tmp_path / "tools.toml", tmp_path / "state", tmp_path / "go"
    tools.write_text(TOOLS)
    where = ("--state-dir", str(state), "--secret-file", str(tmp_path / "secret"))
    started = run("call", str(tools), "copy", "-a", f"go={go}", "--task", "--no-wait", *where)
    assert started.returncode == 0, started.stderr
    task_id = started.stdout.strip()
    store = tasks.Store.for_tools_file(state, tools)
    try:
        working = until(lambda: (r := store.get(task_id)).progress and r, "the task's first progress")
        assert working.status == "working" and working.status_message == "1/3 copying the first part", working
        listed = run("tasks", "list", str(tools), "--state-dir", str(state))
        assert "1/3 copying the first part" in listed.stdout
    finally:
        first = run("tasks", "cancel", task_id, "--state-dir", str(state))
    assert (first.returncode, first.stdout) == (0, f"cancelled {task_id}\n"), first.stderr
    again = run("tasks", "cancel", task_id, "--state-dir", str(state))
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"task {task_id} was already cancelled\n", again.stdout


def test_cancelling_a_finished_task_still_fails_with_the_reason(tmp_path: Path) -> None:
    state, tools = tmp_path / "state", tmp_path / "tools.toml"
    finished_task(state, tools, "d" * 22, {"content": [{"type": "text", "text": "done"}]})
    refused = run("tasks", "cancel", "d" * 22, "--state-dir", str(state))
    assert refused.returncode == 1 and "already completed" in refused.stderr
