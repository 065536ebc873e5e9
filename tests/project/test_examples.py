"""examples/, `mcpwrap schema`, `init` and `client-config`: what a newcomer meets first."""

from __future__ import annotations

import base64
import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from mcpwrap.run import landlock
from tests.harness import Server, mcpwrap_cmd

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))
BROKEN = Path(__file__).parents[1] / "fixtures" / "broken"
# Broken in ways only the loader can see (or not TOML at all).
BEYOND_SCHEMA = {"syntax.toml", "unknown_placeholder.toml"}


def mcpwrap(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpwrap_cmd(*args), capture_output=True, text=True, timeout=60, **kwargs)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def schema() -> Draft202012Validator:
    printed = mcpwrap("schema")
    assert printed.returncode == 0
    return Draft202012Validator(json.loads(printed.stdout))


def test_schema_accepts_every_example(schema: Draft202012Validator, tmp_path: Path) -> None:
    starter = tmp_path / "starter.toml"
    assert mcpwrap("init", str(starter)).returncode == 0
    for path in [*EXAMPLES, starter, *Path(__file__).parents[1].joinpath("fixtures").glob("*.toml")]:
        errors = list(schema.iter_errors(tomllib.loads(path.read_text())))
        assert not errors, f"{path}: {errors[0].message}"


@pytest.mark.parametrize("path", sorted(p for p in BROKEN.glob("*.toml") if p.name not in BEYOND_SCHEMA),
                         ids=lambda p: p.name)
def test_schema_rejects_broken_fixtures(schema: Draft202012Validator, path: Path) -> None:
    assert list(schema.iter_errors(tomllib.loads(path.read_text()))), path.name


def test_schema_blind_spots_are_real_fixtures() -> None:
    """The fixtures the schema cannot judge exist, and the loader refuses them (test_config covers where)."""
    assert BEYOND_SCHEMA <= {p.name for p in BROKEN.glob("*.toml")}


def test_schema_knows_every_key() -> None:
    from mcpwrap.config import load as config
    from mcpwrap.config import tools

    doc = json.loads(mcpwrap("schema").stdout)
    assert set(doc["properties"]["server"]["properties"]) == config.SERVER_KEYS
    assert set(doc["$defs"]["tool"]["properties"]) == tools.TOOL_KEYS


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_check(path: Path) -> None:
    done = mcpwrap("check", str(path))
    assert done.returncode == 0, done.stderr


def test_repo_tools_search() -> None:
    done = mcpwrap("call", str(ROOT / "examples" / "repo-tools.toml"), "search", "--arg", "pattern=def build_argv")
    assert done.returncode == 0, done.stderr
    assert "mcpwrap/protocol/argv.py:" in done.stdout


@pytest.mark.skipif(landlock.abi() == 0, reason="inspect.toml is sandboxed and this kernel has no Landlock")
def test_inspect_tools() -> None:
    """The sandboxed example still does its job: /proc is granted, the rest is not needed."""
    disks = mcpwrap("call", str(ROOT / "examples" / "inspect.toml"), "disks", "--json")
    assert disks.returncode == 0, disks.stderr
    assert any(d["mount"] == "/" for d in json.loads(disks.stdout)["structuredContent"])
    assert "PID" in mcpwrap("call", str(ROOT / "examples" / "inspect.toml"), "processes", "-a", "limit=3").stdout


def test_chart_produces_a_png(tmp_path: Path) -> None:
    with Server(ROOT / "examples" / "chart.toml", tmp_path) as s:
        s.initialize("2025-06-18")
        result = s.call("tools/call", {"name": "sparkline", "arguments": {"values": [1, 4, 2, 8, 5]}})["result"]
        block = result["content"][0]
        assert block["type"] == "image" and block["mimeType"] == "image/png"
        assert base64.b64decode(block["data"]).startswith(b"\x89PNG\r\n\x1a\n")


def test_deploy_asks_and_runs_as_task_capable(tmp_path: Path) -> None:
    path = ROOT / "examples" / "deploy.toml"
    refused = mcpwrap("call", str(path), "deploy", "-a", "branch=main", "-a", "target=staging", stdin=subprocess.DEVNULL)
    assert refused.returncode == 2 and "Deploy main to staging?" in refused.stderr
    done = mcpwrap("call", str(path), "deploy", "-a", "branch=main", "-a", "target=staging", "-a", "step_seconds=0", "--yes")
    assert done.returncode == 0 and done.stdout == "deployed main to staging\n"


def test_init_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "t.toml"
    assert mcpwrap("init", str(target)).returncode == 0
    again = mcpwrap("init", str(target))
    assert again.returncode != 0 and "--force" in again.stderr
    assert mcpwrap("init", str(target), "--force").returncode == 0
    assert mcpwrap("check", str(target)).returncode == 0
    assert mcpwrap("call", str(target), "greet", "--arg", "name=you").stdout == "Hello, you!\n"


@pytest.mark.parametrize("client,top", [("claude-desktop", "mcpServers"), ("cursor", "mcpServers"),
                                        ("claude-code", "mcpServers"), ("vscode", "servers")])
def test_client_config(client: str, top: str, tmp_path: Path) -> None:
    tools = tmp_path / "my tools \"quoted\".toml"
    tools.write_text('[tools.a]\ncommand = ["true"]\n')
    done = mcpwrap("client-config", str(tools), "--client", client, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)[top][tools.stem]
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][-2:] == ["serve", str(tools.resolve())]
