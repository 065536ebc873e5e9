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
import urllib.parse
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.blackbox.http.test_oauth_provider import REDIRECT, TOOLS, user_agent
from tests.blackbox.http.test_oauth_provider import provider  # noqa: F401 (the fixture)
from tests.harness import HANG_S
from tests.blackbox.sdk.test_ts_client import TS_DIR, needs_node, needs_sdk
from tests.blackbox.sdk.test_ts_content import run_client
from tests.httpharness import HttpServer

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


class Storage:
    """mcp's TokenStorage, in memory, holding oidc.mjs's pre-registered public client."""
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client = OAuthClientInformationFull(client_id="mcpwrap-test", redirect_uris=[REDIRECT],
                                                 token_endpoint_auth_method="none",
                                                 grant_types=["authorization_code"], response_types=["code"])

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@needs_node
@needs_provider
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_python_sdk_oauth_client(provider: str, tmp_path: Path, mode: str) -> None:  # noqa: F811 (the fixture)
    marker = tmp_path / "deployed"
    asked: list[dict[str, str]] = []
    answers: list[dict[str, str]] = []

    async def redirect(url: str) -> None:
        asked.append(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query)))
        answers.append(await anyio.to_thread.run_sync(user_agent, url))

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(**answers[-1])

    async def main(url: str) -> tuple[list[str], str, list[MCPError]]:
        storage = Storage()
        auth = OAuthClientProvider(url, OAuthClientMetadata(redirect_uris=[REDIRECT], token_endpoint_auth_method="none",
                                                            grant_types=["authorization_code"]),
                                   storage, redirect_handler=redirect, callback_handler=callback)
        refused = []
        with anyio.fail_after(2 * HANG_S):
            async with create_mcp_http_client(auth=auth) as http, \
                    Client(streamable_http_client(url, http_client=http), mode=mode,
                           read_timeout_seconds=HANG_S) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                hello = await client.call_tool("hello", {})
                for name, arguments in (("deploy", {"path": str(marker)}), ("bobs", {})):
                    with pytest.raises(MCPError) as caught:
                        await client.call_tool(name, arguments)
                    refused.append(caught.value)
        assert storage.tokens is not None and storage.tokens.scope == "mcp"
        return names, "".join(b.text for b in hello.content if isinstance(b, types.TextContent)), refused

    with serve(provider, tmp_path) as server:
        resource = f"http://{server.host}:{server.port}{server.path}"
        names, hello, refused = anyio.run(main, resource, backend="trio")
    assert [(a["resource"], a["scope"], a["code_challenge_method"]) for a in asked] == [(resource, "mcp", "S256")]
    assert names == ["hello"] and hello == "hello\n"
    assert all(e.error.code == -32602 and "unknown tool" in e.error.message.lower() for e in refused), refused
    assert not marker.exists()
