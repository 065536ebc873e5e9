"""`serve --http --oauth-issuer`: an OAuth 2.1 resource server, attacked (issue 26, items 1 and 4).

A small issuer of the test's own (RFC 8414 metadata and a JWKS on a loopback port, keys the test
controls) lets the test mint every token an attacker could bring, with PyJWT: each is refused with
401 (403 `insufficient_scope` for a valid token without the required scope), and the tool it tried
to call never runs. The happy path through a real authorization server is `test_oauth_provider.py`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mcpwrap.config.model import OAuthSettings
from mcpwrap.serve import oauth
from tests.harness import HANG_S
from tests.httpharness import HttpServer
from tests.blackbox.http.test_identity_binding import Client
from tests.blackbox.cli.test_flags import refused


class Issuer:
    """An authorization server as far as a resource server sees one: metadata and a key set, on loopback."""

    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.published: list[str] = []
        self.fetches = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/oauth-authorization-server":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"}
                elif self.path == "/jwks":
                    issuer.fetches += 1
                    body = {"keys": [issuer.jwk(kid) for kid in issuer.published]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def new_key(self, kid: str, publish: bool = True) -> str:
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if publish:
            self.published.append(kid)
        return kid

    def jwk(self, kid: str) -> dict[str, Any]:
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key(), as_dict=True)
        return {**public, "kid": kid, "alg": "RS256", "use": "sig"}

    def token(self, audience: str, kid: str = "k1", key: str | None = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": self.url, "sub": "alice", "aud": audience, "iat": now, "exp": now + 300,
                   "scope": "mcp", **claims}
        return jwt.encode({k: v for k, v in payload.items() if v is not None}, self.keys[key or kid],
                          algorithm="RS256", headers={"kid": kid})

    def public_pem(self, kid: str) -> bytes:
        return self.keys[kid].public_key().public_bytes(serialization.Encoding.PEM,
                                                        serialization.PublicFormat.SubjectPublicKeyInfo)

    def close(self) -> None:
        self.server.shutdown()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header: dict[str, Any], payload: dict[str, Any], sign: Any = None) -> str:
    """A JWS made by hand, as an attacker would: PyJWT refuses to make these."""
    head = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(payload).encode())
    return head + "." + (_b64(sign(head.encode())) if sign else "")


TOOLS = """
[tools.touch]
description = "Appends a line to a file"
command = ["sh", "-c", "echo run >> \\"$1\\"", "sh", "{path}"]
args.path = { type = "string" }

[tools.deploy]
command = ["echo", "deployed"]
allow = ["scope:deploy", "group:ops"]

