"""406 Not Acceptable: a client must accept what Streamable HTTP may answer, checked before the body.

Every revision with Streamable HTTP (2025-03-26 .. 2026-07-28) says a POST's Accept lists both
application/json and text/event-stream (the server picks one per answer), and a legacy GET's
lists text/event-stream. The rule is HTTP's (RFC 9110 §12.5.1): the most specific matching
media range decides and q=0 refuses, so `*/*` is fine, and a request without an Accept header
accepts any media type (plain HTTP clients send none; the official SDKs always send both).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.protocol import http_binding as binding
from tests.harness import MODERN, modern_meta
from tests.httpharness import HttpServer, check, modern_headers

TOOLS = Path(__file__).parents[2] / "fixtures" / "http.toml"
BOTH = "application/json, text/event-stream"


@pytest.fixture
def server(tmp_path: Path) -> Any:
    with HttpServer(TOOLS, tmp_path) as running:
        yield running


@pytest.mark.parametrize("accept, media_type, allowed", [
    (BOTH, "application/json", True),
    (BOTH, "text/event-stream", True),
    ("*/*", "text/event-stream", True),
    ("application/*, text/*", "text/event-stream", True),
    ("Text/Event-Stream; q=0.5", "text/event-stream", True),
    ("application/json", "text/event-stream", False),
    ("text/html, application/xml", "application/json", False),
    ("text/*;q=0, */*", "text/event-stream", False),          # the more specific range wins
    ("text/event-stream;q=0, text/*", "text/event-stream", False),
    ("text/event-stream;q=nonsense", "text/event-stream", False),
    ("", "application/json", False),
])
def test_accepts_follows_rfc_9110(accept: str, media_type: str, allowed: bool) -> None:
    assert binding.accepts(accept, media_type) is allowed


def _raw(server: HttpServer, method: str, message: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps(message).encode() if message is not None else None
    conn, response = server.open(method, body, headers)
    try:
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _touch(marker: Path) -> tuple[dict[str, Any], dict[str, str]]:
    params = {"name": "touch", "arguments": {"path": str(marker)}, "_meta": modern_meta()}
    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
    return message, {"content-type": "application/json", **modern_headers("tools/call", params)}


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "application/json, text/*;q=0", ""])
def test_a_post_that_cannot_take_both_answer_forms_gets_406_and_runs_nothing(server: HttpServer, tmp_path: Path,
                                                                             accept: str) -> None:
    marker = tmp_path / "ran"
    message, headers = _touch(marker)
    status, got, body = _raw(server, "POST", message, headers | {"accept": accept})
    assert status == 406, body
    error = json.loads(body)
    check(MODERN, error, None)                        # a JSON-RPC error without an id
    assert "id" not in error and "application/json and text/event-stream" in error["error"]["message"]
    assert not marker.exists() and "mcp-session-id" not in got


@pytest.mark.parametrize("accept", [BOTH, "*/*", "application/*, text/*", None])
def test_a_post_that_takes_both_is_served(server: HttpServer, tmp_path: Path, accept: str | None) -> None:
    marker = tmp_path / "ran"
    message, headers = _touch(marker)
    status, _, body = _raw(server, "POST", message, headers | ({"accept": accept} if accept is not None else {}))
    assert status == 200 and json.loads(body)["result"]["isError"] is False
    assert marker.read_text() == "run\n"


def test_a_legacy_initialize_without_sse_in_accept_opens_no_session(server: HttpServer) -> None:
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    status, got, _ = _raw(server, "POST", message, {"content-type": "application/json", "accept": "application/json"})
    assert status == 406 and "mcp-session-id" not in got
    server.initialize()                               # the same request with a proper Accept starts one
    assert server.legacy("ping").final["result"] == {}


def test_a_get_must_accept_the_event_stream(server: HttpServer) -> None:
    server.initialize()
    assert server.session is not None
    session = {"mcp-session-id": server.session}
    status, _, body = _raw(server, "GET", None, session | {"accept": "application/json"})
    assert status == 406 and "text/event-stream" in json.loads(body)["error"]["message"]
    conn, response = server.open("GET", None, session | {"accept": "text/event-stream"})
    try:
        assert response.status == 200 and response.getheader("content-type") == "text/event-stream"
    finally:
        conn.close()


def test_delete_needs_no_accept(server: HttpServer) -> None:
    server.initialize()
    assert server.session is not None
    status, _, _ = _raw(server, "DELETE", None, {"mcp-session-id": server.session})
    assert status == 204
    assert server.legacy("ping").status == 404
