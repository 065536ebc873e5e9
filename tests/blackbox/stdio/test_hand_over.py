"""The front: first answers before trio has loaded, and a hand-over that loses, repeats or reorders nothing.

In memory, a `Front` reads a pipe and is told its import is done (the LOADED byte) after a first
part of the input; the rest goes to a stand-in driver that takes over as `stdio.serve` does, and
everything written must equal one `Core` answering the whole input line by line. End to end, the
same over a real `mcpwrap serve`, whatever the timing of the hand-over: the responses arrive in
order and schema-valid, a line cut by the hand-over survives, EOF and signals end the session with
exit 0, and a client that never reads stdout still gets a server that ends.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.harness import HANG_S, Server, mcpwrap_cmd
from tests.unit.serve.test_front import FIXTURE, INIT, line, sent


def answers(server: Server, count: int) -> list[dict[str, Any]]:
    out = []
    while len(out) < count:
        message = server.read()
        assert isinstance(message, dict)
        if "method" not in message:
            out.append(message)
    return out


ECHO = {"name": "echo", "arguments": {"msg": "across"}}


def test_one_write_across_the_hand_over_every_answer_in_order(tmp_path: Path) -> None:
    with Server(FIXTURE, tmp_path) as server:
        server.raw(sent(server, (1, "initialize", INIT), (None, "notifications/initialized", None),
                        (2, "tools/list", None), (3, "ping", None), (4, "tools/call", ECHO), (5, "tools/list", None),
                        (6, "ping", None)))
        got = answers(server, 6)
        assert [m["id"] for m in got if m["id"] != 4] == [1, 2, 3, 5, 6]    # the call runs beside the others
        assert [m["id"] for m in got[:3]] == [1, 2, 3]
        assert all("result" in m for m in got)
        by_id = {m["id"]: m for m in got}
        assert by_id[4]["result"]["content"] == [{"type": "text", "text": "across\n"}]
        assert by_id[2]["result"] == by_id[5]["result"]
        assert server.close() == 0


@pytest.mark.parametrize("cut", ["in-a-line", "at-a-newline", "mid-call"])
def test_a_line_cut_between_two_writes_survives_the_hand_over(tmp_path: Path, cut: str) -> None:
    with Server(FIXTURE, tmp_path) as server:
        head = sent(server, (1, "initialize", INIT), (None, "notifications/initialized", None), (2, "tools/list", None))
        tail = sent(server, (3, "tools/call", ECHO), (4, "ping", None), (5, "tools/list", None))
        stream = head + tail
        at = {"in-a-line": len(head) - 20, "at-a-newline": len(head), "mid-call": len(head) + 30}[cut]
        server.raw(stream[:at])
        answers(server, 1 if cut == "in-a-line" else 2)      # the front (or already trio) has read the first part
        server.wait_stderr("mcpwrap: serving")              # the import is done: the hand-over is under way
        server.raw(stream[at:])
        got = {m["id"]: m for m in answers(server, 4 if cut == "in-a-line" else 3)}
        assert all("result" in m for m in got.values()), got
        assert got[3]["result"]["content"] == [{"type": "text", "text": "across\n"}]
        assert server.close() == 0


def test_eof_right_after_initialize_answers_and_exits_0(tmp_path: Path) -> None:
    with Server(FIXTURE, tmp_path) as server:
        server.raw(sent(server, (1, "initialize", INIT)))
        server.proc.stdin.close()     # type: ignore[union-attr]
        assert server.read()["id"] == 1  # type: ignore[index]
        assert server.close() == 0
        assert not any("Traceback" in x for x in server.stderr)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_right_after_the_first_answer_exits_0(tmp_path: Path, signum: int) -> None:
    with Server(FIXTURE, tmp_path) as server:
        server.initialize()
        server.proc.send_signal(signum)
        assert server.proc.wait(HANG_S) == 0
        server.close()
        assert not any("Traceback" in x for x in server.stderr), server.stderr


def big_tools(path: Path) -> Path:
    blocks = [f'[tools.t{i}]\ndescription = "{"x" * 400}"\ncommand = ["true"]\n' for i in range(500)]
    path.write_text("\n".join(blocks))
    return path


@pytest.mark.parametrize("end, lists", [("eof", 10), ("sigterm", 10), ("sigterm", 48)])
def test_a_client_that_never_reads_stdout_still_gets_a_server_that_ends(tmp_path: Path, end: str, lists: int) -> None:
    """Answers of ~250 KB each, none read after initialize's: 10 fill the pipe (the backlog stays under its bound, so EOF
    is seen and the flush is bounded), 48 also fill the backlog (then the reader waits: SIGTERM ends it)."""
    tools = big_tools(tmp_path / "big.toml")
    proc = subprocess.Popen(mcpwrap_cmd("serve", str(tools), "--secret-file", str(tmp_path / "secret"),
                                        "--state-dir", str(tmp_path / "state")),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    assert proc.stdin and proc.stdout
    try:
        proc.stdin.write(line(1, "initialize", INIT) + b"".join(line(i, "tools/list") for i in range(2, 2 + lists)))
        proc.stdin.flush()        # ~3 KB: the pipe takes it whether or not the server reads
        assert json.loads(proc.stdout.readline())["id"] == 1    # up (its signal handlers too); nothing more is read
        if end == "eof":
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(HANG_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        if not proc.stdin.closed:
            proc.stdin.close()
