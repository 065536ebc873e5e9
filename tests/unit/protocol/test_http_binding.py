"""The HTTP binding's rules as pure functions, and the hub's request limit driven in memory (no socket)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mcpwrap.config import load as config_module
from mcpwrap.serve.http import Hub
from mcpwrap.serve.http_gate import HttpOptions, exposure_problem, parse_address
from mcpwrap.protocol.jsonrpc import Request
from mcpwrap.protocol import http_binding as binding
from mcpwrap.serve.common import Options
from tests.harness import modern_meta

TOOLS = Path(__file__).parents[2] / "fixtures" / "http.toml"
HEADERS = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"}


def _call(name: Any = "echo") -> Request:
    return Request(1, "tools/call", {"name": name, "arguments": {}, "_meta": modern_meta()})


def test_matching_headers_pass_and_each_disagreement_is_32020() -> None:
    assert binding.check_modern_headers(HEADERS, _call()) is None
    for name in HEADERS:
        assert binding.check_modern_headers({**HEADERS, name: "x"}, _call()).code == -32020  # type: ignore[union-attr]
        rest = {k: v for k, v in HEADERS.items() if k != name}
        assert binding.check_modern_headers(rest, _call()).code == -32020  # type: ignore[union-attr]


def test_mcp_name_is_only_required_where_the_spec_mirrors_a_name() -> None:
    listing = Request(1, "tools/list", {"_meta": modern_meta()})
    assert binding.check_modern_headers({**HEADERS, "mcp-method": "tools/list"}, listing) is None


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_task_requests_mirror_their_task_id_in_mcp_name(method: str) -> None:
    """Tasks extension, "Streamable HTTP: Routing Headers": tasks/get, tasks/update and tasks/cancel
    MUST carry Mcp-Name = params.taskId; a missing or disagreeing one is -32020 like any other."""
    request = Request(1, method, {"taskId": "t-a", "_meta": modern_meta()})
    headers = {**HEADERS, "mcp-method": method, "mcp-name": "t-a"}
    assert binding.check_modern_headers(headers, request) is None
    assert binding.check_modern_headers({**headers, "mcp-name": "t-b"}, request).code == -32020  # type: ignore[union-attr]
    rest = {k: v for k, v in headers.items() if k != "mcp-name"}
    assert binding.check_modern_headers(rest, request).code == -32020  # type: ignore[union-attr]


def test_base64_sentinel_values() -> None:
    encoded = "=?base64?" + base64.b64encode("Grüße".encode()).decode() + "?="
    assert binding.decode_value(encoded) == "Grüße"
    assert binding.check_modern_headers({**HEADERS, "mcp-name": encoded}, _call("Grüße")) is None
    assert binding.decode_value("=?base64?%%%?=") is None
    assert binding.decode_value("tab\there") is None          # not visible ASCII
    assert binding.decode_value("  padded ") == "padded"


def test_status_mapping() -> None:
    def error(code: int) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m"}}

    assert [binding.status_of(error(c), True) for c in (-32601, -32602, -32020, -32021, -32022, -32603, -32000)] == \
        [404, 400, 400, 400, 400, 500, 200]
    assert binding.status_of(error(-32601), False) == 200      # legacy errors travel with 200
    assert binding.status_of({"jsonrpc": "2.0", "id": 1, "result": {}}, True) == 200


def test_origin_and_host_rules() -> None:
    assert binding.origin_refusal(None, []) is None
    assert binding.origin_refusal("http://127.0.0.1:3000", []) is None
    assert binding.origin_refusal("http://[::1]", []) is None
    assert binding.origin_refusal("http://localhost.evil.example", []).status == 403  # type: ignore[union-attr]
    assert binding.origin_refusal("https://app.example/", ["https://app.example"]) is None
    assert binding.origin_refusal("http://localhost", ["https://app.example"]) is not None
    assert binding.host_refusal("localhost:8000", True, []) is None
    assert binding.host_refusal("[::1]:8000", True, []) is None
    assert binding.host_refusal("rebound.example:8000", True, []).status == 403  # type: ignore[union-attr]
    assert binding.host_refusal("app.example", True, ["https://app.example"]) is None
    assert binding.host_refusal("anything.example", False, []) is None


def test_bearer_tokens_and_token_files() -> None:
    tokens = binding.parse_tokens("# old first\nold-0123456789abcdef\n\n  new-0123456789abcdef  \n"
                                  "ci: ci-0123456789abcdef\n")
    assert tokens == [binding.Token(b"old-0123456789abcdef"), binding.Token(b"new-0123456789abcdef"),
                      binding.Token(b"ci-0123456789abcdef", "ci")]
    match = binding.token_match
    assert match(binding.presented("Bearer new-0123456789abcdef") or b"", tokens) == tokens[1]
    assert match(binding.presented("bearer ci-0123456789abcdef") or b"", tokens) == tokens[2]
    assert match(b"ci: ci-0123456789abcdef", tokens) is None
    for header in (None, "Basic new-0123456789abcdef", "Bearer "):
        assert binding.presented(header) is None
    assert match(b"nope", tokens) is None and match(b"anything", []) is None
    refusal = binding.unauthorized("invalid_token")
    assert refusal.status == 401 and dict(refusal.headers)["www-authenticate"] == (
        'Bearer realm="mcpwrap", error="invalid_token"')
    refusal = binding.unauthorized("insufficient_scope", "https://h/.well-known/oauth-protected-resource/mcp",
                                   ["mcp", "deploy"])
    assert refusal.status == 403 and dict(refusal.headers)["www-authenticate"] == (
        'Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", '
        'error="insufficient_scope", scope="mcp deploy"')


def test_addresses_and_exposure() -> None:
    assert parse_address("8080") == ("127.0.0.1", 8080)
    assert parse_address("0.0.0.0:0") == ("0.0.0.0", 0)
    assert parse_address("[::1]:9") == ("::1", 9)
    assert exposure_problem(HttpOptions("127.0.0.1", 1)) is None
    assert exposure_problem(HttpOptions("::1", 1)) is None
    assert "without authentication" in (exposure_problem(HttpOptions("0.0.0.0", 1)) or "")
    assert exposure_problem(HttpOptions("0.0.0.0", 1, token_file=Path("t"))) is None
    assert exposure_problem(HttpOptions("0.0.0.0", 1, insecure_no_auth=True)) is None


def test_requests_past_the_limit_get_503(tmp_path: Path) -> None:
    """One exchange in progress, a limit of one: the next is refused at once once its body is whole
    (a body in transit holds no slot; `--body-timeout` bounds it), before anything is decoded."""
    config = config_module.load(TOOLS)
    hub = Hub(config, Options(tmp_path / "secret", tmp_path / "state", watch=False),
              HttpOptions("127.0.0.1", 0, max_exchanges=1))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"content-type", b"application/json"),
                                                                    (b"host", b"127.0.0.1")]}
    gone = trio.Event()
    sent: list[dict[str, Any]] = []

    async def hold() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def garbage() -> dict[str, Any]:
        return {"type": "http.request", "body": b"not even JSON", "more_body": False}   # 503 comes first

    async def record(event: dict[str, Any]) -> None:
        sent.append(event)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            hub.nursery = nursery
            nursery.start_soon(hub, {**scope, "method": "GET"}, hold, record)   # not a session: answered 405 at once
            await trio.testing.wait_all_tasks_blocked()
            assert sent[0]["status"] == 405 and hub.exchanges == 0
            sent.clear()
            body = iter([{"type": "http.request", "body": b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
                          b'{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}',
                          "more_body": False}])

            async def first() -> dict[str, Any]:
                return next(body, None) or await hold()

            async def stalled_send(event: dict[str, Any]) -> None:
                await gone.wait()                       # a client that does not read its answer

            nursery.start_soon(hub, scope, first, stalled_send)
            await trio.testing.wait_all_tasks_blocked()
            assert hub.exchanges == 1
            await hub(scope, garbage, record)
            assert sent[0]["status"] == 503 and (b"retry-after", b"1") in sent[0]["headers"]
            gone.set()
            nursery.cancel_scope.cancel()

    trio.run(main)
