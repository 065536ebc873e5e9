"""Attacks on the driver: nesting bombs, a client that stops reading, stderr nobody reads,
a FIFO in place of the tools file, more calls than slots, a stdout closed under us.

Each test is written against a promise of the README ("the server never dies on bad input",
"memory is bounded whatever the client does", "nothing on disk can stall the loop"); none
depends on how fast anything runs: waits are for events, timeouts only guard against hangs.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.serve import admission
from tests.harness import HANG_S, MODERN, Server, mcpwrap_cmd, modern_meta, until
from tests.procs import with_env

DEEP = 300                                   # orjson reads this, but cannot write it back

TOOLS = """
[tools.echo]
command = ["echo", "{msg}"]
args.msg = { type = "string" }

[tools.loose]
description = "takes any JSON value"
command = ["echo", "ok"]
args.value = { description = "anything" }

[tools.asks]
command = ["echo", "ok"]
confirm = "Really?"
args.value = { description = "anything" }

[tools.deep_json]
command = ["python3", "-c", "print('[' * 300 + ']' * 300)"]
output = "json"

[tools.deep_mcp]
command = ["python3", "-c", "print('{\\"content\\": [], \\"structuredContent\\": {\\"a\\": ' + '[' * 300 + ']' * 300 + '}}')"]
output = "mcp"

[tools.chatty]
description = "writes many stderr lines"
command = ["python3", "-c", "import sys\\nfor i in range(int(sys.argv[1])): print('line', i, 'x' * 100, file=sys.stderr)\\nprint('done')", "{n}"]
args.n = { type = "integer" }

[tools.big]
command = ["sh", "-c", "echo run >> \\"$MARKS\\"; head -c 524288 /dev/zero | tr '\\\\0' x"]
max_output = "1MiB"

