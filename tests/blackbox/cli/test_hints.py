"""What the CLI tells a new user about itself (issue 28, item 13): the install hint fits how mcpwrap was
installed, `serve` says it serves HTTP too, and the README names the Node.js the suite needs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import HANG_S, mcpwrap_cmd

ROOT = Path(__file__).parents[3]
# Runs the CLI with hypercorn unimportable and sys.prefix set to argv[1] (a pipx venv, or not).
WITHOUT_HYPERCORN = ("import sys; sys.modules['hypercorn'] = None; sys.prefix = sys.argv.pop(1); "
                     "sys.argv[0] = 'mcpwrap'; from mcpwrap.cli.main import entry; entry()")


@pytest.mark.parametrize("pipx", [True, False])
def test_the_missing_hypercorn_hint_fits_the_installation(tmp_path: Path, pipx: bool) -> None:
    # unchanged code: "pip install 'mcpwrap-cli[http]'" under pipx too (pipx's venvs have no pip to speak of)
    venv = tmp_path / "venvs" / "mcpwrap-cli"
    venv.mkdir(parents=True)
    if pipx:
        (venv / "pipx_metadata.json").write_text("{}")
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.hi]\ncommand = ["echo", "hi"]\n')
    done = subprocess.run([sys.executable, "-c", WITHOUT_HYPERCORN, str(venv), "serve", str(tools), "--http", "0"],
                          capture_output=True, text=True, timeout=HANG_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    if pipx:
        assert "pipx inject mcpwrap-cli hypercorn" in done.stderr and "pip install" not in done.stderr
    else:
        assert "pip install 'mcpwrap-cli[http]'" in done.stderr and "pipx" not in done.stderr


def test_serve_help_says_it_serves_http_too() -> None:
    for args in (["serve", "--help"], ["--help"]):
        shown = subprocess.run(mcpwrap_cmd(*args), capture_output=True, text=True, timeout=HANG_S).stdout
        about = " ".join(shown.split("\n\n")[1].split())
        assert "HTTP" in about, about                      # unchanged code: "... MCP server on stdio"


def test_the_readme_names_the_nodejs_the_suite_needs() -> None:
    engines = json.loads((ROOT / "tests/ts/package.json").read_text())["engines"]["node"]
    lock = json.loads((ROOT / "tests/ts/package-lock.json").read_text())["packages"]
    floor = engines.removeprefix(">=")
    assert lock[""]["engines"]["node"] == engines
    # the floor covers what the suite loads: undici (the SDK's fetch) and module.register (tests/ts/node20-fs.mjs)
    assert tuple(map(int, floor.split("."))) >= (20, 18, 1)
    inspector = lock["node_modules/@modelcontextprotocol/inspector"]["engines"]["node"].removeprefix(">=")
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("Run the whole test suite"):readme.index("## A one-minute tour")]
    assert re.search(rf"Node\.js {re.escape(floor)} or later", section), section    # unchanged: "needs Node.js"
    assert "EBADENGINE" in section and inspector in section


def test_inline_tools_take_a_description_and_print_as_a_file_check_accepts(tmp_path: Path) -> None:
    # issue 28, item 15. Unchanged code: "No such option: --describe" (exit 2)
    printed = subprocess.run(mcpwrap_cmd("serve", "--tool", "log=git log -n {n:integer} -- {path?}",
                                         "--describe", "log=Recent commits", "--print-toml"),
                             capture_output=True, text=True, timeout=HANG_S)
    assert printed.returncode == 0, printed.stderr
    assert 'description = "Recent commits"' in printed.stdout
    draft = tmp_path / "tools.toml"
    draft.write_text(printed.stdout)
    checked = subprocess.run(mcpwrap_cmd("list", str(draft), "--json"), capture_output=True, text=True, timeout=HANG_S)
    tools = json.loads(checked.stdout)["tools"]
    assert [(t["name"], t["description"]) for t in tools] == [("log", "Recent commits")]
    assert subprocess.run(mcpwrap_cmd("check", str(draft)), capture_output=True, timeout=HANG_S).returncode == 0
    stray = subprocess.run(mcpwrap_cmd("serve", "--tool", "a=echo", "--describe", "b=x", "--print-toml"),
                           capture_output=True, text=True, timeout=HANG_S)
    assert stray.returncode == 2 and "--describe names no --tool: b" in stray.stderr
