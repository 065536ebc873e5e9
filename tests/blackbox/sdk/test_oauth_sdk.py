"""The official SDKs' OAuth clients through a real authorization server: `serve --http --oauth-issuer`
with oidc-provider (tests/ts/oidc.mjs) as its issuer, the SDK doing everything a host does — the 401,
RFC 9728 metadata, the issuer's metadata, the RFC 8707 resource, the scope mcpwrap challenges for,
authorization code + PKCE, the token exchange — and the test only playing the user agent (following
the authorization URL through sign-in and consent, which oidc.mjs completes, to the redirect URI).

The token the SDK gets carries the scope mcpwrap asks for (`mcp`), not `deploy`, and its subject is
alice, not bob: the client lists only `hello`, calls it, and is refused `deploy` and `bobs` as
unknown tools, which run nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.blackbox.http.test_oauth_provider import provider  # noqa: F401 (the fixture)
from tests.blackbox.sdk.test_ts_client import TS_DIR, needs_node, needs_sdk
from tests.blackbox.sdk.test_ts_content import run_client
from tests.httpharness import HttpServer

TOOLS = ('[tools.hello]\ncommand = ["echo", "hello"]\n'
         '[tools.deploy]\ncommand = ["sh", "-c", "echo run >> \\"$1\\"", "sh", "{path}"]\n'
         'args.path = { type = "string" }\nallow = ["scope:deploy"]\n'
         '[tools.bobs]\ncommand = ["echo", "bob"]\nallow = ["user:bob"]\n')
needs_provider = pytest.mark.skipif(not (TS_DIR / "node_modules" / "oidc-provider").exists(),
                                    reason="needs `npm ci --prefix tests/ts`")


def serve(issuer: str, tmp_path: Path) -> HttpServer:
    tools = tmp_path / "tools.toml"
    tools.write_text(TOOLS)
    return HttpServer(tools, tmp_path, "--oauth-issuer", issuer, "--oauth-scope", "mcp")


@needs_node
@needs_sdk
@needs_provider
def test_typescript_sdk_oauth_client(provider: str, tmp_path: Path,  # noqa: F811 (the fixture)
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "deployed"
    with serve(provider, tmp_path) as server:
        resource = f"http://{server.host}:{server.port}{server.path}"
        monkeypatch.setenv("MCP_URL", resource)
        monkeypatch.setenv("OAUTH_CALLS", json.dumps([["hello", {}], ["deploy", {"path": str(marker)}],
                                                      ["bobs", {}]]))
        summary, context = run_client(TS_DIR / "oauth-client.mjs", tmp_path / "tools.toml", tmp_path / "run")
        context += "\n--- server stderr:\n" + "".join(server.stderr[-40:])
    assert summary["authorizations"] == [{"resource": resource, "scope": "mcp", "method": "S256"}], context
    assert summary["tokenType"].lower() == "bearer" and summary["sessionId"], context
    assert summary["tools"] == ["hello"], context
    hello, deploy, bobs = summary["calls"]
    assert hello == {"name": "hello", "isError": False, "text": "hello\n"}, context
    for refused in (deploy, bobs):
        assert refused["error"]["code"] == -32602 and "unknown tool" in refused["error"]["message"].lower(), context
    assert not marker.exists()
