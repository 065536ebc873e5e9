"""`allow`: each caller sees and uses only what the tools file lets its identity use (issue 26, item 2).

Over a real `serve --http --token-file` with named
token lines, in both eras: every list shows the caller only what it may use, and a call, read or get of
anything else is answered exactly as a name the file does not have, with nothing run. Over stdio the
local user owns the process: `allow` does not apply there, and `check` says so.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Server, mcpwrap_cmd
from tests.httpharness import HttpServer
from tests.blackbox.http.test_identity_binding import Client

CI, DEV, PLAIN = "ci-token-0123456789abcdef", "dev-token-0123456789abcdef", "plain-token-0123456789abcdef"


def tools_file(tmp: Path) -> Path:
    (tmp / "notes.txt").write_text("the notes\n")
    path = tmp / "tools.toml"
    path.write_text(f"""
[tools.open]
description = "anyone's"
command = ["echo", "open"]
annotations.readOnlyHint = true

[tools.deploy]
description = "the CI token's, or a token granted the deploy scope"
command = ["sh", "-c", "echo run >> {tmp / 'deployed'}"]
allow = ["token:ci", "scope:deploy"]

[tools.page]
description = "the ops group's"
command = ["echo", "page"]
allow = ["group:ops"]

[tools.authed]
description = "anyone authenticated"
command = ["echo", "authed"]
allow = ["*"]

[resources.notes]
path = "notes.txt"
uri = "file:///notes"
allow = ["token:ci"]

[resources.log]
uri_template = "log://{{day}}"
command = ["sh", "-c", "echo run >> {tmp / 'read'}"]
args.day = {{ type = "string" }}
allow = ["token:ci"]

[prompts.release]
messages = [{{ role = "user", text = "release it" }}]
allow = ["token:ci"]

[prompts.hello]
messages = [{{ role = "user", text = "hello" }}]
""")
    return path


# --- over HTTP, both eras -----------------------------------------------------------------
@pytest.fixture
def served(tmp_path: Path) -> Any:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# named lines, and an unnamed one\nci: {CI}\ndev: {DEV}\n{PLAIN}\n")
    tokens.chmod(0o600)
    with HttpServer(tools_file(tmp_path), tmp_path, "--token-file", str(tokens)) as server:
        yield server


def _names(answer: Any, key: str, field: str = "name") -> list[str]:
    return [item[field] for item in answer.final["result"][key]]


def _error_of_unknown(answer: Any, name: str, unknown: str) -> dict[str, Any]:
    """The error, with the unknown name it quotes made the same, to compare it with a truly unknown one's."""
    error = answer.final["error"]
    text = str(error).replace(name, unknown)
    return {"status": answer.status, "error": text}


def test_legacy_lists_and_calls_follow_the_callers_identity(served: HttpServer, tmp_path: Path) -> None:
    ci, dev = Client(served, CI), Client(served, DEV)
    ci.initialize()
    dev.initialize()
    assert _names(ci.legacy("tools/list"), "tools") == ["open", "deploy", "authed"]
    assert _names(dev.legacy("tools/list"), "tools") == ["open", "authed"]
    assert _names(ci.legacy("resources/list"), "resources") == ["notes"]
    assert _names(dev.legacy("resources/list"), "resources") == []
    # "output" is the kept-output template: each caller's own output, anyone's to read
    assert _names(ci.legacy("resources/templates/list"), "resourceTemplates") == ["output", "log"]
    assert _names(dev.legacy("resources/templates/list"), "resourceTemplates") == ["output"]
    assert _names(ci.legacy("prompts/list"), "prompts") == ["release", "hello"]
    assert _names(dev.legacy("prompts/list"), "prompts") == ["hello"]

    refused = [("tools/call", {"name": "deploy", "arguments": {}}, "deploy", "nosuch"),
               ("resources/read", {"uri": "file:///notes"}, "file:///notes", "file:///nosuch"),
               ("resources/read", {"uri": "log://monday"}, "log://monday", "log://nosuch"),
               ("prompts/get", {"name": "release"}, "release", "nosuch")]
    for method, params, name, unknown in refused:
        other = {**params, ("name" if "name" in params else "uri"): unknown}
        assert _error_of_unknown(dev.legacy(method, params), name, unknown) == _error_of_unknown(
            dev.legacy(method, other), unknown, unknown), method
    assert not (tmp_path / "deployed").exists() and not (tmp_path / "read").exists()     # nothing ran
    assert "error" not in ci.legacy("tools/call", {"name": "deploy", "arguments": {}}).final
    assert (tmp_path / "deployed").read_text() == "run\n"


def test_modern_requests_follow_the_callers_identity(served: HttpServer, tmp_path: Path) -> None:
    ci, dev, plain = Client(served, CI), Client(served, DEV), Client(served, PLAIN)
    assert _names(ci.modern("tools/list", {}), "tools") == ["open", "deploy", "authed"]
    assert _names(dev.modern("tools/list", {}), "tools") == ["open", "authed"]
    assert _names(plain.modern("tools/list", {}), "tools") == ["open", "authed"]     # an unnamed line: "*" only
    assert "prompts" in ci.modern("server/discover", {}).final["result"]["capabilities"]
    call = dev.modern("tools/call", {"name": "deploy", "arguments": {}})
    unknown = dev.modern("tools/call", {"name": "nosuch", "arguments": {}})
    assert _error_of_unknown(call, "deploy", "nosuch") == _error_of_unknown(unknown, "nosuch", "nosuch")
    get = dev.modern("prompts/get", {"name": "release"})
    assert _error_of_unknown(get, "release", "nosuch") == _error_of_unknown(
        dev.modern("prompts/get", {"name": "nosuch"}), "nosuch", "nosuch")
    assert not (tmp_path / "deployed").exists()
    assert "error" not in ci.modern("tools/call", {"name": "deploy", "arguments": {}}).final
    assert (tmp_path / "deployed").read_text() == "run\n"


def test_a_bad_token_name_refuses_to_start(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"c i: {CI}\n")
    tokens.chmod(0o600)
    done = subprocess.run(mcpwrap_cmd("serve", str(tools_file(tmp_path)), "--http", "127.0.0.1:0",
                                      "--token-file", str(tokens)), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "token name 'c i'" in done.stderr


# --- stdio: the local user ---------------------------------------------------------------------
def test_stdio_serves_the_local_user_everything_and_check_says_so(tmp_path: Path) -> None:
    path = tools_file(tmp_path)
    with Server(path, tmp_path) as server:
        server.initialize()
        listed = server.call("tools/list")
        assert [t["name"] for t in listed["result"]["tools"]] == ["open", "deploy", "page", "authed"]
    checked = subprocess.run(mcpwrap_cmd("check", str(path)), capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert "allow" in checked.stdout + checked.stderr and "stdio" in checked.stdout + checked.stderr
