"""`mcpwrap client-config` for the other hosts people use (issue 28, item 16): each entry has the shape
that host documents for a stdio server, and starts this mcpwrap serving the file.

Unchanged code refused each of these clients: "--client must be one of claude-desktop, ..." (exit 2).
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


def test_the_stdio_only_layouts_say_so_for_a_url() -> None:
    done = subprocess.run(mcpwrap_cmd("client-config", "--url", "https://ops.example/mcp", "--client", "zed"),
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 2 and "--client zed is written for a served FILE only" in done.stderr
