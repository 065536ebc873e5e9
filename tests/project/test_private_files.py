"""Everything mcpwrap creates is 0600 / 0700 whatever the umask (issue 24, class 7).

A whole session runs under umask 0 (the most permissive there is): a secret made by
`mcpwrap secret init`, a stdio server that fills the schema-verdict cache, runs a task, spools
output beyond max_output and records a used requestState nonce; then every path under the
state and config directories (which mcpwrap itself made, parents included) must have no
group or world bits. The same holds for the helpers on their own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


from tests.harness import Server, mcpwrap_cmd, modern_meta
from tests.unit.state.test_durable import shared_paths

TOOLS = """
[tools.create]
description = "Append a line to a marker file, after confirmation"
command = ["sh", "-c", "echo ran >> \\"$1\\"", "sh", "{path}"]
confirm = "Create {path}?"
args.path = { type = "string" }

[tools.job]
description = "More output than max_output, as a task"
command = ["head", "-c", "200000", "/dev/zero"]
max_output = "1KiB"
task = "optional"
"""


def test_a_session_under_umask_0_leaves_nothing_shared(tmp_path: Path, umask_zero: None) -> None:
    """The verdict cache was 0666 (`Path.touch`), parents made by `mkdir -p` 0777."""
    tools, marker = tmp_path / "tools.toml", tmp_path / "marker"
    tools.write_text(TOOLS)
    config, state = tmp_path / "cfg", tmp_path / "st"
    secret = config / "deep" / "mcpwrap" / "secret"
    subprocess.run(mcpwrap_cmd("secret", "init", "--secret-file", str(secret)), check=True, capture_output=True,
                   timeout=60)
    with Server(tools, tmp_path, secret=secret, state=state / "deep" / "mcpwrap") as s:
        s.initialize("2025-11-25")
        s.notify("notifications/initialized")
        task = s.call("tools/call", {"name": "job", "arguments": {}, "task": {"ttl": 60000}})["result"]["task"]
        payload = s.call("tasks/result", {"taskId": task["taskId"]})["result"]
        assert any(b["type"] == "resource_link" for b in payload["content"])     # spooled
        inline = s.call("tools/call", {"name": "job", "arguments": {}})["result"]
        assert any(b["type"] == "resource_link" for b in inline["content"])
        params = {"_meta": modern_meta({"elicitation": {}}), "name": "create", "arguments": {"path": str(marker)}}
        first = s.call("tools/call", params)["result"]
        done = s.call("tools/call", {**params, "requestState": first["requestState"],
                                     "inputResponses": {"confirm": {"action": "accept"}}})["result"]
        assert done["isError"] is False and marker.read_text() == "ran\n"
    subprocess.run(mcpwrap_cmd("secret", "rotate", "--secret-file", str(secret)), check=True, capture_output=True,
                   timeout=60)
    made = {p.name for p in state.rglob("*")}
    assert {"validated", "nonces", "output", "tasks"} <= made, made
    assert shared_paths(config, state) == []
