"""The MCP Inspector CLI (`mcp-inspector --cli`, 1.0.3, installed in tests/ts like the TypeScript SDK) lists and
reads resources and lists and gets prompts against tests/fixtures/content.toml, exiting 0 each time.
Its HOME is the test's tmp dir: the Inspector keeps a catalog there. (1.0.3, not 2.x: 2.x pulls in vite,
whose Windows-only optional dependency the registry here lacks, so its lock file fails `npm ci`.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.blackbox.sdk.test_ts_client import NODE, ROOT, TS_DIR, needs_node

INSPECTOR = TS_DIR / "node_modules" / ".bin" / "mcp-inspector"
FIXTURE = ROOT / "tests" / "fixtures" / "content.toml"
needs_inspector = pytest.mark.skipif(not INSPECTOR.exists(),
                                     reason="the MCP Inspector is missing: run `npm ci --prefix tests/ts` first")


def inspect(tmp_path: Path, *args: str) -> Any:
    done = subprocess.run(
        [str(INSPECTOR), "--cli", sys.executable, "-m", "mcpwrap", "serve", str(FIXTURE), "--state-dir",
         str(tmp_path / "state"), "--secret-file", str(tmp_path / "secret"), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={"PATH": f"{Path(NODE or 'node').parent}:/usr/bin:/bin", "HOME": str(tmp_path),
             "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@needs_node
@needs_inspector
def test_inspector_lists_and_reads_resources_and_gets_prompts(tmp_path: Path) -> None:
    resources = inspect(tmp_path, "--method", "resources/list")["resources"]
    assert [r["name"] for r in resources] == ["notes"]
    read = inspect(tmp_path, "--method", "resources/read", "--uri", resources[0]["uri"])
    assert read["contents"][0]["text"] == "# Notes\nKeep it short.\n"
    templates = inspect(tmp_path, "--method", "resources/templates/list")["resourceTemplates"]
    assert [t["name"] for t in templates] == ["output", "greeting"]
    assert inspect(tmp_path, "--method", "resources/read", "--uri", "greet://inspector")["contents"][0]["text"] == \
        "hello inspector"
    assert [p["name"] for p in inspect(tmp_path, "--method", "prompts/list")["prompts"]] == ["review"]
    prompt = inspect(tmp_path, "--method", "prompts/get", "--prompt-name", "review", "--prompt-args", "topic=speed")
    assert [m["content"].get("text") or m["content"]["resource"]["text"] for m in prompt["messages"]] == [
        "Review the speed of this change.", "hello speed", "speed?"]
