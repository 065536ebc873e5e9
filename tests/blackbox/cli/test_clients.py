"""`mcpwrap client-config` for the other hosts people use (issue 28, item 16): each entry has the shape
that host documents for a stdio server, and starts this mcpwrap serving the file; with --url, the shape
it documents for a remote (Streamable HTTP) server, the --token-file token a reference to MCPWRAP_TOKEN
wherever the host expands one (Zed does not: its entry holds the token, and stderr says so).

Unchanged code refused each of these clients: "--client must be one of claude-desktop, ..." (exit 2);
with --url: "--client windsurf is written for a served FILE only" (exit 2).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.harness import HANG_S, mcpwrap_cmd

NAME = "my tools"                 # a key with a space: quoted where the format needs it


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text('[tools.hi]\ncommand = ["echo", "hi"]\n')
    return path


def printed(tools: Path, client: str) -> str:
    done = subprocess.run(mcpwrap_cmd("client-config", str(tools), "--client", client, "--name", NAME,
                                      "--env", "LANG=C.UTF-8"),
                          capture_output=True, text=True, timeout=HANG_S, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_serves(tools: Path, entry: dict[str, Any]) -> None:
    """command + args start `mcpwrap serve FILE` (absolute), and env holds the pinned variable."""
    assert os.path.isabs(entry["command"])
    assert entry["args"][-2:] == ["serve", str(tools.resolve())]
    assert entry["env"] == {"LANG": "C.UTF-8"}


def test_windsurf(tools: Path) -> None:
    # https://docs.windsurf.com/windsurf/cascade/mcp : ~/.codeium/windsurf/mcp_config.json,
    # {"mcpServers": {NAME: {"command", "args", "env"}}} (the Claude Desktop schema)
    config = json.loads(printed(tools, "windsurf"))
    assert list(config) == ["mcpServers"] and list(config["mcpServers"]) == [NAME]
    entry = config["mcpServers"][NAME]
    assert set(entry) == {"command", "args", "env"}
    assert_serves(tools, entry)


def test_zed(tools: Path) -> None:
    # https://zed.dev/docs/ai/mcp : settings.json, {"context_servers": {NAME: {"command", "args", "env"}}}
    config = json.loads(printed(tools, "zed"))
    assert list(config) == ["context_servers"]
    entry = config["context_servers"][NAME]
    assert set(entry) == {"command", "args", "env"}
    assert_serves(tools, entry)


def test_codex(tools: Path) -> None:
    # https://developers.openai.com/codex/mcp : ~/.codex/config.toml, a [mcp_servers.NAME] table with
    # command (string), args (array of strings), env (table)
    text = printed(tools, "codex")
    assert text.startswith(f'[mcp_servers."{NAME}"]\n')
    config = tomllib.loads(text)
    assert list(config) == ["mcp_servers"]
    entry = config["mcp_servers"][NAME]
    assert set(entry) == {"command", "args", "env"}
    assert_serves(tools, entry)


def test_gemini(tools: Path) -> None:
    # https://geminicli.com/docs/tools/mcp-server/ (google-gemini/gemini-cli docs/tools/mcp-server.md):
    # ~/.gemini/settings.json, {"mcpServers": {NAME: {"command", "args", "env"}}}
    config = json.loads(printed(tools, "gemini"))
    assert list(config) == ["mcpServers"]
    entry = config["mcpServers"][NAME]
    assert set(entry) == {"command", "args", "env"}
    assert_serves(tools, entry)


def test_claude_mcp_add(tools: Path) -> None:
    # https://docs.anthropic.com/en/docs/claude-code/mcp : `claude mcp add [options] <name> -- <command> [args...]`,
    # every option (--transport, --env KEY=value) before the name, the server's command after `--`
    text = printed(tools, "claude-mcp-add")
    assert text.endswith("\n") and text.count("\n") == 1
    words = shlex.split(text)
    assert words[:5] == ["claude", "mcp", "add", "--transport", "stdio"]
    assert words[5:9] == ["--env", "LANG=C.UTF-8", NAME, "--"]
    assert_serves(tools, {"command": words[9], "args": words[10:], "env": {"LANG": "C.UTF-8"}})


URL = "https://ops.example/mcp"
TOKEN = "new-token-0123456789"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"# rotation: the newest last\nold-token-0123456789\n{TOKEN}\n")
    path.chmod(0o600)
    return path


def remote(client: str, *args: str) -> tuple[str, str]:
    """What `client-config --url` prints for `client` (stdout, stderr), with a team header."""
    done = subprocess.run(mcpwrap_cmd("client-config", "--url", URL, "--client", client, "--name", NAME,
                                      "--header", "X-Team: ops", *args),
                          capture_output=True, text=True, timeout=HANG_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def assert_refers(notes: str, text: str, token_file: Path) -> None:
    """The token is nowhere printed; the note says where the host takes it from."""
    assert "token-0123456789" not in text and "token-0123456789" not in notes
    assert "reads it from MCPWRAP_TOKEN" in notes and str(token_file.resolve()) in notes


def test_windsurf_remote(token_file: Path) -> None:
    # https://docs.windsurf.com/windsurf/cascade/mcp ("Remote HTTP MCPs": serverUrl or url, with headers;
    # "Config Interpolation": ${env:VAR} in command, args, env, serverUrl, url and headers)
    text, notes = remote("windsurf", "--token-file", str(token_file))
    assert json.loads(text) == {"mcpServers": {NAME: {"serverUrl": URL, "headers": {
        "X-Team": "ops", "Authorization": "Bearer ${env:MCPWRAP_TOKEN}"}}}}
    assert_refers(notes, text, token_file)


def test_gemini_remote(token_file: Path) -> None:
    # https://geminicli.com/docs/tools/mcp-server/ (httpUrl: Streamable HTTP; url is SSE; headers) and
    # google-gemini/gemini-cli docs/cli/configuration.md (settings.json strings resolve $VAR and ${VAR})
    text, notes = remote("gemini", "--token-file", str(token_file))
    assert json.loads(text) == {"mcpServers": {NAME: {"httpUrl": URL, "headers": {
        "X-Team": "ops", "Authorization": "Bearer ${MCPWRAP_TOKEN}"}}}}
    assert_refers(notes, text, token_file)


def test_codex_remote(token_file: Path) -> None:
    # https://developers.openai.com/codex/mcp (Streamable HTTP: url, bearer_token_env_var naming the variable
    # that holds the bearer token, http_headers for static headers)
    text, notes = remote("codex", "--token-file", str(token_file))
    assert tomllib.loads(text) == {"mcp_servers": {NAME: {"url": URL, "bearer_token_env_var": "MCPWRAP_TOKEN",
                                                          "http_headers": {"X-Team": "ops"}}}}
    assert_refers(notes, text, token_file)
    text, notes = remote("codex")
    assert tomllib.loads(text) == {"mcp_servers": {NAME: {"url": URL, "http_headers": {"X-Team": "ops"}}}}
    assert notes == ""


def test_claude_mcp_add_remote(token_file: Path) -> None:
    # https://code.claude.com/docs/en/mcp: `claude mcp add --transport http <name> <url>`, --header, options
    # before the name; "Environment variable expansion in .mcp.json": ${VAR} in url and headers, the file
    # --scope project writes
    text, notes = remote("claude-mcp-add", "--token-file", str(token_file))
    assert text.endswith("\n") and text.count("\n") == 1
    assert shlex.split(text) == ["claude", "mcp", "add", "--transport", "http", "--scope", "project",
                                 "--header", "X-Team: ops", "--header", "Authorization: Bearer ${MCPWRAP_TOKEN}",
                                 NAME, URL]
    assert "'Authorization: Bearer ${MCPWRAP_TOKEN}'" in text          # single quotes: no shell expands it
    assert_refers(notes, text, token_file)
    text, _ = remote("claude-mcp-add")
    assert shlex.split(text) == ["claude", "mcp", "add", "--transport", "http", "--header", "X-Team: ops", NAME, URL]


def test_zed_remote_writes_the_token_it_cannot_refer_to(token_file: Path) -> None:
    # https://zed.dev/docs/ai/mcp: context_servers, a remote server {"url", "headers"}; its headers are sent as
    # written (zed-industries/zed#60459, open: no $VAR expansion), so the token goes in and stderr says so
    text, notes = remote("zed", "--token-file", str(token_file))
    assert json.loads(text) == {"context_servers": {NAME: {"url": URL, "headers": {
        "X-Team": "ops", "Authorization": f"Bearer {TOKEN}"}}}}
    assert "chmod 600" in notes and str(token_file.resolve()) in notes
    text, notes = remote("zed")
    assert json.loads(text) == {"context_servers": {NAME: {"url": URL, "headers": {"X-Team": "ops"}}}}
    assert notes == ""
