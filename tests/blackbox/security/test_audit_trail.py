"""The audit trail written by the real `mcpwrap serve` (stdio and HTTP, both eras): every decision
the issue lists is a line, secrets are redacted, `mcpwrap audit verify` accepts the file; a required
trail that cannot be written refuses the call (nothing runs); SIGHUP after a rename continues the
chain in a new file; a server killed mid-run leaves a trail that verifies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.harness import Server, modern_meta, until
from tests.httpharness import HttpServer

ASK = {"elicitation": {}}
SECRET = "hunter2-very-secret"
TOOLS = """
[server]
name = "audited"
{server}

[tools.echo]
description = "Echo a message, with a password that must never be logged"
command = ["echo", "{{msg}}", "--password={{password}}"]
args.msg = {{ type = "string" }}
args.password = {{ type = "string", secret = true, default = "none" }}

[tools.create]
description = "Append a line to a marker file, after confirmation"
command = ["sh", "-c", "echo ran >> \\"$1\\"", "sh", "{{path}}"]
confirm = "Create {{path}}?"
args.path = {{ type = "string" }}

[tools.touch]
description = "Create a marker file"
command = ["touch", "{{path}}"]
args.path = {{ type = "string" }}

[tools.slow]
description = "Sleep, as a task"
command = ["sleep", "30"]
task = "optional"
"""


def tools_file(tmp: Path, server: str = "") -> Path:
    path = tmp / "tools.toml"
    path.write_text(TOOLS.format(server=server))
    return path


def records(path: Path) -> list[dict[str, Any]]:
    """The trail's records (a line a killed writer left unfinished is not one)."""
    out = []
    for line in path.read_bytes().splitlines():
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    return out


def events(path: Path) -> list[str]:
    return [r["event"] for r in records(path)]


def verify(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpwrap", "audit", "verify", str(path)],
                          capture_output=True, text=True, timeout=60)


def wait_for(path: Path, event: str, count: int = 1) -> list[dict[str, Any]]:
    return until(lambda: (found := [r for r in records(path) if r["event"] == event] if path.exists() else [])
                 and len(found) >= count and found, f"{count} {event} line(s) in {path}")


def test_stdio_legacy_every_decision_is_a_line(tmp_path: Path) -> None:
    trail, marker = tmp_path / "audit.log", tmp_path / "marker"
    with Server(tools_file(tmp_path), tmp_path, "--audit", str(trail)) as s:
        s.initialize("2025-11-25", ASK)
        ok = s.call("tools/call", {"name": "echo", "arguments": {"msg": "hi", "password": SECRET}})["result"]
        assert ok["isError"] is False
        unknown = s.call("tools/call", {"name": "nope", "arguments": {"x": SECRET}})
        assert "error" in unknown
        invalid = s.call("tools/call", {"name": "echo", "arguments": {"msg": 3}})
        assert "error" in invalid or invalid["result"]["isError"]
        for answer in ("decline", "accept"):
            rid = s.request("tools/call", {"name": "create", "arguments": {"path": str(marker)}})
            ask = s.read()
            s.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": answer, "content": {}}})
            s.response(rid)
        created = s.call("tools/call", {"name": "slow", "arguments": {}, "task": {"ttl": 60000}})["result"]
        task_id = created["task"]["taskId"]
        assert s.call("tasks/cancel", {"taskId": task_id})["result"]["status"] == "cancelled"
        wait_for(trail, "task.cancelled")
        assert s.close() == 0
    lines = records(trail)
    kinds = [r["event"] for r in lines]
    for kind in ("call.start", "call.end", "confirm.asked", "confirm.answered", "refused", "task.created",
                 "task.cancelled"):
        assert kind in kinds, (kind, kinds)
    refusals = {r["reason"]: r for r in lines if r["event"] == "refused"}
    assert refusals["unknown"]["tool"] == "nope" and refusals["unknown"]["argument_names"] == ["x"]
    assert refusals["invalid"]["tool"] == "echo" and refusals["unanswered"]["tool"] == "create"
    assert [r["answer"] for r in lines if r["event"] == "confirm.answered"] == ["decline", "accept"]
    start = next(r for r in lines if r["event"] == "call.start" and r["tool"] == "echo")
    assert start["identity"] == "local" and start["transport"] == "stdio" and start["cwd"]
    assert start["arguments"]["password"] == "[redacted]" and start["argv"][0] == "echo"
    assert "--password=[redacted]" in start["argv"]
    end = next(r for r in lines if r["event"] == "call.end" and r["tool"] == "echo")
    assert end["exit_status"] == 0 and end["bytes_out"] > 0 and end["is_error"] is False
    assert SECRET.encode() not in trail.read_bytes()
    assert marker.read_text().count("ran") == 1
    done = verify(trail)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (trail.stat().st_mode & 0o777) == 0o600