[tools.hold]
description = "waits until a go-file exists"
command = ["sh", "-c", "while [ ! -e \\"$GO\\" ]; do sleep 0.05; done; echo released"]
"""


def deep_value() -> str:
    return "[" * DEEP + "]" * DEEP


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    return path


def alive_check(server: Server) -> None:
    """The server still answers, and correctly."""
    assert server.call("ping")["result"] == {}
    answer = server.call("tools/call", {"name": "echo", "arguments": {"msg": "still here"}})
    assert answer["result"]["content"][0]["text"] == "still here\n"


@pytest.mark.parametrize("where", ["arguments", "retry", "notification", "batch-item"])
def test_deep_input_is_refused_and_the_server_lives(tools: Path, tmp_path: Path, where: str) -> None:
    server = Server(tools, tmp_path)
    try:
        server.initialize("2025-03-26" if where == "batch-item" else "2025-11-25")
        if where == "arguments":
            server.raw(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"loose","arguments":'
                       b'{"value":' + deep_value().encode() + b"}}}\n")
            answer = server.response(7)
            assert answer["error"]["code"] == -32602
        elif where == "retry":                # a 2026-07-28 retry: arguments are hashed before they are checked
            meta = modern_meta({"elicitation": {}})
            first = server.call("tools/call", {"name": "asks", "arguments": {"value": 1}, "_meta": meta})
            state = first["result"]["requestState"]
            server.pending[8] = ("tools/call", MODERN)
            server.raw(b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"asks","_meta":'
                       + json.dumps(meta).encode() + b',"arguments":{"value":' + deep_value().encode()
                       + b'},"requestState":' + json.dumps(state).encode() + b',"inputResponses":{}}}\n')
            answer = server.response(8)
            assert answer["error"]["code"] == -32602
        elif where == "notification":
            server.raw(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":'
                       + deep_value().encode() + b"}}\n")
        else:
            server.raw(b'[{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"loose","arguments":'
                       b'{"value":' + deep_value().encode() + b'}}},{"jsonrpc":"2.0","id":10,"method":"ping"}]\n')
            batch = server.read()
            assert isinstance(batch, list)
            answers = {item["id"]: item for item in batch}
            assert answers[9]["error"]["code"] == -32602 and answers[10]["result"] == {}
        alive_check(server)
    finally:
        server.close()


@pytest.mark.parametrize("tool", ["deep_json", "deep_mcp"])
def test_deep_tool_output_fails_that_call_only(tools: Path, tmp_path: Path, tool: str) -> None:
    server = Server(tools, tmp_path)
    try:
        server.initialize()
        answer = server.call("tools/call", {"name": tool, "arguments": {}})
        failed = answer.get("result", {}).get("isError") is True or "error" in answer
        assert failed, answer
        alive_check(server)
    finally:
        server.close()


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])          # kB
    raise AssertionError(field)


def test_client_that_stops_reading_stdout_does_not_grow_the_server(tools: Path, tmp_path: Path) -> None:
    """130 calls of 512 KiB each while nobody reads stdout: the server holds back instead of
    queueing 70 MB of answers; once the client reads again, every answer arrives.
    (What it may hold is bounded by --max-calls x max_output plus the outbox's 4 MiB.)"""
    marks = tmp_path / "marks"
    marks.touch()
    calls = 130
    proc = subprocess.Popen(
        mcpwrap_cmd("serve", str(tools), "--secret-file", str(tmp_path / "secret"), "--state-dir",
                    str(tmp_path / "state"), "--max-calls", "8", "--no-watch"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "MARKS": str(marks)}, start_new_session=True)
    assert proc.stdin and proc.stdout and proc.stderr
    stderr: list[bytes] = []
    threading.Thread(target=lambda: stderr.extend(iter(proc.stderr.readline, b"")), daemon=True).start()
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
                         b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
                         b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proc.stdin.flush()
        assert b'"id":0' in proc.stdout.readline()
        writer = threading.Thread(target=lambda: [
            (proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                          "params": {"name": "big", "arguments": {}}}).encode() + b"\n"),
             proc.stdin.flush()) for n in range(1, calls + 1)], daemon=True)
        writer.start()
        # Either the server says it is holding back, or (unbounded) it ran every call and queued every answer.
        until(lambda: any(b"holding back" in line for line in stderr)
              or len(marks.read_text().splitlines()) >= calls, "the server to hold back or finish", 300)
        answered: set[int] = set()
        reader = threading.Thread(target=lambda: answered.update(
            json.loads(line)["id"] for line in iter(proc.stdout.readline, b"") if b'"result"' in line), daemon=True)
        reader.start()
        until(lambda: len(answered) >= calls, "every answer", 300)
        assert answered == set(range(1, calls + 1))
        peak = _status(proc.pid, "VmHWM")
        assert peak < 80 * 1024, f"VmHWM {peak} kB"
    finally:
        proc.kill()
        proc.wait()


