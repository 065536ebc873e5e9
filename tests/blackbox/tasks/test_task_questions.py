"""A running task's question (2026-07-28 tasks extension): the task parks in `input_required` with the
question in `inputRequests`, and returns to `working` when `tasks/update` brings the answer, from any
server process sharing the store, exactly once; the answer reaches the command's stdin byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.blackbox.tasks.test_tasks import EXT, EXT_ID, MODERN, Env, Server, check
from tests.blackbox.tasks import test_tasks
from tests.harness import until

TOOLS = """
[tools.apply]
shell = '''printf 'Plan: 1 to add.\\n  Enter a value: '; head -n 1 > "$MCP_ARG_OUT"; printf 'done\\n' '''
task = "optional"
task_poll = "100ms"
args.out = { type = "string" }
ask = [{ prompt = 'Enter a value: $', message = "Apply this plan?", answer = { type = "boolean" }, send = { true = "yes\\n", false = "no\\n" }, show = 1 }]
ask_quiet = "50ms"
"""
env = test_tasks.env                      # the fixture: never a supervisor (or its command) left behind


def request(server: Server, method: str, params: dict[str, Any], elicitation: bool = True) -> dict[str, Any]:
    request_id = next(server.ids)
    caps: dict[str, Any] = {"extensions": {EXT_ID: {}}, **({"elicitation": {}} if elicitation else {})}
    server.methods[request_id] = method
    server.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {
        **params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                            "io.modelcontextprotocol/clientCapabilities": caps}}})
    return server.answer(request_id)


def parked(env: Env, out: Path, elicitation: bool = True) -> tuple[Server, str]:
    env.tools.write_text(TOOLS)
    server = env.server(MODERN)
    created = request(server, "tools/call", {"name": "apply", "arguments": {"out": str(out)}}, elicitation)["result"]
    return server, created["taskId"]


def get(server: Server, task_id: str) -> dict[str, Any]:
    result = request(server, "tasks/get", {"taskId": task_id})["result"]
    check(EXT, "GetTaskResult", result)
    return result


def test_a_task_parks_for_a_question_and_goes_on_with_the_answer(env: Env, tmp_path: Path) -> None:
    out = tmp_path / "received"
    server, task_id = parked(env, out)
    until(lambda: get(server, task_id)["status"] == "input_required", what="the task to park")
    task = get(server, task_id)
    ((key, question),) = task["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"] == "Apply this plan?\n\nPlan: 1 to add."
    answer = {"action": "accept", "content": {"answer": True}}
    assert "error" not in request(server, "tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
    until(lambda: get(server, task_id)["status"] == "completed", what="the task to complete")
    assert out.read_bytes() == b"yes\n"


def test_two_replicas_answering_the_same_question_answer_it_once(env: Env, tmp_path: Path) -> None:
    out = tmp_path / "received"
    first, task_id = parked(env, out)
    second = env.server(MODERN)
    until(lambda: get(first, task_id)["status"] == "input_required", what="the task to park")
    (key,) = get(second, task_id)["inputRequests"]
    yes, no = ({"action": "accept", "content": {"answer": value}} for value in (True, False))
    request(first, "tasks/update", {"taskId": task_id, "inputResponses": {key: yes}})
    request(second, "tasks/update", {"taskId": task_id, "inputResponses": {key: no}})
    until(lambda: get(second, task_id)["status"] == "completed", what="the task to complete")
    assert out.read_bytes() == b"yes\n"


def test_a_task_whose_creator_cannot_be_asked_ends_quoting_the_question(env: Env, tmp_path: Path) -> None:
    server, task_id = parked(env, tmp_path / "received", elicitation=False)
    until(lambda: get(server, task_id)["status"] == "completed", what="the task to end")
    text = get(server, task_id)["result"]["content"][0]["text"]
    assert "the command asked 'Enter a value:' (Apply this plan?) and nobody could be asked" in text


def test_mcpwrap_tasks_answer_answers_a_parked_task_once_from_a_shell(env: Env, tmp_path: Path) -> None:
    out = tmp_path / "received"
    server, task_id = parked(env, out)
    until(lambda: get(server, task_id)["status"] == "input_required", what="the task to park")
    asked = env.cli("answer", task_id)
    assert asked.returncode == 2 and "Apply this plan?" in asked.stderr
    refused = env.cli("answer", task_id, "--answer", "maybe")
    assert refused.returncode == 2 and "does not answer the question" in refused.stderr
    assert env.cli("answer", task_id, "--answer", "n").returncode == 0
    again = env.cli("answer", task_id, "--answer", "y")
    assert again.returncode == 2 and "asks nothing now" in again.stderr
    until(lambda: get(server, task_id)["status"] == "completed", what="the task to complete")
    assert out.read_bytes() == b"no\n"
