"""Scale-out: three `serve --http` replicas sharing the secret file and the state directory.

A client that alternates between them, as a round-robin load balancer would, completes
a 2026-07-28 confirmation round (asked by one, run by another) and a task's whole life
(created on one, read on the next, finished or cancelled on the third). A replica that
is stopped mid-call answers with an error or a closed connection, never a hang, and
takes its tool's process group with it.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import procs
from tests.harness import HANG_S, modern_meta, until
from tests.httpharness import HttpServer, modern_headers

TOOLS = Path(__file__).parent / "fixtures" / "http.toml"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[list[HttpServer]]:
    shared = {"secret": tmp_path / "secret", "state": tmp_path / "state"}
    started: list[HttpServer] = []
    try:
        for n in range(3):
            started.append(HttpServer(TOOLS, tmp_path / f"r{n}", **shared))
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


def test_a_replica_stopped_mid_call_ends_the_call_cleanly(replicas: list[HttpServer]) -> None:
    victim = replicas[0]
    secs = f"602.{os.getpid() % 1000000:06d}"
    params = {"name": "sleeper", "arguments": {"secs": secs}, "_meta": modern_meta()}
    conn = http.client.HTTPConnection(victim.host, victim.port, timeout=HANG_S)
    conn.request("POST", victim.path, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                  "params": params}).encode(),
                 {"content-type": "application/json", **modern_headers("tools/call", params)})
    until(lambda: len(procs.with_cmdline(secs)) >= 2, "the tool to start")
    os.kill(victim.proc.pid, signal.SIGTERM)
    try:
        response = conn.getresponse()                      # an error status, or no answer at all: never a hang
        assert response.status >= 500 or not response.read()
    except (http.client.HTTPException, ConnectionError):
        pass
    finally:
        conn.close()
    assert victim.proc.wait(HANG_S) == 0
    until(lambda: not procs.with_cmdline(secs), "the stopped replica's tool to be killed")
    assert replicas[1].modern("tools/list").status == 200   # the others go on serving