def test_calls_past_the_waiting_room_are_refused_clearly(tools: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    server = Server(tools, tmp_path, "--max-calls", "1", env={"GO": str(go)})
    try:
        server.initialize()
        held = [server.request("tools/call", {"name": "hold", "arguments": {}}) for _ in range(1 + admission.QUEUED_PER_SLOT)]
        refused = server.call("tools/call", {"name": "hold", "arguments": {}})
        assert refused["result"]["isError"] is True
        assert "--max-calls" in refused["result"]["content"][0]["text"]
        go.touch()
        for answer in server.responses(held):        # the waiting calls take the slot in any order
            assert answer["result"]["content"][0]["text"] == "released\n"
    finally:
        server.close()


# --- class 5: nothing a peer fails to read, nothing on disk stalls the loop ----------------
def test_stderr_nobody_reads_does_not_freeze_the_server(tools: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        mcpwrap_cmd("serve", str(tools), "--secret-file", str(tmp_path / "secret"), "--state-dir",
                    str(tmp_path / "state"), "--log-level", "debug", "--no-watch"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stdin and proc.stdout
    lines: list[bytes] = []

    def ask(message: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin and proc.stdout
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        while True:
            ready = select.select([proc.stdout], [], [], HANG_S)[0]
            assert ready, "the server froze: stderr is full and nobody reads it"
            line = proc.stdout.readline()
            assert line, "server exited"
            lines.append(line)
            answer = json.loads(line)
            if answer.get("id") == message["id"]:
                return answer

    try:
        ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        # Far more than a pipe holds: every line is traced at debug level, twice.
        answer = ask({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "chatty", "arguments": {"n": 20000}}})
        assert answer["result"]["content"][0]["text"] == "done\n"
        for n in range(2, 50):
            assert ask({"jsonrpc": "2.0", "id": n, "method": "ping"})["result"] == {}
    finally:
        proc.kill()
        proc.wait()


def test_a_fifo_in_place_of_the_tools_file_does_not_stall_the_loop(tools: Path, tmp_path: Path) -> None:
    server = Server(tools, tmp_path)
    try:
        server.initialize()
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        os.replace(fifo, tools)
        until(lambda: any("changed but is invalid" in line for line in server.stderr), "the reload warning")
        alive_check(server)
    finally:
        server.close()


# --- class 7: exits that are clean ---------------------------------------------------------
def test_stdout_closed_by_the_client_is_a_quiet_exit(tools: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        mcpwrap_cmd("serve", str(tools), "--secret-file", str(tmp_path / "secret"), "--state-dir",
                    str(tmp_path / "state"), "--no-watch"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stdin and proc.stdout
    proc.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"ping"}\n')
    proc.stdin.flush()
    assert b'"id":0' in proc.stdout.readline()
    proc.stdout.close()
    # The ping's answer meets the closed pipe; the call's answer comes later, from another task.
    proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
                     b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"msg":"x"}}}\n')
    proc.stdin.flush()
    proc.wait(timeout=HANG_S)                   # stdin stays open: the closed stdout alone must end it
    err = proc.stderr.read() if proc.stderr else b""
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"ExceptionGroup" not in err, err


def test_eof_with_term_ignoring_calls_exits_and_leaves_nothing(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    tools = tmp_path / "tools.toml"
    tools.write_text('[tools.stubborn]\ncommand = ["sh", "-c", "trap \\"\\" TERM; echo up; sleep 60 & wait"]\n'
                     'kill_grace = "1s"\n')
    server = Server(tools, tmp_path, env={"HARDENING_TAG": tag})
    try:
        server.initialize()
        for _ in range(20):
            server.request("tools/call", {"name": "stubborn", "arguments": {}})
        until(lambda: len(with_env("HARDENING_TAG", tag)) >= 40, "20 shells and their sleeps")
        assert server.proc.stdin
        server.proc.stdin.close()
        server.proc.wait(timeout=HANG_S)
        assert server.proc.returncode == 0
        until(lambda: not with_env("HARDENING_TAG", tag), "every tool process to be gone")
        assert not any("Traceback" in line for line in server.stderr), server.stderr
    finally:
        server.close()


def test_serve_takes_the_hard_open_files_limit(tools: Path, tmp_path: Path) -> None:
    """500 concurrent calls hold pipes: a soft RLIMIT_NOFILE of 256 must not be a cliff."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip(f"the hard limit here is {hard}")

    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    proc = subprocess.Popen(
        mcpwrap_cmd("serve", str(tools), "--secret-file", str(tmp_path / "secret"), "--state-dir",
                    str(tmp_path / "state"), "--no-watch"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=low_soft_limit)
    assert proc.stdin and proc.stdout
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"ping"}\n')
        proc.stdin.flush()
        assert b'"id":0' in proc.stdout.readline()       # serving: the limit is raised by now
        line = next(x for x in Path(f"/proc/{proc.pid}/limits").read_text().splitlines()
                    if x.startswith("Max open files"))
        assert int(line.split()[3]) > 256, line
    finally:
        proc.kill()
        proc.wait()