def test_modern_confirm_and_refusals_over_http(tmp_path: Path) -> None:
    trail, marker = tmp_path / "audit.log", tmp_path / "marker"
    tools = tools_file(tmp_path, f'audit = "{trail}"')
    with HttpServer(tools, tmp_path) as h:
        params = {"name": "create", "arguments": {"path": str(marker)}}
        for answer in ("decline", "accept"):
            first = h.modern("tools/call", params, caps=ASK).final["result"]
            assert first["resultType"] == "input_required"
            h.modern("tools/call", {**params, "requestState": first["requestState"],
                                    "inputResponses": {"confirm": {"action": answer}}}, caps=ASK)
        h.modern("tools/call", {"name": "nope", "arguments": {}})
        h.initialize("2025-11-25")
        h.legacy("tools/call", {"name": "echo", "arguments": {"msg": "hi", "password": SECRET}})
        wait_for(trail, "call.end", 2)
    lines = records(trail)
    assert [r["answer"] for r in lines if r["event"] == "confirm.answered"] == ["decline", "accept"]
    assert sum(r["event"] == "confirm.asked" for r in lines) == 2
    assert any(r["event"] == "refused" and r["reason"] == "unknown" for r in lines)
    starts = [r for r in lines if r["event"] == "call.start"]
    assert {r["transport"] for r in starts} == {"http"}
    assert starts[0]["session"] is None and isinstance(starts[1]["session"], str)   # modern, then a legacy session
    assert h.session is not None and h.session not in trail.read_text()              # named by a digest only
    assert SECRET.encode() not in trail.read_bytes() and marker.read_text().count("ran") == 1
    assert verify(trail).returncode == 0


def test_required_trail_that_cannot_be_written_refuses_the_call(tmp_path: Path) -> None:
    trail, marker = tmp_path / "logs" / "audit.log", tmp_path / "marker"
    trail.parent.mkdir()
    tools = tools_file(tmp_path, f'audit = "{trail}"\naudit_required = true')
    with Server(tools, tmp_path) as s:
        s.initialize("2025-11-25")
        assert s.call("tools/call", {"name": "touch", "arguments": {"path": str(tmp_path / "first")}})["result"][
            "isError"] is False
        trail.unlink()
        trail.mkdir()                       # the path is now a directory: the next append cannot open it
        os.chmod(trail.parent, 0o500)       # and nothing can be created beside it
        try:
            result = s.call("tools/call", {"name": "touch", "arguments": {"path": str(marker)}})["result"]
            assert result["isError"] and result["content"][0]["text"].startswith(
                "not run: the audit log could not be written: ")
            assert not marker.exists()
            s.wait_stderr("calls are refused until it can")
        finally:
            os.chmod(trail.parent, 0o700)


