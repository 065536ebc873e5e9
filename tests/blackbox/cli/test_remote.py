"""`mcpwrap client-config --url`: each client's entry for a remote `serve --http`, checked against a real one.

A token read from --token-file is not printed where the client can take it from its environment or a
prompt (Claude Code, Cursor, VS Code); Claude Desktop, which starts only stdio servers from its config
file, gets the mcp-remote bridge with the token written in, and stderr says so.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.harness import HANG_S, mcpwrap_cmd
from tests.httpharness import HttpServer

TOOLS = Path(__file__).parents[2] / "fixtures" / "http.toml"
TOKEN = "new-token-0123456789"
URL = "https://ops.example/mcp"


def client_config(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpwrap_cmd("client-config", *args), capture_output=True, text=True, timeout=HANG_S,
                          stdin=subprocess.DEVNULL)


def printed(*args: str) -> tuple[dict[str, Any], str]:
    done = client_config(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"# rotation: the newest last\nold-token-0123456789\n{TOKEN}\n")
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("client, expected", [
    ("claude-code", {"mcpServers": {"ops": {"type": "http", "url": URL,
                                            "headers": {"Authorization": "Bearer ${MCPWRAP_TOKEN}"}}}}),
    ("cursor", {"mcpServers": {"ops": {"url": URL, "headers": {"Authorization": "Bearer ${env:MCPWRAP_TOKEN}"}}}}),
    ("vscode", {"servers": {"ops": {"type": "http", "url": URL,
                                    "headers": {"Authorization": "Bearer ${input:mcpwrap-token}"}}},
                "inputs": [{"type": "promptString", "id": "mcpwrap-token", "password": True,
                            "description": "Bearer token for ops (from {tokens})"}]}),
])
def test_native_clients_get_a_header_template_never_the_token(token_file: Path, client: str,
                                                              expected: dict[str, Any]) -> None:
    config, notes = printed("--url", URL, "--token-file", str(token_file), "--client", client, "--name", "ops")
    assert config == json.loads(json.dumps(expected).replace("{tokens}", str(token_file.resolve())))
    assert "token-0123456789" not in json.dumps(config)
    assert str(token_file.resolve()) in notes and "token-0123456789" not in notes


def test_claude_desktop_gets_the_bridge_with_the_token_and_a_warning(token_file: Path) -> None:
    config, notes = printed("--url", URL, "--token-file", str(token_file), "--header", "X-Team: ops")
    entry = config["mcpServers"]["mcpwrap"]
    assert Path(entry["command"]).name == "npx"
    assert entry["args"] == ["-y", "mcp-remote", URL, "--header", "X-Team:${MCPWRAP_HEADER_X_TEAM}",
                             "--header", "Authorization:${MCPWRAP_HEADER_AUTHORIZATION}"]
    assert entry["env"] == {"MCPWRAP_HEADER_X_TEAM": "ops", "MCPWRAP_HEADER_AUTHORIZATION": f"Bearer {TOKEN}"}
    assert "mcp-remote" in notes and "chmod 600" in notes and str(token_file.resolve()) in notes


def test_without_a_token_the_entry_has_only_the_url_and_the_given_headers() -> None:
    config, notes = printed("--url", URL, "--client", "claude-code", "-H", "X-Team: ops")
    assert config == {"mcpServers": {"mcpwrap": {"type": "http", "url": URL, "headers": {"X-Team": "ops"}}}}
    assert notes == ""
    config, _ = printed("--url", URL, "--client", "vscode")
    assert config == {"servers": {"mcpwrap": {"type": "http", "url": URL}}}           # no inputs to prompt for
    config, _ = printed("--url", URL, "--pin-path")
    assert "PATH" in config["mcpServers"]["mcpwrap"]["env"]                          # the bridge is started


def test_the_printed_header_is_what_serve_http_accepts(tmp_path: Path, token_file: Path) -> None:
    """Claude Code's entry, its ${MCPWRAP_TOKEN} expanded as Claude Code does, authenticates a real server."""
    with HttpServer(TOOLS, tmp_path, "--token-file", str(token_file)) as server:
        url = f"http://{server.host}:{server.port}{server.path}"
        config, _ = printed("--url", url, "--token-file", str(token_file), "--client", "claude-code")
        entry = config["mcpServers"]["mcpwrap"]
        assert entry["url"] == url
        headers = {k: v.replace("${MCPWRAP_TOKEN}", TOKEN) for k, v in entry["headers"].items()}
        assert server.modern("tools/list", headers=headers).status == 200
        assert server.modern("tools/list").status == 401


def test_plain_http_to_another_host_with_a_token_is_flagged(token_file: Path) -> None:
    _, notes = printed("--url", "http://ops.example:8080/mcp", "--token-file", str(token_file), "-c", "cursor")
    assert "plain HTTP" in notes and "--certfile" in notes
    _, notes = printed("--url", "http://127.0.0.1:8080/mcp", "--token-file", str(token_file), "-c", "cursor")
    assert "plain HTTP" not in notes                                              # loopback never leaves the host


@pytest.mark.parametrize("args, fragment", [
    (["--url", URL, str(TOOLS)], "not both"),
    ([], "not both"),
    (["--url", "ftp://ops.example/mcp"], "--url wants http(s)://"),
    (["--url", URL, "--header", "no colon"], "--header wants 'Name: value'"),
    (["--url", URL, "--header", "Bad Name: x"], "--header wants 'Name: value'"),
    (["--url", URL, "--client", "cursor", "--env", "A=1"], "cursor connects to --url itself"),
    ([str(TOOLS), "--header", "X-A: 1"], "--header and --token-file go with --url"),
])
def test_usage_errors(args: list[str], fragment: str) -> None:
    done = client_config(*args)
    assert done.returncode == 2 and fragment in done.stderr, done.stderr
    assert done.stdout == ""


def test_a_token_file_others_can_read_or_an_extra_authorization_is_refused(token_file: Path) -> None:
    done = client_config("--url", URL, "--token-file", str(token_file), "--header", "Authorization: Bearer x")
    assert done.returncode == 2 and "not both" in done.stderr
    token_file.chmod(0o644)
    done = client_config("--url", URL, "--token-file", str(token_file))
    assert done.returncode == 3 and "chmod 600" in done.stderr and done.stdout == ""


def test_the_readme_remote_example_is_what_it_prints(token_file: Path) -> None:
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    section = readme.split("\n### A remote server\n", 1)[1]
    block = section.split("```json\n", 1)[1].split("```", 1)[0]
    config, _ = printed("--url", "https://ops.example/mcp", "--token-file", str(token_file), "--client", "claude-code")
    assert json.loads(block) == config
