"""Suite-wide policy: Hypothesis profiles, an environment scrubbed of the user's settings, and one tag on
every process the run starts.

Hypothesis: under CI (the `CI` environment variable set, as `.ci/run` does) the "ci"
profile is derandomized and keeps no example database, so a CI run depends on the code
alone; locally the "dev" profile stays random and keeps its database (.hypothesis/) to
find and replay new cases. Neither has a deadline: a loaded machine is slow, not wrong.

Signals: SIGINT is given its default disposition if the suite was started with it ignored.

Processes: the run's tag (tests.procs.TAG) is set here, at import, before any test spawns
anything, so every process of this run carries it and `procs.mine()` sees only those. After
each test, any tagged process still alive a few seconds later is that test's leftover (the
previous teardown took the earlier ones): it is killed, so it cannot break a later test, and
reported as a warning, so the leak is not hidden. (The few seconds only decide between
"was exiting anyway" and "leaked"; no outcome of a test depends on them.)
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import tempfile
import time
import warnings
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests import procs

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

os.environ[procs.TAG] = f"{os.getpid()}-{secrets.token_hex(6)}"

# The suite is hermetic against the shell it is run from: what changes output (NO_COLOR, TERM, COLUMNS, the
# locale), mcpwrap's own settings (MCPWRAP_*: the code reads STATE_DIR, SECRET_FILE, LOG_LEVEL, MAX_CALLS,
# MAX_TASKS, CONTAINMENT, LIMITS_CGROUP, TASK_ID, CALL, and _MCPWRAP_COMPLETE) and where files go (XDG_*)
# are removed for this process and every process it starts; the XDG state and config homes point into a
# directory of this run, so no test reads or writes the user's own. A test that needs a variable sets it,
# one that needs it absent finds it absent. Kept: MCPWRAP_LANDLOCK_ABI, the suite's documented knob
# (tests/unit/run/test_landlock.py) for playing an older kernel.
SUITE_KNOBS = frozenset({"MCPWRAP_LANDLOCK_ABI"})
SCRUBBED = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TERM", "COLUMNS", "LINES", "LANG", "LANGUAGE")
SCRUBBED_PREFIXES = ("MCPWRAP_", "_MCPWRAP_", "LC_", "XDG_")
for _name in [*os.environ, *SCRUBBED]:
    if (_name in SCRUBBED or _name.startswith(SCRUBBED_PREFIXES)) and _name not in SUITE_KNOBS:
        os.environ.pop(_name, None)
        os.unsetenv(_name)          # GNU readline (pytest loads it) exports COLUMNS and LINES behind os.environ
RUN_HOME = tempfile.mkdtemp(prefix="mcpwrap-suite-")
os.environ["XDG_STATE_HOME"] = os.path.join(RUN_HOME, "state")
os.environ["XDG_CONFIG_HOME"] = os.path.join(RUN_HOME, "config")
atexit.register(shutil.rmtree, RUN_HOME, True)

# A suite started in the background by a non-interactive shell (`script &`, nohup) has SIGINT ignored,
# and every process it starts inherits that: a command then cannot be stopped with Ctrl-C at all, so the
# tests of what Ctrl-C does would test the launcher instead. The processes the tests start get the
# disposition a terminal's foreground job has.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 5
    while (leftovers := list(procs.mine())) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in leftovers:
        cmdline = p.read("cmdline").replace(b"\0", b" ").decode(errors="replace")
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        warnings.warn(f"killed a process the test left behind: pid {p.pid}: {cmdline}", stacklevel=1)
