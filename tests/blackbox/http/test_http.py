"""`mcpwrap serve --http`: both eras over Streamable HTTP, against a real server process.

Modern POSTs: mirrored headers checked against the body, errors with the spec's HTTP
statuses, JSON or SSE answers, a closed response cancelling its call, MRTR. Legacy:
sessions (random id, 404 once ended), SSE progress, elicitation on the POST's stream.
Security: Origin/Host (DNS rebinding), bearer tokens, the refusal to expose tools, per-client
rate limits (429), TLS with a certificate made for the test.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import re
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import procs
from tests.harness import HANG_S, MODERN, mcpwrap_cmd, modern_meta, until, write_atomically
from tests.httpharness import HttpServer, check, modern_headers, read_sse

TOOLS = Path(__file__).parents[2] / "fixtures" / "http.toml"


@pytest.fixture
def server(tmp_path: Path) -> Any:
    with HttpServer(TOOLS, tmp_path) as running:
        yield running


# --- 2026-07-28 ---------------------------------------------------------------------------
def test_modern_call_is_answered_as_json(server: HttpServer) -> None:
    answer = server.modern("tools/call", {"name": "echo", "arguments": {"msg": "hi"}})
    assert answer.status == 200 and answer.headers["content-type"] == "application/json"
    assert answer.final["result"]["content"][0]["text"] == "hi\n"
    assert "mcp-session-id" not in answer.headers            # modern: no sessions minted


@pytest.mark.parametrize("change, fragment", [
    ({"mcp-protocol-version": None}, "required header MCP-Protocol-Version is missing"),
    ({"mcp-protocol-version": "2025-11-25"}, "MCP-Protocol-Version header value"),
    ({"mcp-method": None}, "required header Mcp-Method is missing"),
    ({"mcp-method": "tools/list"}, "Mcp-Method header value 'tools/list'"),
    ({"mcp-name": None}, "required header Mcp-Name is missing"),
    ({"mcp-name": "touch"}, "Mcp-Name header value 'touch'"),
    ({"mcp-name": "=?base64?!!!?="}, "Mcp-Name header is malformed"),
])
def test_modern_header_mismatch_is_400_and_runs_nothing(server: HttpServer, tmp_path: Path,
                                                       change: dict[str, str | None], fragment: str) -> None:
    marker = tmp_path / "ran"
    params = {"name": "touch", "arguments": {"path": str(marker)}}
    headers = {k: v for k, v in {**modern_headers("tools/call", params), "mcp-name": "touch", **change}.items()
               if v is not None}
    if change.get("mcp-name") == "touch":                   # the body names another tool than the header
        params = {"name": "echo", "arguments": {"msg": "x"}}
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {**params, "_meta": modern_meta()}}
    answer = server.send(message, headers, MODERN, raw=json.dumps(message).encode())
    assert answer.status == 400, answer
    assert answer.final["error"]["code"] == -32020 and answer.final["id"] == 7
    assert fragment in answer.final["error"]["message"]
    assert not marker.exists()


def test_mcp_name_may_be_base64_encoded(server: HttpServer) -> None:
    encoded = "=?base64?" + base64.b64encode(b"echo").decode() + "?="
    answer = server.modern("tools/call", {"name": "echo", "arguments": {"msg": "b64"}}, headers={"mcp-name": encoded})
    assert answer.status == 200 and answer.final["result"]["content"][0]["text"] == "b64\n"


@pytest.mark.parametrize("method, params, meta, status, code", [
    ("nosuch/method", {}, {}, 404, -32601),
    ("tools/call", {"name": "gated", "arguments": {"go": "/nonexistent"}}, {}, 400, -32021),
    ("tools/call", {"name": "create", "arguments": {"path": "/nonexistent"}}, {}, 400, -32021),
    ("tools/call", {"name": "nosuch", "arguments": {}}, {}, 400, -32602),
])
def test_modern_errors_carry_the_spec_status(server: HttpServer, method: str, params: dict[str, Any],
                                             meta: dict[str, Any], status: int, code: int) -> None:
    answer = server.modern(method, params, **meta)
    assert (answer.status, answer.final["error"]["code"]) == (status, code), answer


def test_modern_unsupported_version_is_400_with_the_supported_list(server: HttpServer) -> None:
    params = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                        "io.modelcontextprotocol/clientCapabilities": {}}}
    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": params}
    answer = server.send(message, {"mcp-protocol-version": "2099-01-01", "mcp-method": "tools/list"}, MODERN)
    assert answer.status == 400 and answer.final["error"]["code"] == -32022
    assert MODERN in answer.final["error"]["data"]["supported"]


def test_modern_progress_and_logs_stream_as_sse(server: HttpServer) -> None:
    answer = server.modern("tools/call", {"name": "slow", "arguments": {}}, progressToken="p1",
                           **{"io.modelcontextprotocol/logLevel": "info"})
    assert answer.status == 200 and answer.headers["content-type"] == "text/event-stream"
    assert answer.headers["x-accel-buffering"] == "no"
    progress = [m["params"]["progress"] for m in answer.messages if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3]
    assert any(m.get("method") == "notifications/message" for m in answer.messages)
    assert answer.final["result"]["content"][0]["text"] == "finished\n"


def test_closing_a_modern_response_cancels_its_call(server: HttpServer) -> None:
    secs = f"600.{os.getpid() % 1000000:06d}"          # far beyond any hang guard
    params = {"name": "sleeper", "arguments": {"secs": secs}}
    params["_meta"] = modern_meta()
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    conn = http.client.HTTPConnection(server.host, server.port, timeout=HANG_S)
    conn.request("POST", server.path, body, {"content-type": "application/json",
                                             **modern_headers("tools/call", params)})
    until(lambda: len(procs.with_cmdline(secs)) >= 2, "the tool and its grandchild to start")
    conn.close()                                             # the client goes away: that is the cancellation
    until(lambda: not procs.with_cmdline(secs), "the tool's process group to be killed")


def test_modern_confirmation_round_trip(server: HttpServer, tmp_path: Path) -> None:
    marker = tmp_path / "made"
    params = {"name": "create", "arguments": {"path": str(marker)}}
    caps = {"elicitation": {"form": {}}}
    first = server.modern("tools/call", params, caps=caps)
    assert first.status == 200 and first.final["result"]["resultType"] == "input_required"
    (key,) = first.final["result"]["inputRequests"]
    retry = {**params, "requestState": first.final["result"]["requestState"],
             "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
    second = server.modern("tools/call", retry, id=2, caps=caps)
    assert second.final["result"]["resultType"] == "complete", second.final
    assert marker.read_text() == "run\n"


# --- legacy sessions ----------------------------------------------------------------------
def test_initialize_opens_a_session_with_a_random_visible_id(server: HttpServer) -> None:
    first = server.initialize("2025-11-25").headers["mcp-session-id"]
    second = server.initialize("2025-06-18").headers["mcp-session-id"]
    for sid in (first, second):
        assert re.fullmatch(r"[\x21-\x7e]{32,}", sid)
    assert first != second

    def gated() -> dict[str, Any]:
        return next(t for t in server.legacy("tools/list").final["result"]["tools"] if t["name"] == "gated")

    assert "execution" not in gated()                         # 2025-06-18 has no tasks
    server.session, server.rev = first, "2025-11-25"           # each session kept its own revision
    assert gated()["execution"] == {"taskSupport": "required"}


def test_session_rules_missing_unknown_and_deleted(server: HttpServer) -> None:
    missing = server.legacy("tools/list")
    assert missing.status == 400
    server.session = "no-such-session"
    assert server.legacy("tools/list").status == 404
    server.initialize()
    assert server.send(None, method="DELETE").status == 204
    assert server.legacy("tools/list").status == 404           # ended: the client must initialize again
    assert server.send(None, method="DELETE").status == 404


def test_legacy_progress_streams_on_the_posts_sse(server: HttpServer) -> None:
    server.initialize()
    answer = server.legacy("tools/call", {"name": "slow", "arguments": {}, "_meta": {"progressToken": 5}})
    assert answer.headers["content-type"] == "text/event-stream"
    assert [m["params"]["progress"] for m in answer.messages[:-1]] == [1, 2, 3]
    assert answer.final["result"]["content"][0]["text"] == "finished\n"


def test_legacy_elicitation_on_the_posts_stream_answered_by_another_post(server: HttpServer) -> None:
    server.initialize(capabilities={"elicitation": {}})
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                       "params": {"name": "greet", "arguments": {}}}).encode()
    conn, response = server.open("POST", body, {"content-type": "application/json",
                                                "mcp-session-id": server.session or ""})
    assert response.getheader("content-type") == "text/event-stream"

    def answer(message: dict[str, Any]) -> None:
        check(server.rev, message, "tools/call" if "id" in message and "method" not in message else None)
        if message.get("method") == "elicitation/create":
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "result": {"action": "accept", "content": {"name": "Ada"}}}
            assert server.send(reply).status == 202

    messages = read_sse(response, answer)
    conn.close()
    assert messages[0]["method"] == "elicitation/create"
    assert messages[-1]["result"]["content"][0]["text"] == "hello Ada\n"


def test_a_modern_request_ignores_the_session_header(server: HttpServer) -> None:
    server.initialize()
    answer = server.modern("tools/list")
    assert answer.status == 200 and answer.final["result"]["resultType"] == "complete"


def test_get_and_delete_without_a_session_are_405(server: HttpServer) -> None:
    assert server.send(None, method="GET").status == 405
    assert server.send(None, method="DELETE").status == 405
    assert server.send(None, method="PUT").status == 405


# --- security and limits ------------------------------------------------------------------
@pytest.mark.parametrize("headers, status", [
    ({"origin": "http://evil.example"}, 403),
    ({"origin": "http://localhost:1234"}, 200),
    ({"host": "evil.example"}, 403),
    ({"host": "localhost:9"}, 200),
])
def test_origin_and_host_are_checked_against_dns_rebinding(server: HttpServer, tmp_path: Path,
                                                          headers: dict[str, str], status: int) -> None:
    marker = tmp_path / "ran"
    answer = server.modern("tools/call", {"name": "touch", "arguments": {"path": str(marker)}}, headers=headers)
    assert answer.status == status
    assert marker.exists() == (status == 200)


def test_an_allowed_origin_may_call(tmp_path: Path) -> None:
    with HttpServer(TOOLS, tmp_path, "--allowed-origin", "https://app.example") as server:
        assert server.modern("tools/list", headers={"origin": "https://app.example"}).status == 200
        assert server.modern("tools/list", headers={"origin": "http://localhost"}).status == 403


def _token_file(tmp_path: Path, *tokens: str, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    path.write_text("# rotation: old and new\n" + "\n".join(tokens) + "\n")
    path.chmod(mode)
    return path


def test_bearer_tokens(tmp_path: Path) -> None:
    tokens = _token_file(tmp_path, "old-token-0123456789", "new-token-0123456789")
    marker = tmp_path / "ran"
    call = {"name": "touch", "arguments": {"path": str(marker)}}
    with HttpServer(TOOLS, tmp_path, "--token-file", str(tokens)) as server:
        for header in (None, "Bearer wrong-token-0123456789", "Basic old-token-0123456789"):
            answer = server.modern("tools/call", call, headers={"authorization": header} if header else None)
            assert answer.status == 401 and answer.headers["www-authenticate"].startswith("Bearer")
        assert not marker.exists()                            # nothing ran without the token
        for token in ("old-token-0123456789", "new-token-0123456789"):
            answer = server.modern("tools/call", call, headers={"authorization": f"Bearer {token}"})
            assert answer.status == 200
        assert marker.read_text() == "run\nrun\n"


def _refused(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpwrap_cmd("serve", str(TOOLS), "--secret-file", str(tmp_path / "s"), "--state-dir",
                                      str(tmp_path / "st"), *args),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=HANG_S)


def test_a_non_loopback_bind_without_auth_refuses_to_start(tmp_path: Path) -> None:
    done = _refused(tmp_path, "--http", "0.0.0.0:0")
    assert done.returncode != 0
    assert "without authentication" in done.stderr and "--token-file" in done.stderr


def test_a_token_file_others_can_read_refuses_to_start(tmp_path: Path) -> None:
    done = _refused(tmp_path, "--http", "127.0.0.1:0", "--token-file",
                    str(_token_file(tmp_path, "a-long-enough-token-123", mode=0o644)))
    assert done.returncode != 0 and "chmod 600" in done.stderr


def test_an_oversized_body_is_413(server: HttpServer) -> None:
    answer = server.send(None, raw=b"[" + b" " * (4 * 1024 * 1024 + 1) + b"]")
    assert answer.status == 413


def test_a_non_json_body_is_415_and_bad_json_is_400(server: HttpServer) -> None:
    assert server.send(None, raw=b"{}", headers={"content-type": "text/plain"}).status == 415
    answer = server.send(None, raw=b"{not json")
    assert answer.status == 400 and answer.final["error"]["code"] == -32700


def test_sigterm_ends_the_server(tmp_path: Path) -> None:
    assert HttpServer(TOOLS, tmp_path).close() == 0


def test_deleting_a_session_cancels_its_calls(server: HttpServer) -> None:
    """A legacy disconnect is no cancellation (2025-11-25), but the end of the session is."""
    server.initialize()
    secs = f"601.{os.getpid() % 1000000:06d}"
    body = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                       "params": {"name": "sleeper", "arguments": {"secs": secs}}}).encode()
    conn = http.client.HTTPConnection(server.host, server.port, timeout=HANG_S)
    conn.request("POST", server.path, body, {"content-type": "application/json", "mcp-session-id": server.session or ""})
    until(lambda: len(procs.with_cmdline(secs)) >= 2, "the tool and its grandchild to start")
    conn.close()
    assert server.send(None, method="DELETE").status == 204
    until(lambda: not procs.with_cmdline(secs), "the session's call to be killed")


def _stream(server: HttpServer, body: dict[str, Any] | None, headers: dict[str, str],
            method: str = "POST") -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    return server.open(method, json.dumps(body).encode() if body is not None else None, headers)


def _next_event(response: http.client.HTTPResponse) -> dict[str, Any]:
    """The next SSE message on an open stream (keep-alive comments skipped, which reset no deadline)."""
    data: list[str] = []
    deadline = time.monotonic() + HANG_S
    while True:
        line = response.readline()
        assert line, "the stream ended"
        assert time.monotonic() < deadline, "no message within the hang guard"
        text = line.decode().rstrip("\r\n")
        if text.startswith("data:"):
            data.append(text[5:].lstrip(" "))
        elif not text and data:
            return json.loads("\n".join(data))


def test_modern_listen_is_a_long_sse_response(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text(TOOLS.read_text())
    with HttpServer(tools, tmp_path) as server:
        params = {"notifications": {"toolsListChanged": True}, "_meta": modern_meta()}
        body = {"jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen", "params": params}
        conn, response = _stream(server, body, {"content-type": "application/json",
                                                **modern_headers("subscriptions/listen", params)})
        assert response.getheader("content-type") == "text/event-stream"
        ack = _next_event(response)
        check(MODERN, ack, None)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        write_atomically(tools, TOOLS.read_text() + '\n[tools.extra]\ncommand = ["true"]\n')
        changed = _next_event(response)
        check(MODERN, changed, None)
        assert changed["method"] == "notifications/tools/list_changed"
        assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "l1"
        conn.close()


def test_a_sessions_get_stream_carries_list_changes(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text(TOOLS.read_text())
    with HttpServer(tools, tmp_path) as server:
        server.initialize()
        conn, response = _stream(server, None, {"accept": "text/event-stream", "mcp-session-id": server.session or ""},
                                 "GET")
        assert response.status == 200 and response.getheader("content-type") == "text/event-stream"
        write_atomically(tools, TOOLS.read_text() + '\n[tools.extra]\ncommand = ["true"]\n')
        changed = _next_event(response)
        check(server.rev, changed, None)
        assert changed["method"] == "notifications/tools/list_changed"
        conn.close()


def test_an_unsupported_protocol_version_header_is_400(server: HttpServer) -> None:
    server.initialize("2025-11-25")
    refused = server.send({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, {"mcp-protocol-version": "1999-01-01"})
    assert refused.status == 400 and "1999-01-01" in refused.final["error"]["message"]
    assert server.send({"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
                       {"mcp-protocol-version": "2025-11-25"}).status == 200


def test_a_2025_03_26_batch_is_answered_as_one_array(server: HttpServer) -> None:
    server.initialize("2025-03-26")
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"msg": "b"}}}]
    answer = server.send(batch, rev="2025-03-26")
    assert answer.status == 200 and answer.headers["content-type"] == "application/json"
    (array,) = answer.messages
    assert sorted(m["id"] for m in array) == [1, 2]
    assert next(m for m in array if m["id"] == 2)["result"]["content"][0]["text"] == "b\n"


def test_a_batch_whose_first_answer_refuses_a_broken_item_reaches_its_post(server: HttpServer) -> None:
    """The refusal of an item that is no request (its id echoed) goes first in the batch's array:
    the array still goes to the POST that waits for the batch's request, which it ends."""
    server.initialize("2025-03-26")
    batch = [{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": 5},
             {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]
    answer = server.send(batch, rev="2025-03-26")
    assert answer.status == 200
    (array,) = answer.messages
    assert [m["id"] for m in array] == [9, 1] and array[0]["error"]["code"] == -32600 and "tools" in array[1]["result"]


@pytest.mark.parametrize("text", ["0", "-1", "x", "5/0", "5/", "nan", "inf/3"])
def test_a_malformed_rate_is_a_usage_error(tmp_path: Path, text: str) -> None:
    done = _refused(tmp_path, "--http", "127.0.0.1:0", "--rate", text)
    assert done.returncode == 2 and "--rate wants R[/B]" in done.stderr


@pytest.mark.parametrize("flag", ["--body-timeout", "--send-timeout"])
@pytest.mark.parametrize("text", ["0", "-1", "x", "0.0001", "25h", "\u0661"])
def test_a_malformed_timeout_is_a_usage_error(tmp_path: Path, flag: str, text: str) -> None:
    done = _refused(tmp_path, "--http", "127.0.0.1:0", flag, text)
    assert done.returncode == 2 and f"{flag} wants a duration" in done.stderr


@pytest.mark.parametrize("flag", [("--rate", "5"), ("--body-timeout", "5"), ("--send-timeout", "5")])
def test_http_only_flags_without_http_are_a_usage_error(tmp_path: Path, flag: tuple[str, str]) -> None:
    done = _refused(tmp_path, *flag)
    assert done.returncode == 2 and "apply only with --http" in done.stderr


def _touches(marker: Path) -> int:
    return marker.read_text().count("run") if marker.exists() else 0


def test_past_its_burst_a_client_gets_429_and_nothing_runs(tmp_path: Path) -> None:
    """A rate so slow (one a 1,000 s) that the 3rd request is over a burst of 2 however fast the machine is."""
    marker = tmp_path / "ran"
    call = {"name": "touch", "arguments": {"path": str(marker)}}
    with HttpServer(TOOLS, tmp_path, "--rate", "0.001/2") as server:
        assert [server.modern("tools/call", call).status for _ in range(2)] == [200, 200]
        refused = server.modern("tools/call", call)
        assert refused.status == 429 and refused.final["error"]["code"] == -32600
        assert 900 <= int(refused.headers["retry-after"]) <= 1000
        assert _touches(marker) == 2


def test_rates_are_per_token_and_per_legacy_session(tmp_path: Path) -> None:
    tokens = _token_file(tmp_path, "token-a-0123456789", "token-b-0123456789")
    marker = tmp_path / "ran"
    call = {"name": "touch", "arguments": {"path": str(marker)}}
    a, b = ({"authorization": f"Bearer token-{x}-0123456789"} for x in "ab")
    with HttpServer(TOOLS, tmp_path, "--token-file", str(tokens), "--rate", "0.001/2") as server:
        assert [server.modern("tools/call", call, headers=a).status for _ in range(3)] == [200, 200, 429]
        assert server.modern("tools/call", call, headers=b).status == 200      # token b has a bucket of its own
        opened = server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, b)
        assert opened.status == 200                                           # token b's 2nd and last
        assert server.modern("tools/call", call, headers=b).status == 429
        server.session = opened.headers["mcp-session-id"]                     # the session counts on its own
        assert server.send({"jsonrpc": "2.0", "method": "notifications/initialized"}, b).status == 202
        assert server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, b).status == 200
        assert server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, b).status == 429
        assert _touches(marker) == 4


