"""What the shell commands load: guards for their start-up (bench/cli_startup.py has the figures).

Each command runs in a fresh interpreter that reports, after `main`, which modules it loaded
and what the cycle collector was left with. No timing: a module that should not load is the
regression, whatever the machine's speed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.harness import HANG_S

REPORT = """
import gc, sys
sys.argv = ["mcpwrap", *sys.argv[1:]]
from mcpwrap.cli import main
try:
    main()
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)
"""
NEVER = {"jsonschema", "typer", "click", "pydantic", "platformdirs"}


def loaded(tmp_path: Path, *args: str) -> tuple[set[str], bool, bool]:
    """(modules loaded, collector enabled at the end, objects frozen) after `mcpwrap ARGS`."""
    done = subprocess.run([sys.executable, "-c", REPORT, *args], capture_output=True, text=True, timeout=HANG_S,
                          env={**os.environ, "MCPWRAP_STATE_DIR": str(tmp_path / "state")}, check=False)
    *modules, enabled, frozen = done.stderr.splitlines()[-1].split(" ")
    return {m.split(".")[0] if m.split(".")[0] in NEVER else m for m in modules}, enabled == "True", frozen == "True"


def test_call_of_a_plain_tool_loads_only_what_running_it_needs(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.echo]\ncommand = ["echo", "{text}"]\nargs.text = { type = "string" }\n')
    for _ in range(2):                    # the first sight of the file checks its schemas (jsonschema)
        modules, enabled, frozen = loaded(tmp_path, "call", str(tools), "echo", "-a", "text=hi")
    assert {"trio", "mcpwrap.runner"} <= modules
    assert not modules & (NEVER | {"mcpwrap.spool", "mcpwrap.tasks", "mcpwrap.signing", "mcpwrap.protocol",
                                   "mcpwrap.server"}), "call loads what a plain tool does not use"
    assert enabled and frozen             # imported without collection passes, then frozen: none walks them later
