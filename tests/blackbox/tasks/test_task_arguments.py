"""A tasks-extension call to a `task_asks` tool that lacks elicited arguments becomes its task at once, and the task asks for
them itself: parked in input_required with one inputRequest per missing argument (a form of that one
field), so any replica answers any subset; an answered key leaves the others pending, each key is
answered once (the first answer), and the command runs once every answer is in and checked. An answer
holding a newline or an escape, or a declined question, ends the task with nothing run. Raw JSON-RPC over
stdio, each message schema-checked (tests/harness.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.blackbox.tasks import test_tasks
from tests.blackbox.tasks.test_task_questions import get, request
from tests.blackbox.tasks.test_tasks import MODERN, Env, Server
from tests.harness import until

TOOLS = """
[tools.sign]
shell = '''printf '%s|%s\\n' "$MCP_ARG_NAME" "$MCP_ARG_FLAG" >> "$MCP_ARG_OUT"'''
task = "optional"
task_poll = "100ms"
task_asks = true
args.out = { type = "string" }
args.name = { type = "string", elicit = true }
args.flag = { type = "boolean", elicit = true }
"""
env = test_tasks.env                      # the fixture: never a supervisor (or its command) left behind


def created(env: Env, out: Path) -> tuple[Server, str]:
    env.tools.write_text(TOOLS)
    server = env.server(MODERN)
    result = request(server, "tools/call", {"name": "sign", "arguments": {"out": str(out)}})["result"]
    assert result["resultType"] == "task", result      # no input_required round before the task
    return server, result["taskId"]


def waiting(server: Server, task_id: str, keys: set[str]) -> dict[str, Any]:
    until(lambda: set(get(server, task_id).get("inputRequests", {})) == keys, what=f"the task to ask {keys}")
    task = get(server, task_id)
    assert task["status"] == "input_required"
    return task


def answer(server: Server, task_id: str, key: str, response: dict[str, Any]) -> None:
    reply = request(server, "tasks/update", {"taskId": task_id, "inputResponses": {key: response}})
    assert reply["result"]["resultType"] == "complete", reply


def ended(server: Server, task_id: str) -> dict[str, Any]:
    until(lambda: get(server, task_id)["status"] in ("completed", "failed"), what="the task to end")
    return get(server, task_id)


def test_replicas_answer_one_argument_each_and_the_command_runs_once(env: Env, tmp_path: Path) -> None:
    out = tmp_path / "signed"
    first, task_id = created(env, out)
    second = env.server(MODERN)
    task = waiting(second, task_id, {"name", "flag"})
    form = task["inputRequests"]["name"]["params"]["requestedSchema"]
    assert form["properties"] == {"name": {"type": "string"}} and task["inputRequests"]["name"]["method"] == "elicitation/create"
    answer(second, task_id, "name", {"action": "accept", "content": {"name": "ada", "flag": False}})
    waiting(first, task_id, {"flag"})                 # the answered key is gone, the other still pending
    answer(first, task_id, "name", {"action": "accept", "content": {"name": "eve"}})   # answered already
    waiting(first, task_id, {"flag"})
    answer(first, task_id, "flag", {"action": "accept", "content": {"flag": True, "name": "mallory"}})
    task = ended(second, task_id)
    assert task["status"] == "completed" and not task["result"].get("isError"), task
    assert out.read_text() == "ada|true\n"            # each key's first answer, only the field asked; once


def test_an_answer_with_a_newline_or_an_escape_runs_nothing(env: Env, tmp_path: Path) -> None:
    for value in ("ada\nrm -rf ~", "\x1b]0;owned\x07"):
        out = tmp_path / "signed"
        server, task_id = created(env, out)
        waiting(server, task_id, {"name", "flag"})
        answer(server, task_id, "name", {"action": "accept", "content": {"name": value}})
        task = ended(server, task_id)
        text = task["result"]["content"][0]["text"]
        assert task["result"]["isError"] and "control character" in text and "nothing ran" in text, task
        assert not out.exists()


def test_a_declined_argument_ends_the_task_with_nothing_run(env: Env, tmp_path: Path) -> None:
    out = tmp_path / "signed"
    server, task_id = created(env, out)
    waiting(server, task_id, {"name", "flag"})
    answer(server, task_id, "flag", {"action": "decline"})
    task = ended(server, task_id)
    text = task["result"]["content"][0]["text"]
    assert task["result"]["isError"] and "declined the argument flag" in text and "nothing ran" in text, task
    assert not out.exists()


def test_the_questions_count_in_the_audit_trail_and_tasks_answer_answers_them(env: Env, tmp_path: Path) -> None:
    """question.asked / question.answered for each argument and the confirmation, never the answer; the
    confirmation comes once the arguments are in and quotes them; `mcpwrap tasks answer` answers each."""
    out, trail = tmp_path / "signed", tmp_path / "audit.jsonl"
    env.tools.write_text(f"[server]\naudit = '{trail}'\n" + TOOLS.replace('task_asks = true', 'task_asks = true\nconfirm = "Sign as {name}?"'))
    server = env.server(MODERN)
    task_id = request(server, "tools/call", {"name": "sign", "arguments": {"out": str(out)}})["result"]["taskId"]
    waiting(server, task_id, {"name", "flag"})
    answer(server, task_id, "flag", {"action": "accept", "content": {"flag": False}})
    assert env.cli("answer", task_id, "--answer", "secret-ada").returncode == 0
    task = waiting(server, task_id, {"confirm"})
    assert task["inputRequests"]["confirm"]["params"]["message"] == "Sign as secret-ada?"
    assert env.cli("answer", task_id, "--answer", "yes").returncode == 0
    assert ended(server, task_id)["status"] == "completed"
    assert out.read_text() == "secret-ada|false\n"
    lines = [json.loads(line) for line in trail.read_text().splitlines()]
    questions = [(r["event"], r.get("prompt"), r.get("answer")) for r in lines if r["event"].startswith("question.")]
    assert questions == [("question.asked", "the argument name", None), ("question.asked", "the argument flag", None),
                         ("question.answered", None, "accept"), ("question.answered", None, "accept"),
                         ("question.asked", "confirmation", None), ("question.answered", None, "accept")]
    assert not [r for r in lines if r["event"] == "question.answered" and "secret-ada" in json.dumps(r)]
    (start,) = [r for r in lines if r["event"] == "call.start"]
    assert start["arguments"]["name"] == "secret-ada"    # what ran is recorded, as for any call
