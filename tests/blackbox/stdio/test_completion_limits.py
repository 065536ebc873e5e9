"""completion/complete is rate limited: one run of a `complete` command answers every request for it.

The spec (server/utilities/completion.mdx, "Security", 2025-03-26 onwards): "Implementations
**MUST**: ... Implement appropriate rate limiting" (and server-obligations.txt, Completion: "Apply
rate limiting on the server side"). A client completes as the user types, one request a keystroke,
and the command's output does not depend on the typed value (the core filters it by the prefix):
so requests for the same command while it runs wait for that run, and a fresh result is cached
for `COMPLETION_TTL_S`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import Server, until
from tests.unit.protocol.test_prompts_completion import (
    CANDIDATES,
    SCRIPT,
    TOOLS,
    WORD,
    values,
)


@pytest.mark.parametrize("fails", [False, True])
def test_keystrokes_over_stdio_run_the_command_once(tmp_path: Path, fails: bool) -> None:
    path = tmp_path / "tools.toml"
    script = SCRIPT.replace("printf", "exit 3; printf") if fails else SCRIPT
    path.write_text(TOOLS.replace("SCRIPT", script))
    with Server(path, tmp_path) as server:
        server.initialize("2025-11-25")
        assert "result" in server.call("tools/call", {"name": "echo", "arguments": {}})   # trio serves from here
        prefixes = [WORD[:n] for n in range(1, 51)]
        ids = [server.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "pick"},
                                                      "argument": {"name": "word", "value": p}}) for p in prefixes]
        server.call("ping")                       # answered after all 50 were received
        (tmp_path / "gate").touch()
        answers = server.responses(ids)
        if fails:
            assert all(values(a) == [] for a in answers)
        else:
            assert [values(a) for a in answers] == [[c for c in CANDIDATES if c.startswith(p)] for p in prefixes]
        runs = until(lambda: (tmp_path / "counter").read_text().splitlines(), "the counter")
        assert len(runs) == 1, f"the complete command ran {len(runs)} times for 50 keystrokes"
