"""The HTTP binding's rules as pure functions, and the hub's request limit driven in memory (no socket)."""

from __future__ import annotations

from pathlib import Path

from tests.harness import until
from tests.httpharness import HttpServer
from tests.unit.protocol.test_http_binding import TOOLS


def test_a_routing_header_naming_another_task_acts_on_neither(tmp_path: Path) -> None:
    """A cancel whose Mcp-Name names task B and whose body names task A was executed on A: an
    intermediary routing on the header would have sent it to B's server."""
    tasks_caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    with HttpServer(TOOLS, tmp_path) as server:
        go = tmp_path / "go"
        ids = [server.modern("tools/call", {"name": "gated", "arguments": {"go": str(go)}},
                             caps=tasks_caps).final["result"]["taskId"] for _ in range(2)]
        for method in ("tasks/cancel", "tasks/get"):
            answer = server.modern(method, {"taskId": ids[0]}, caps=tasks_caps, headers={"mcp-name": ids[1]})
            assert (answer.status, answer.final["error"]["code"]) == (400, -32020), method
        for task_id in ids:
            assert server.modern("tasks/get", {"taskId": task_id}, caps=tasks_caps).final["result"]["status"] \
                == "working"
        cancelled = server.modern("tasks/cancel", {"taskId": ids[0]}, caps=tasks_caps)    # matching: acted on
        assert cancelled.status == 200 and "error" not in cancelled.final
        go.touch()
        until(lambda: server.modern("tasks/get", {"taskId": ids[1]}, caps=tasks_caps).final["result"]["status"]
              == "completed", "the other task to complete")