[tools.mine]
command = ["echo", "alice's"]
allow = ["user:alice"]
"""


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    made = Issuer()
    made.new_key("k1")
    yield made
    made.close()


@pytest.fixture
def served(issuer: Issuer, tmp_path: Path) -> Iterator[HttpServer]:
    tools = tmp_path / "tools.toml"
    tools.write_text(TOOLS)
    with HttpServer(tools, tmp_path, "--oauth-issuer", issuer.url, "--oauth-scope", "mcp") as server:
        yield server


def resource(server: HttpServer) -> str:
    return f"http://{server.host}:{server.port}/mcp"


def touch(client: Client, marker: Path) -> Any:
    return client.modern("tools/call", {"name": "touch", "arguments": {"path": str(marker)}})


def test_metadata_and_the_challenge_name_the_issuer_and_this_resource(served: HttpServer, issuer: Issuer) -> None:
    base = f"http://{served.host}:{served.port}"
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        conn = http.client.HTTPConnection(served.host, served.port, timeout=HANG_S)
        conn.request("GET", path)
        got = conn.getresponse()
        assert got.status == 200, path
        assert json.loads(got.read()) == {"resource": resource(served), "authorization_servers": [issuer.url],
                                          "bearer_methods_supported": ["header"], "scopes_supported": ["mcp"]}
        conn.close()
    answer = served.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    assert answer.status == 401
    assert answer.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp", scope="mcp"')


def test_a_valid_token_calls_and_lists_what_its_identity_may_use(served: HttpServer, issuer: Issuer,
                                                                  tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    plain = Client(served, issuer.token(resource(served)))
    assert [t["name"] for t in plain.modern("tools/list", {}).final["result"]["tools"]] == ["touch", "mine"]
    assert "error" not in touch(plain, marker).final and marker.read_text() == "run\n"
    ops = Client(served, issuer.token(resource(served), sub="bob", groups=["ops"]))
    ops.initialize()
    assert [t["name"] for t in ops.legacy("tools/list").final["result"]["tools"]] == ["touch", "deploy"]
    scoped = Client(served, issuer.token(resource(served), sub="carol", scope="mcp deploy"))
    assert [t["name"] for t in scoped.modern("tools/list", {}).final["result"]["tools"]] == ["touch", "deploy"]
    refused = scoped.modern("tools/call", {"name": "mine", "arguments": {}}).final["error"]
    assert refused == scoped.modern("tools/call", {"name": "nosuch", "arguments": {}}).final["error"] | {
        "message": refused["message"]} and "mine" in refused["message"]


def _refused(served: HttpServer, token: str, marker: Path, status: int = 401) -> Any:
    answer = touch(Client(served, token), marker)
    assert answer.status == status, (answer.status, answer.body)
    assert not marker.exists()
    return answer


def test_a_token_for_another_audience_is_refused(served: HttpServer, issuer: Issuer, tmp_path: Path) -> None:
    _refused(served, issuer.token("https://other.example/mcp"), tmp_path / "ran")
    _refused(served, issuer.token(None), tmp_path / "ran")                # no aud at all


def test_an_expired_token_is_refused(served: HttpServer, issuer: Issuer, tmp_path: Path) -> None:
    now = int(time.time())
    _refused(served, issuer.token(resource(served), exp=now - 120, iat=now - 600), tmp_path / "ran")
    _refused(served, issuer.token(resource(served), nbf=now + 600), tmp_path / "ran")     # not yet valid


def test_a_forged_signature_is_refused(served: HttpServer, issuer: Issuer, tmp_path: Path) -> None:
    issuer.new_key("forger", publish=False)
    _refused(served, issuer.token(resource(served), kid="k1", key="forger"), tmp_path / "ran")
    good = issuer.token(resource(served))
    head, payload, signature = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    tampered = _b64(json.dumps({**claims, "sub": "mallory", "scope": "mcp deploy"}).encode())
    _refused(served, f"{head}.{tampered}.{signature}", tmp_path / "ran")
    _refused(served, issuer.token(resource(served), iss="https://evil.example"), tmp_path / "ran")


def test_alg_none_and_key_confusion_are_refused(served: HttpServer, issuer: Issuer, tmp_path: Path) -> None:
    now = int(time.time())
    claims = {"iss": issuer.url, "sub": "alice", "aud": resource(served), "exp": now + 300, "scope": "mcp"}
    _refused(served, unsigned({"alg": "none", "typ": "JWT", "kid": "k1"}, claims), tmp_path / "ran")
    _refused(served, unsigned({"alg": "None", "kid": "k1"}, claims), tmp_path / "ran")
    pem = issuer.public_pem("k1")
    confused = unsigned({"alg": "HS256", "kid": "k1"}, claims, lambda data: hmac.new(pem, data, hashlib.sha256).digest())
    _refused(served, confused, tmp_path / "ran")


def test_rotation_refreshes_on_a_new_kid_and_a_removed_key_is_refused(served: HttpServer, issuer: Issuer,
                                                                       tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    old = issuer.token(resource(served))
    assert touch(Client(served, old), marker).status == 200
    issuer.new_key("k2", publish=False)
    issuer.published = ["k2"]                                         # rotated: k1 withdrawn
    assert touch(Client(served, issuer.token(resource(served), kid="k2")), marker).status == 200   # refreshed
    marker.unlink()
    _refused(served, old, marker)                                     # the refreshed set lacks k1


def test_unknown_kids_refresh_the_keys_a_bounded_number_of_times(served: HttpServer, issuer: Issuer,
                                                                  tmp_path: Path) -> None:
    assert touch(Client(served, issuer.token(resource(served))), tmp_path / "ran").status == 200
    before = issuer.fetches
    for _ in range(3 * oauth.REFRESH_BURST):
        _refused(served, issuer.token(resource(served), kid=uuid.uuid4().hex, key="k1"), tmp_path / "nothing")
    assert issuer.fetches - before <= oauth.REFRESH_BURST


def test_a_missing_required_scope_is_403_insufficient_scope(served: HttpServer, issuer: Issuer, tmp_path: Path) -> None:
    answer = _refused(served, issuer.token(resource(served), scope="profile"), tmp_path / "ran", 403)
    challenge = answer.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="mcp"' in challenge
    assert "resource_metadata=" in challenge


def test_a_session_opened_by_one_identity_is_unknown_to_another(served: HttpServer, issuer: Issuer,
                                                                  tmp_path: Path) -> None:
    alice = Client(served, issuer.token(resource(served)))
    alice.initialize()
    bob = Client(served, issuer.token(resource(served), sub="bob"))
    marker = tmp_path / "ran"
    into = bob.legacy("tools/call", {"name": "touch", "arguments": {"path": str(marker)}}, session=alice.session)
    assert into.status == 404 and not marker.exists()
    renewed = Client(served, issuer.token(resource(served), jti="another"))   # alice, a new token: same identity
    renewed.session = alice.session
    assert renewed.legacy("tools/call", {"name": "touch", "arguments": {"path": str(marker)}}).status == 200


def test_token_files_keep_working_beside_oauth(issuer: Issuer, tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text(TOOLS)
    tokens = tmp_path / "tokens"
    tokens.write_text("ci: ci-token-0123456789abcdef\n")
    tokens.chmod(0o600)
    with HttpServer(tools, tmp_path, "--oauth-issuer", issuer.url, "--token-file", str(tokens)) as server:
        marker = tmp_path / "ran"
        assert touch(Client(server, "ci-token-0123456789abcdef"), marker).status == 200
        assert touch(Client(server, issuer.token(resource(server))), marker).status == 200
        assert marker.read_text() == "run\nrun\n"
        _refused(server, "not-a-token-0123456789", tmp_path / "never")


def test_an_accepted_token_is_remembered_until_its_exp_or_a_key_set_refresh(issuer: Issuer,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A second request with the same token skips the signature check (the per-call cost bench/oauth_call.py
    measures), but not past the token's `exp` nor past the key set it was checked against."""
    audience = "http://127.0.0.1:1/mcp"
    now = [time.time()]
    verifier = oauth.Verifier(OAuthSettings(issuer.url, audience, ("mcp",)), audience, wall=lambda: now[0])
    checks: list[str] = []
    decode = jwt.decode
    monkeypatch.setattr(oauth.jwt, "decode", lambda text, *a, **k: checks.append(text) or decode(text, *a, **k))
    token = issuer.token(audience, exp=int(now[0]) + 300)

    def identity() -> Any:
        return trio.run(verifier.identity, token.encode())

    assert identity().subject == "alice" and identity().subject == "alice" and len(checks) == 1
    now[0] += 300 + oauth.LEEWAY_S + 1                         # past exp, by this server's clock
    identity()                                                 # (PyJWT's clock says otherwise)
    assert len(checks) == 2
    fetched, monotonic = issuer.fetches, verifier.keys.clock
    verifier.keys.clock = lambda: monotonic() + oauth.KEYS_MAX_AGE_S + 1   # the key set is due for a refresh
    identity()
    assert len(checks) == 3 and issuer.fetches == fetched + 1


@pytest.mark.parametrize(("content", "fix"), [("unnamed-secret-0123456789\n", "CLIENT_ID: SECRET"),
                                              ("rs: short\n", "at least 16 characters")])
def test_serve_refuses_an_oauth_client_file_it_cannot_introspect_with(issuer: Issuer, tmp_path: Path,
                                                                      content: str, fix: str) -> None:
    tools, client = tmp_path / "tools.toml", tmp_path / "client"
    tools.write_text(TOOLS)
    client.write_text(content)
    client.chmod(0o600)
    said = refused("serve", str(tools), "--http", "127.0.0.1:0", "--secret-file", str(tmp_path / "secret"),
                   "--oauth-issuer", issuer.url, "--oauth-client-file", str(client))
    assert "--oauth-client-file" in said and fix in said, said
