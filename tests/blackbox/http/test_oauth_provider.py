"""The happy path through a real authorization server: oidc-provider (npm, tests/ts/oidc.mjs) on loopback.

The test is the client: authorization code + PKCE with the RFC 8707 resource of the mcpwrap it
started (found from mcpwrap's 401 and its RFC 9728 metadata), the sign-in driven over HTTP; the JWT
access token it gets lists and calls what its identity may use, and nothing else. With oidc-provider
minting opaque access tokens, mcpwrap introspects them (RFC 7662) as the confidential client its
--oauth-client-file names; without that file, or for another resource, they are refused.
"""

from __future__ import annotations

import base64
import hashlib
import http.cookiejar
import json
import re
import secrets
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import HANG_S
from tests.httpharness import HttpServer
from tests.blackbox.http.test_identity_binding import Client

TS = Path(__file__).parents[2] / "ts"
REDIRECT = "http://127.0.0.1/callback"
TOOLS = ('[tools.hello]\ncommand = ["echo", "hello"]\n'
         '[tools.deploy]\ncommand = ["sh", "-c", "echo run >> \\"$1\\"", "sh", "{path}"]\n'
         'args.path = { type = "string" }\nallow = ["scope:deploy"]\n'
         '[tools.bobs]\ncommand = ["echo", "bob"]\nallow = ["user:bob"]\n')
pytestmark = pytest.mark.skipif(shutil.which("node") is None or not (TS / "node_modules" / "oidc-provider").exists(),
                                reason="needs node and `npm ci --prefix tests/ts`")


def start(*args: str) -> Iterator[str]:
    """oidc-provider (tests/ts/oidc.mjs ARGS) on a loopback port: its issuer URL, until the test ends."""
    proc = subprocess.Popen(["node", str(TS / "oidc.mjs"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout is not None
    issuer = proc.stdout.readline().decode().strip()
    assert issuer.startswith("http://127.0.0.1:"), proc.stderr.read().decode() if proc.stderr else ""
    yield issuer
    proc.kill()
    proc.wait(HANG_S)


@pytest.fixture
def provider() -> Iterator[str]:
    yield from start("alice")


@pytest.fixture
def opaque_provider() -> Iterator[str]:
    yield from start("alice", "opaque")


class _Stop(urllib.request.HTTPRedirectHandler):
    """Follows the flow's redirects until the one to the client's redirect URI, whose query it keeps."""
    def __init__(self) -> None:
        self.answer: dict[str, str] | None = None

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if newurl.startswith(REDIRECT):
            self.answer = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(newurl).query))
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def user_agent(authorization_url: str) -> dict[str, str]:
    """The browser: follows an authorization URL through sign-in and consent (oidc.mjs completes both)
    to the redirect URI, and returns that URL's query (code, state, iss)."""
    stop = _Stop()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), stop)
    try:
        opener.open(authorization_url, timeout=HANG_S).read()
    except urllib.error.HTTPError as exc:
        assert stop.answer is not None, exc.read()
    assert stop.answer is not None
    return stop.answer


def access_token(server: HttpServer, scope: str, resource: str | None = None) -> str:
    """The client's side of the flow, from mcpwrap's 401 to a token for it (or for `resource`)."""
    answer = server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    assert answer.status == 401
    metadata_url = re.search(r'resource_metadata="([^"]+)"', answer.headers["www-authenticate"])[1]  # type: ignore[index]
    with urllib.request.urlopen(metadata_url, timeout=HANG_S) as got:
        metadata = json.load(got)
    resource, issuer = resource or metadata["resource"], metadata["authorization_servers"][0]
    with urllib.request.urlopen(issuer + "/.well-known/openid-configuration", timeout=HANG_S) as got:
        endpoints = json.load(got)
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urllib.parse.urlencode({"client_id": "mcpwrap-test", "response_type": "code", "redirect_uri": REDIRECT,
                                    "scope": scope, "resource": resource, "code_challenge": challenge,
                                    "code_challenge_method": "S256", "state": "s"})
    code = user_agent(endpoints["authorization_endpoint"] + "?" + query)["code"]
    form = urllib.parse.urlencode({"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                                   "client_id": "mcpwrap-test", "code_verifier": verifier,
                                   "resource": resource}).encode()
    with urllib.request.urlopen(endpoints["token_endpoint"], form, timeout=HANG_S) as got:
        return str(json.load(got)["access_token"])


def test_a_token_from_oidc_provider_lists_and_calls_what_its_identity_may_use(provider: str, tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text(TOOLS)
    with HttpServer(tools, tmp_path, "--oauth-issuer", provider, "--oauth-scope", "mcp") as server:
        marker = tmp_path / "deployed"
        narrow = Client(server, access_token(server, "openid mcp"))
        assert [t["name"] for t in narrow.modern("tools/list", {}).final["result"]["tools"]] == ["hello"]
        refused = narrow.modern("tools/call", {"name": "deploy", "arguments": {"path": str(marker)}})
        assert "error" in refused.final and not marker.exists()
        wide = Client(server, access_token(server, "openid mcp deploy"))
        wide.initialize()
        assert [t["name"] for t in wide.legacy("tools/list").final["result"]["tools"]] == ["hello", "deploy"]
        called = wide.legacy("tools/call", {"name": "deploy", "arguments": {"path": str(marker)}})
        assert "error" not in called.final and marker.read_text() == "run\n"


def test_opaque_tokens_are_introspected_as_the_client_file_says(opaque_provider: str, tmp_path: Path) -> None:
    tools, client = tmp_path / "tools.toml", tmp_path / "client"
    tools.write_text(TOOLS)
    client.write_text("mcpwrap-rs: mcpwrap-rs-secret-0123456789\n")     # oidc.mjs's confidential client
    client.chmod(0o600)
    marker = tmp_path / "deployed"
    oauth = ("--oauth-issuer", opaque_provider, "--oauth-scope", "mcp")
    with HttpServer(tools, tmp_path, *oauth, "--oauth-client-file", str(client)) as server:
        token = access_token(server, "openid mcp deploy")
        assert token.count(".") != 2                                      # opaque, not a JWT
        wide = Client(server, token)
        assert [t["name"] for t in wide.modern("tools/list", {}).final["result"]["tools"]] == ["hello", "deploy"]
        called = wide.modern("tools/call", {"name": "deploy", "arguments": {"path": str(marker)}})
        assert "error" not in called.final and marker.read_text() == "run\n"
        assert "error" in wide.modern("tools/call", {"name": "bobs", "arguments": {}}).final
        elsewhere = access_token(server, "openid mcp deploy", resource="http://127.0.0.1:9/other")
        made_up = "x" * 43
        for refused in (elsewhere, made_up):
            answer = Client(server, refused).modern("tools/call", {"name": "deploy", "arguments": {"path": str(marker)}})
            assert answer.status == 401, answer
    with HttpServer(tools, tmp_path, *oauth, state=tmp_path / "state2") as server:
        answer = Client(server, token).modern("tools/call", {"name": "deploy", "arguments": {"path": str(marker)}})
        assert answer.status == 401 and 'error="invalid_token"' in answer.headers["www-authenticate"]
    assert marker.read_text() == "run\n"
