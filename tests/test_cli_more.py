"""The newcomer's frictions (issue 15) from a shell: task ids alone and dash-led, PATH checks,
client-config pins, JSON spelling, one stderr, prompts that re-ask, `call --task`."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest

from mcpwrap import tasks
from tests.harness import HANG_S, mcpwrap_cmd

KEY = b"k" * 32
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpwrap_cmd(*args), capture_output=True, text=True, timeout=HANG_S,
                          env={**os.environ, **(env or {})}, input=stdin)


def finished_task(state: Path, tools: Path, task_id: str, result: dict[str, object]) -> None:
    """A completed record written straight into FILE's store (no supervisor needed)."""
    store = tasks.Store.for_tools_file(state, tools)
    store.create(tool="t", arguments={}, ttl_ms=600_000, poll_ms=100, tools_file=tools, digest="0" * 64,
                 snapshot=None, key=KEY, task_id=task_id)
    store.finish(task_id, result=result)


DASHED = "-" + "A" * 21                   # a 22-character id of the old kind, led by "-"
DOUBLE = "--" + "b" * 20


@pytest.mark.parametrize("task_id", ["x" + "A" * 22, DASHED, DOUBLE])
def test_tasks_commands_find_an_id_alone_in_every_store_even_dash_led(tmp_path: Path, task_id: str) -> None:
    state = tmp_path / "state"
    other, tools = tmp_path / "other.toml", tmp_path / "tools.toml"
    finished_task(state, other, "z" * 22, {"content": [{"type": "text", "text": "not this"}]})
    finished_task(state, tools, task_id, {"content": [{"type": "text", "text": "done here"}]})
    sd = ("--state-dir", str(state))
    for words in (["result", task_id, *sd], ["result", *sd, task_id], ["result", *sd, "--", task_id],
                  ["result", str(tools), task_id, *sd], ["result", str(tools), *sd, "--", task_id]):
        done = run("tasks", *words)
        assert (done.returncode, done.stdout) == (0, "done here\n"), (words, done.stderr)
    shown = run("tasks", "show", task_id, "--json", *sd)
    assert shown.returncode == 0 and json.loads(shown.stdout)["taskId"] == task_id, shown.stderr
    again = run("tasks", "cancel", task_id, *sd)
    assert again.returncode == 1 and "already completed" in again.stderr
    unknown = run("tasks", "result", "q" * 22, *sd)
    assert unknown.returncode == 2 and f"no task {'q' * 22!r} in any store under {state}" in unknown.stderr


def test_tasks_result_writes_binary_content_to_output(tmp_path: Path) -> None:
    state, tools = tmp_path / "state", tmp_path / "tools.toml"
    blob = base64.b64encode(PNG).decode()
    finished_task(state, tools, "c" * 22, {"content": [{"type": "text", "text": "a chart"},
                                                       {"type": "image", "data": blob, "mimeType": "image/png"}]})
    out = tmp_path / "chart.png"
    done = run("tasks", "result", "c" * 22, "--output", str(out), "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (0, "a chart\n"), done.stderr
    assert out.read_bytes() == PNG and f"wrote image/png, {len(PNG)} bytes, to {out}" in done.stderr


ROOT = Path(__file__).parent.parent


def test_repo_tools_search_takes_a_pattern_that_starts_with_a_dash() -> None:
    done = run("call", str(ROOT / "examples" / "repo-tools.toml"), "search", "--arg", "pattern=-> None:",
               "--arg", "path=mcpwrap/cli.py")
    assert done.returncode == 0, done.stderr
    assert "mcpwrap/cli.py:" in done.stdout and "-> None:" in done.stdout


def test_check_warns_for_each_program_not_on_path_and_fails_with_strict(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mine").write_text("#!/bin/sh\n")
    (bin_dir / "mine").chmod(0o755)
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.gone]\ncommand = ["no-such-program-mcpwrap", "x"]\n'
                     '[tools.sh]\ncommand = ["sh", "-c", "true"]\n'
                     '[tools.rel]\ncommand = ["./missing.sh"]\n'
                     f'[tools.pinned]\ncommand = ["mine"]\nenv = {{ PATH = "{bin_dir}" }}\n'
                     '[tools.script]\nshell = "no-such-program-either"\n')
    warned = run("check", str(tools))
    assert (warned.returncode, warned.stdout) == (0, f"{tools}: ok, 5 tool(s)\n"), warned.stderr
    lines = warned.stderr.splitlines()
    assert len(lines) == 2, lines
    assert "warning: tool 'gone': program 'no-such-program-mcpwrap' is not on PATH" in lines[0]
    assert f"warning: tool 'rel': program './missing.sh' is not an executable file (in {tmp_path})" in lines[1]
    strict = run("check", "--strict", str(tools))
    assert strict.returncode == 3 and strict.stdout == "" and strict.stderr.count("error: tool") == 2


def test_client_config_pins_path_and_env(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.a]\ncommand = ["true"]\n')
    done = run("client-config", str(tools), "--pin-path", "--env", "LANG=C.UTF-8", "-e", "X=a=b",
               env={"PATH": f"/opt/bin:{os.environ['PATH']}"})
    entry = json.loads(done.stdout)["mcpServers"]["t"]
    assert entry["env"] == {"LANG": "C.UTF-8", "X": "a=b", "PATH": f"/opt/bin:{os.environ['PATH']}"}
    assert "env" not in json.loads(run("client-config", str(tools)).stdout)["mcpServers"]["t"]
    bad = run("client-config", str(tools), "--env", "novalue")
    assert bad.returncode == 2 and "--env 'novalue' must look like NAME=VALUE" in bad.stderr


def test_check_refuses_a_secret_file_serve_would_refuse(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.ask]\ncommand = ["true"]\nconfirm = "Really?"\n')
    secret = tmp_path / "secret"
    assert run("check", str(tools), "--secret-file", str(secret)).returncode == 0      # serve would create it
    assert run("secret", "init", "--secret-file", str(secret)).returncode == 0
    assert run("check", str(tools), "--secret-file", str(secret)).returncode == 0
    secret.chmod(0o644)
    refused = run("check", str(tools), env={"MCPWRAP_SECRET_FILE": str(secret)})
    assert refused.returncode == 3 and refused.stdout == "", refused.stderr
    assert "`serve` would refuse the secret file that 'ask' need" in refused.stderr
    served = subprocess.run(mcpwrap_cmd("serve", str(tools), "--secret-file", str(secret), "--state-dir",
                                        str(tmp_path / "state")), capture_output=True, text=True, timeout=HANG_S,
                            stdin=subprocess.DEVNULL)
    assert served.returncode == 3                   # what check foretold
    quiet = tmp_path / "q.toml"
    quiet.write_text('[tools.a]\ncommand = ["true"]\n')
    assert run("check", str(quiet), "--secret-file", str(secret)).returncode == 0   # no tool needs it
