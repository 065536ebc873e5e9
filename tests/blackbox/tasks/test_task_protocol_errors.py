"""`protocol_error_codes`: a command that ends with one of them is a JSON-RPC error, not an error result.
A plain call is answered with the error; a task ends `failed` with it inlined (2026-07-28 tasks extension,
SEP-2663: `failed` is for protocol errors, never with a `result`) or raised by tasks/result (2025-11-25);
any other failing status is still a `completed` task with an `isError` result."""

from __future__ import annotations

from tests.blackbox.tasks import test_tasks
from tests.blackbox.tasks.test_tasks import EXT, LEGACY, MODERN, Env, check, legacy_create, legacy_get, modern_get
from tests.harness import until

TOOLS = """
[tools.crashing]
shell = 'echo "cannot reach the backend" >&2; exit "$MCP_ARG_STATUS"'
task = "optional"
task_poll = "100ms"
protocol_error_codes = [2, 70]
args.status = { type = "string", enum = ["1", "2"] }
"""
env = test_tasks.env                      # the fixture: never a supervisor (or its command) left behind
ERROR = {"code": -32603, "message": "cannot reach the backend\n[crashing exited with status 2]",
         "data": {"exitCode": 2}}


def test_a_plain_call_that_ends_with_a_protocol_error_code_is_answered_with_the_error(env: Env) -> None:
    env.tools.write_text(TOOLS)
    for rev in (LEGACY, MODERN):
        server = env.server(rev)
        reply = server.request("tools/call", {"name": "crashing", "arguments": {"status": "2"}}, extension=False)
        check(rev, "JSONRPCErrorResponse", reply)
        assert reply["error"] == ERROR
        other = server.request("tools/call", {"name": "crashing", "arguments": {"status": "1"}}, extension=False)
        assert other["result"]["isError"] is True         # a status not in the list: an error result


def test_a_modern_task_that_ends_with_a_protocol_error_code_is_failed_with_the_error(env: Env) -> None:
    env.tools.write_text(TOOLS)
    server = env.server(MODERN)
    ids = {status: server.request("tools/call", {"name": "crashing", "arguments": {"status": status}})["result"]["taskId"]
           for status in ("1", "2")}
    failed = until(lambda: (r := modern_get(server, ids["2"]))["status"] != "working" and r, what="the task to end")
    check(EXT, "GetTaskResult", failed)
    assert failed["status"] == "failed" and failed["error"] == ERROR and "result" not in failed
    completed = until(lambda: (r := modern_get(server, ids["1"]))["status"] != "working" and r, what="the task to end")
    assert completed["status"] == "completed" and completed["result"]["isError"] is True and "error" not in completed


def test_a_2025_task_that_ends_with_a_protocol_error_code_raises_it_from_tasks_result(env: Env) -> None:
    env.tools.write_text(TOOLS)
    server = env.server(LEGACY)
    task_id = legacy_create(server, "crashing", {"status": "2"})
    until(lambda: legacy_get(server, task_id)["status"] == "failed", what="the task to fail")
    payload = server.request("tasks/result", {"taskId": task_id})
    check(LEGACY, "JSONRPCErrorResponse", payload)
    assert payload["error"] == ERROR
