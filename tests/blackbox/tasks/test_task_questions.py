"""A running task's question parks the task in `input_required` and the answer reaches the command's stdin
byte for byte, exactly once, from any server process sharing the store. 2026-07-28 tasks extension: the
question is in `inputRequests` and `tasks/update` brings the answer. 2025-11-25 tasks: the session waiting
on `tasks/result` is sent the question as `elicitation/create` tagged with the task (related-task), and
its response is the answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.blackbox.tasks.test_tasks import EXT, EXT_ID, LEGACY, MODERN, Env, Server, check, legacy_get
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

[tools.name]
shell = '''printf 'Name: '; head -n 1 > "$MCP_ARG_OUT"; printf 'done\\n' '''
task = "optional"
task_poll = "100ms"
args.out = { type = "string" }
ask = [{ prompt = 'Name: $', message = "Which name?", answer = { type = "string" }, send = "{value}\\n" }]
ask_quiet = "50ms"
ask_timeout = "1s"
"""
RELATED = "io.modelcontextprotocol/related-task"
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


# --- 2025-11-25 tasks: the question is relayed to the session waiting on tasks/result --------------
def legacy_session(env: Env) -> Server:
    """A 2025-11-25 session whose client declared elicitation."""
    server = Server(env, LEGACY)
    reply = server.request("initialize", {"protocolVersion": LEGACY, "capabilities": {"elicitation": {}},
                                          "clientInfo": {"name": "test", "version": "1"}})
    assert reply["result"]["protocolVersion"] == LEGACY
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return server


def legacy_parked(env: Env, out: Path, tool: str = "apply", server_table: str = "") -> tuple[Server, str]:
    """A 2025-11-25 task (made in such a session) parked on its command's question."""
    env.tools.write_text(server_table + TOOLS)
    server = legacy_session(env)
    created = server.request("tools/call", {"name": tool, "arguments": {"out": str(out)}, "task": {"ttl": 60000}})
    task_id = created["result"]["task"]["taskId"]
    until(lambda: legacy_get(server, task_id)["status"] == "input_required", what="the task to park")
    return server, task_id


def relayed(server: Server, task_id: str) -> tuple[int, dict[str, Any]]:
    """tasks/result started, and the question it brings (the elicitation/create request)."""
    waiting = server.start("tasks/result", {"taskId": task_id})
    asked = server.next(lambda m: m.get("method") == "elicitation/create")
    assert asked["params"]["_meta"][RELATED] == {"taskId": task_id}
    return waiting, asked


def respond(server: Server, asked: dict[str, Any], value: Any) -> None:
    server.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"answer": value}}})


def test_a_2025_task_relays_its_question_on_tasks_result_and_goes_on_with_the_answer(env: Env, tmp_path: Path) -> None:
    out = tmp_path / "received"
    server, task_id = legacy_parked(env, out)
    waiting, asked = relayed(server, task_id)
    assert asked["params"]["message"] == "Apply this plan?\n\nPlan: 1 to add."
    respond(server, asked, True)
    result = server.answer(waiting)["result"]
    assert result["content"][0]["text"].endswith("done\n") and not result.get("isError")
    assert result["_meta"][RELATED] == {"taskId": task_id}
    assert out.read_bytes() == b"yes\n"
    assert legacy_get(server, task_id)["status"] == "completed"


def test_two_2025_sessions_answering_the_same_relayed_question_answer_it_once(env: Env, tmp_path: Path) -> None:
    out = tmp_path / "received"
    first, task_id = legacy_parked(env, out)
    second = legacy_session(env)
    (first_waiting, first_asked), (second_waiting, second_asked) = relayed(first, task_id), relayed(second, task_id)
    respond(first, first_asked, True)
    until(lambda: env.store.read(task_id).status != "input_required", what="the first answer to be taken")
    respond(second, second_asked, False)
    for server, waiting in ((first, first_waiting), (second, second_waiting)):
        assert not server.answer(waiting)["result"].get("isError")
    assert out.read_bytes() == b"yes\n"


def test_a_2025_relayed_answer_with_a_newline_or_an_escape_is_refused_and_nothing_is_written(
        env: Env, tmp_path: Path) -> None:
    out = tmp_path / "received"
    server, task_id = legacy_parked(env, out, "name")
    waiting, asked = relayed(server, task_id)
    respond(server, asked, "alice\nrm -rf ~\x1b[2J")
    result = server.answer(waiting)["result"]
    assert result["isError"] and "holds a newline or another control character" in result["content"][0]["text"]
    assert out.read_bytes() == b""


def test_a_2025_task_whose_relayed_question_is_never_answered_ends_at_ask_timeout(env: Env, tmp_path: Path) -> None:
    out = tmp_path / "received"
    server, task_id = legacy_parked(env, out, "name")
    waiting, _ = relayed(server, task_id)
    result = server.answer(waiting)["result"]
    assert result["isError"] and "no answer came within 1s" in result["content"][0]["text"]
    assert out.read_bytes() == b""


def test_a_task_s_questions_count_in_its_creator_s_audit_trail_never_their_answers(env: Env, tmp_path: Path) -> None:
    trail = tmp_path / "audit.jsonl"
    server, task_id = legacy_parked(env, tmp_path / "received", "name", f"[server]\naudit = '{trail}'\n")
    waiting, asked = relayed(server, task_id)
    respond(server, asked, "secret-name")
    assert not server.answer(waiting)["result"].get("isError")
    lines = [json.loads(line) for line in trail.read_text().splitlines()]
    questions = [(r["event"], r.get("prompt"), r.get("answer")) for r in lines if r["event"].startswith("question.")]
    assert questions == [("question.asked", "Name: ", None), ("question.answered", None, "accept")]
    assert "secret-name" not in trail.read_text()
