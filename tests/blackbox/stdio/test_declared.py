"""What the server does not declare it does not serve (issue 24, class 8).

The spec (2025-11-25 server/prompts, resources, utilities/completion; 2026-07-28 alike): "Servers
that support prompts MUST declare the prompts capability", and so on for resources (subscribe
too), completions, logging and tasks. A method whose capability is absent from what the server
declared is "Method not found" (-32601; 404 over 2026-07-28 HTTP), in both eras, in the core and
over both transports; every method a declared capability covers is served.
"""

from __future__ import annotations

from pathlib import Path

from tests.harness import Server, modern_meta
from tests.httpharness import HttpServer
from tests.unit.protocol.test_core_declared import BARE, UNDECLARED


def test_over_stdio(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text(BARE)
    with Server(tools, tmp_path) as s:
        s.initialize("2025-11-25")
        s.notify("notifications/initialized")
        assert s.call("prompts/list", {})["error"]["code"] == -32601
        assert s.call("completion/complete", UNDECLARED["completion/complete"])["error"]["code"] == -32601
        modern = s.call("prompts/get", {**UNDECLARED["prompts/get"], "_meta": modern_meta()})
        assert modern["error"]["code"] == -32601


def test_over_http(tmp_path: Path) -> None:
    """2026-07-28 Streamable HTTP: "If the server does not implement the requested RPC method, it MUST
    respond with 404 Not Found and a JSON-RPC error with code -32601"."""
    tools = tmp_path / "tools.toml"
    tools.write_text(BARE)
    with HttpServer(tools, tmp_path) as server:
        for method in ("prompts/list", "prompts/get", "resources/read", "completion/complete"):
            answer = server.modern(method, UNDECLARED[method])
            assert (answer.status, answer.final["error"]["code"]) == (404, -32601), method
        server.initialize("2025-11-25")
        assert server.legacy("prompts/list").final["error"]["code"] == -32601