# --- TLS (--certfile, --keyfile) ----------------------------------------------------------
@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, made by openssl for this test."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: no certificate to test TLS with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=HANG_S)
    return cert, key


@contextlib.contextmanager
def _tls_server(tmp_path: Path, cert: Path, key: Path) -> Iterator[tuple[str, int]]:
    """A `serve --http --certfile --keyfile` on a port it picks, named on stderr as https://HOST:PORT/mcp."""
    proc = subprocess.Popen(mcpwrap_cmd("serve", str(TOOLS), "--http", "127.0.0.1:0", "--certfile", str(cert),
                                        "--keyfile", str(key), "--secret-file", str(tmp_path / "s"),
                                        "--state-dir", str(tmp_path / "st")),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stderr is not None
    seen: list[str] = []
    pump = threading.Thread(target=lambda: seen.extend(proc.stderr or ()), daemon=True)
    pump.start()
    try:
        found = until(lambda: next(filter(None, (re.search(r" on https://(\S+?):(\d+)/mcp", x) for x in seen)), None)
                      or proc.poll() is not None, lambda: "the server to listen on https; stderr:\n" + "".join(seen))
        assert isinstance(found, re.Match), "".join(seen)
        yield found.group(1), int(found.group(2))
    finally:
        proc.terminate()
        assert proc.wait(HANG_S) == 0
        pump.join(HANG_S)


def test_tls_serves_https_with_the_given_certificate(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    params = {"name": "echo", "arguments": {"msg": "tls"}, "_meta": modern_meta()}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    headers = {"content-type": "application/json", **modern_headers("tools/call", params)}
    with _tls_server(tmp_path, cert, key) as (host, port):
        trusting = ssl.create_default_context(cafile=str(cert))               # verifies chain and host name
        conn = http.client.HTTPSConnection(host, port, context=trusting, timeout=HANG_S)
        conn.request("POST", "/mcp", body, headers)
        answer = conn.getresponse()
        assert answer.status == 200
        assert json.loads(answer.read())["result"]["content"][0]["text"] == "tls\n"
        conn.close()
        stranger = http.client.HTTPSConnection(host, port, context=ssl.create_default_context(), timeout=HANG_S)
        with pytest.raises(ssl.SSLCertVerificationError):                     # it is this certificate, not another
            stranger.request("POST", "/mcp", body, headers)
        plain = http.client.HTTPConnection(host, port, timeout=HANG_S)
        with pytest.raises((http.client.HTTPException, OSError)):             # plain HTTP to a TLS port: no answer
            plain.request("POST", "/mcp", body, headers)
            plain.getresponse()


def test_tls_does_not_replace_authentication(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    done = _refused(tmp_path, "--http", "0.0.0.0:0", "--certfile", str(cert), "--keyfile", str(key))
    assert done.returncode != 0 and "without authentication" in done.stderr and "--token-file" in done.stderr


def test_a_certificate_that_cannot_serve_refuses_to_start(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, _ = certificate
    done = _refused(tmp_path, "--http", "127.0.0.1:0", "--certfile", str(cert), "--keyfile", str(cert))
    assert done.returncode != 0 and "cannot serve TLS" in done.stderr
    done = _refused(tmp_path, "--http", "127.0.0.1:0", "--certfile", str(cert))
    assert done.returncode == 2 and "--certfile and --keyfile go together" in done.stderr
