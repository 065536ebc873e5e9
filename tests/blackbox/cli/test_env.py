"""The suite is hermetic against the shell it runs from (issue 28, item 13b): tests/conftest.py removes
NO_COLOR, TERM, COLUMNS, the locale, MCPWRAP_* and XDG_*, and points the XDG homes into the run's own
directory, for this process and every process it starts.

Proved once by hand, on the cli/docs/config modules, with
`NO_COLOR=1 MCPWRAP_STATE_DIR=/tmp/x TERM=dumb LANG=C XDG_STATE_HOME=/tmp/y` exported: the unchanged suite
failed (blackbox/cli/test_cli.py's colour test, among others); with the scrub it passes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import RUN_HOME, SCRUBBED, SUITE_KNOBS
from tests.harness import HANG_S, mcpwrap_cmd


def test_the_users_settings_are_scrubbed_here_and_in_children() -> None:
    leaked = [name for name in os.environ if (name in SCRUBBED or name.startswith(("MCPWRAP_", "_MCPWRAP_", "LC_")))
              and name not in SUITE_KNOBS and name != "LC_CTYPE"]     # LC_CTYPE: Python's own C-locale coercion
    assert leaked == []
    assert {name for name in os.environ if name.startswith("XDG_")} == {"XDG_STATE_HOME", "XDG_CONFIG_HOME"}
    # a child finds its default secret and state under the run's directory, never the user's home
    shown = subprocess.run(mcpwrap_cmd("secret", "path"), capture_output=True, text=True, timeout=HANG_S)
    assert Path(shown.stdout.strip()) == Path(RUN_HOME) / "config" / "mcpwrap" / "secret"
    child_env = subprocess.run(["env"], capture_output=True, text=True, timeout=HANG_S).stdout.splitlines()
    assert not [line for line in child_env if line.startswith(("NO_COLOR=", "TERM=", "COLUMNS=", "LANG=",
                                                               "MCPWRAP_STATE_DIR="))]
