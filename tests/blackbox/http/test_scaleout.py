"""Scale-out: three `serve --http` replicas sharing the secret file and the state directory.

A client that alternates between them, as a round-robin load balancer would, completes
a 2026-07-28 confirmation round (asked by one, run by another) and a task's whole life
(created on one, read on the next, finished or cancelled on the third). A replica that
is stopped mid-call (SIGTERM, or SIGKILL: no cleanup of its own) answers with an error or
a closed connection, never a hang, and its tool's processes die with it; a task it
started runs on under its own supervisor and is finished through another replica.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import procs
from tests.harness import HANG_S, modern_meta, until
from tests.httpharness import HttpServer, modern_headers

TOOLS = Path(__file__).parents[2] / "fixtures" / "http.toml"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.fixture
def replicas(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[list[HttpServer]]:
    """Three replicas; a test may pass them environment variables (indirect parametrization)."""
    env: dict[str, str] = getattr(request, "param", {})
    started: list[HttpServer] = []
    try:
        for n in range(3):
            started.append(HttpServer(TOOLS, tmp_path / f"r{n}", secret=tmp_path / "secret", state=tmp_path / "state",
                                      env=env))
        yield started
    finally:
        for replica in started:
            replica.close()


def test_a_confirmation_asked_by_one_replica_is_run_by_another(replicas: list[HttpServer], tmp_path: Path) -> None:
    marker = tmp_path / "made"
    params = {"name": "create", "arguments": {"path": str(marker)}}
    caps = {"elicitation": {"form": {}}}
    asked = replicas[0].modern("tools/call", params, caps=caps).final["result"]
    assert asked["resultType"] == "input_required"
    (key,) = asked["inputRequests"]
    retry = {**params, "requestState": asked["requestState"],
             "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
    done = replicas[1].modern("tools/call", retry, id=2, caps=caps).final["result"]
    assert done["resultType"] == "complete" and not done["isError"]
    assert marker.read_text() == "run\n"
    replay = replicas[2].modern("tools/call", retry, id=3, caps=caps)   # one confirmation, one run, on any replica
    assert replay.final["error"]["code"] == -32602 and marker.read_text() == "run\n"


def test_a_task_lives_across_replicas(replicas: list[HttpServer], tmp_path: Path) -> None:
    turn = itertools.cycle(replicas)

    def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
        return next(turn).modern(method, params, caps=TASKS).final["result"]

    go = tmp_path / "go"
    finished = ask("tools/call", {"name": "gated", "arguments": {"go": str(go)}})
    cancelled = ask("tools/call", {"name": "gated", "arguments": {"go": str(tmp_path / "never")}})
    assert finished["resultType"] == cancelled["resultType"] == "task"
    assert ask("tasks/get", {"taskId": finished["taskId"]})["status"] == "working"
    ask("tasks/cancel", {"taskId": cancelled["taskId"]})
    go.touch()
    done = until(lambda: (r := ask("tasks/get", {"taskId": finished["taskId"]}))["status"] == "completed" and r,
                 "the task to complete")
    assert done["result"]["content"] == [{"type": "text", "text": "done\n"}]
    for _ in replicas:                                     # every replica tells the same story
        assert ask("tasks/get", {"taskId": cancelled["taskId"]})["status"] == "cancelled"


def start_call(replica: HttpServer, secs: str) -> http.client.HTTPConnection:
    """POST a 2026-07-28 sleeper call to `replica` and return once its processes run (the answer still due)."""
    params = {"name": "sleeper", "arguments": {"secs": secs}, "_meta": modern_meta()}
    conn = http.client.HTTPConnection(replica.host, replica.port, timeout=HANG_S)
    conn.request("POST", replica.path, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                  "params": params}).encode(),
                 {"content-type": "application/json", **modern_headers("tools/call", params)})
    until(lambda: len(procs.with_cmdline(secs)) >= 2, "the tool to start")
    return conn


def ends_without_an_answer(conn: http.client.HTTPConnection) -> None:
    """An error status, or no answer at all: never a hang (the connection's timeout is the guard)."""
    try:
        response = conn.getresponse()
        assert response.status >= 500 or not response.read()
    except (http.client.HTTPException, ConnectionError):
        pass
    finally:
        conn.close()


# SIGKILL leaves the server no cleanup of its own: its watchdog must end the call's processes, in
# the cgroup (where one is writable) and by the environment tag. (The tag variant is the one that
# fails for sure without a watchdog: any other mcpwrap starting under the same cgroup parent
# removes a dead server's cgroups too, at a time nobody controls.)
@pytest.mark.parametrize(("sig", "replicas"), [(signal.SIGTERM, {}), (signal.SIGKILL, {}),
                                               (signal.SIGKILL, {"MCPWRAP_CONTAINMENT": "tag"})],
                         ids=["SIGTERM", "SIGKILL", "SIGKILL-tag"], indirect=["replicas"])
def test_a_replica_stopped_mid_call_ends_the_call_cleanly(replicas: list[HttpServer], sig: signal.Signals) -> None:
    victim = replicas[0]
    secs = f"602.{os.getpid() % 1000000:06d}"
    conn = start_call(victim, secs)
    os.kill(victim.proc.pid, sig)
    ends_without_an_answer(conn)
    assert victim.proc.wait(HANG_S) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    until(lambda: not procs.with_cmdline(secs), "the stopped replica's tool to be killed")
    assert replicas[1].modern("tools/list").status == 200   # the others go on serving


def test_a_task_outlives_its_killed_replica_and_is_finished_by_another(replicas: list[HttpServer],
                                                                        tmp_path: Path) -> None:
    """A task runs under its own supervisor, which outlives the server by design (DESIGN.md §6): it is
    neither killed with the replica's calls nor left unanswerable."""
    victim, other = replicas[0], replicas[1]
    go = tmp_path / "go"
    task = victim.modern("tools/call", {"name": "gated", "arguments": {"go": str(go)}}, caps=TASKS).final["result"]
    assert task["resultType"] == "task"
    secs = f"605.{os.getpid() % 1000000:06d}"
    conn = start_call(victim, secs)                        # a call in flight too, so the watchdog has work
    os.kill(victim.proc.pid, signal.SIGKILL)
    ends_without_an_answer(conn)
    victim.proc.wait(HANG_S)
    until(lambda: not procs.with_cmdline(secs), "the killed replica's call to be ended")

    def get() -> dict[str, Any]:
        return other.modern("tasks/get", {"taskId": task["taskId"]}, caps=TASKS).final["result"]

    assert get()["status"] == "working"
    other.initialize()                                     # and a 2025-11-25 session's blocking tasks/result
    results: list[dict[str, Any]] = []
    waiter = threading.Thread(target=lambda: results.append(
        other.legacy("tasks/result", {"taskId": task["taskId"]}, id=7).final), daemon=True)
    waiter.start()
    go.touch()
    done = until(lambda: (r := get())["status"] == "completed" and r, "the task to complete on another replica")
    assert done["result"]["content"] == [{"type": "text", "text": "done\n"}]
    waiter.join(HANG_S)
    assert results and results[0]["result"]["content"] == done["result"]["content"], results