def test_unwritable_trail_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    done = subprocess.run([sys.executable, "-m", "mcpwrap", "serve", str(tools_file(tmp_path)), "--audit",
                           str(tmp_path / "dir"), "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 3 and "--audit" in done.stderr and done.stdout == ""


def test_sighup_after_rename_continues_the_chain_in_a_new_file(tmp_path: Path) -> None:
    trail = tmp_path / "audit.log"
    with Server(tools_file(tmp_path), tmp_path, "--audit", str(trail)) as s:
        s.initialize("2025-11-25")
        s.call("tools/call", {"name": "echo", "arguments": {"msg": "one"}})
        wait_for(trail, "call.end")
        trail.rename(tmp_path / "audit.log.1")          # logrotate's move, then its postrotate signal
        os.kill(s.proc.pid, signal.SIGHUP)
        s.wait_stderr("SIGHUP: reopening the audit trail")
        assert s.call("ping")["result"] == {}            # still serving
        s.call("tools/call", {"name": "echo", "arguments": {"msg": "two"}})
        wait_for(trail, "call.end")
        assert s.close() == 0
    assert "call.start" in events(tmp_path / "audit.log.1") and "call.start" in events(trail)
    done = verify(trail)                                  # verifies FILE.1 then FILE, chained across
    assert done.returncode == 0, done.stdout + done.stderr


def test_killed_mid_run_the_trail_verifies_to_its_last_complete_line(tmp_path: Path) -> None:
    trail = tmp_path / "audit.log"
    with Server(tools_file(tmp_path), tmp_path, "--audit", str(trail)) as s:
        s.initialize("2025-11-25")
        for n in range(20):
            s.request("tools/call", {"name": "echo", "arguments": {"msg": str(n)}})
        wait_for(trail, "call.start", 5)
        os.kill(s.proc.pid, signal.SIGKILL)
        s.proc.wait()
    assert verify(trail).returncode == 0             # each line is one write(2): a kill leaves whole lines
    whole = trail.read_bytes()
    with open(trail, "ab") as f:                      # a write the kill cut short (a crash of the machine)
        f.write(whole.splitlines(keepends=True)[-1][:40])
    torn = verify(trail)
    assert torn.returncode == 5, torn.stdout + torn.stderr   # the chain holds up to the unfinished last line
    with Server(tools_file(tmp_path), tmp_path, "--audit", str(trail)) as s:   # the next writer recovers it
        s.initialize("2025-11-25")
        s.call("tools/call", {"name": "echo", "arguments": {"msg": "after"}})
        assert s.close() == 0                         # EOF: what was queued is written before the exit
    assert "audit.torn" in events(trail)
    assert any(r["event"] == "call.start" and r["arguments"] == {"msg": "after", "password": "[redacted]"}
               for r in records(trail))
    done = verify(trail)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_reload_to_another_audit_path_opens_the_new_file(tmp_path: Path, era: str) -> None:
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    tools = tools_file(tmp_path, f'audit = "{first}"')
    with Server(tools, tmp_path) as s:
        s.initialize("2025-11-25")
        s.call("tools/call", {"name": "echo", "arguments": {"msg": "one"}} if era == "legacy" else
               {"name": "echo", "arguments": {"msg": "one"}, "_meta": modern_meta()})
        wait_for(first, "call.end")
        tools.write_text(TOOLS.format(server=f'audit = "{second}"'))
        s.wait_stderr(f"audit trail: {second}")
        s.call("tools/call", {"name": "echo", "arguments": {"msg": "two"}})
        wait_for(second, "call.end")
    assert verify(first).returncode == 0 and verify(second).returncode == 0


def test_a_task_nobody_follows_is_in_the_trail_from_its_start_to_its_end(tmp_path: Path) -> None:
    """The task's supervisor writes its own lines: the argv and cwd that ran (the secret redacted),
    the call's end and `task.finished`, though the session that created it closed at once."""
    path = tools_file(tmp_path, 'audit = "trail.log"').read_text()
    path += ('\n[tools.job]\ndescription = "Echo, as a task"\ncommand = ["echo", "{msg}", "--password={password}"]\n'
             'task = "always"\nargs.msg = { type = "string" }\nargs.password = { type = "string", secret = true }\n')
    (tmp_path / "tools.toml").write_text(path)
    trail = tmp_path / "trail.log"
    with Server(tmp_path / "tools.toml", tmp_path) as s:
        s.initialize("2025-11-25")
        created = s.call("tools/call", {"name": "job", "arguments": {"msg": "hi", "password": SECRET},
                                        "task": {"ttl": 60000}})["result"]
        task_id = created["task"]["taskId"]
    finished = wait_for(trail, "task.finished")[0]                   # the server is gone by now
    assert finished["task_id"] == task_id and finished["status"] == "completed" and finished["exit_status"] == 0
    start = next(r for r in records(trail) if r["event"] == "call.start" and r["tool"] == "job")
    assert start["transport"] == "task" and start["argv"][-2:] == ["hi", "--password=[redacted]"]
    assert start["cwd"] == str(tmp_path) and start["arguments"]["password"] == "[redacted]"
    assert [r["event"] for r in records(trail)][-2:] == ["call.end", "task.finished"]
    assert SECRET.encode() not in trail.read_bytes()
    assert verify(trail).returncode == 0, verify(trail).stderr


def test_a_task_cancelled_from_the_shell_is_in_the_trail(tmp_path: Path) -> None:
    """`mcpwrap tasks cancel` writes `task.cancelled` in the trail of the tools file the task was
    created from, as a client's tasks/cancel does; a second cancel, which changes nothing, writes none."""
    from tests.blackbox.cli.test_more import run

    trail, state = tmp_path / "trail.log", tmp_path / "state"
    tools = tools_file(tmp_path, 'audit = "trail.log"')
    started = run("call", str(tools), "slow", "--task", "--no-wait", "--state-dir", str(state))
    assert started.returncode == 0, started.stderr
    task_id = started.stdout.strip()
    wait_for(trail, "call.start")
    for _ in range(2):
        cancelled = run("tasks", "cancel", task_id, "--state-dir", str(state))
        assert cancelled.returncode == 0, cancelled.stderr
    wait_for(trail, "task.finished")
    lines = [r for r in records(trail) if r["event"] == "task.cancelled"]
    assert [(r["task_id"], r["identity"], r["transport"]) for r in lines] == [(task_id, "local", "cli")], lines
    assert verify(trail).returncode == 0, verify(trail).stderr
