"""Everything mcpwrap creates is 0600 / 0700 whatever the umask (issue 24, class 7).

A whole session runs under umask 0 (the most permissive there is): a secret made by
`mcpwrap secret init`, a stdio server that fills the schema-verdict cache, runs a task, spools
output beyond max_output and records a used requestState nonce; then every path under the
state and config directories (which mcpwrap itself made, parents included) must have no
group or world bits. The same holds for the helpers on their own.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpwrap.state import durable
from tests.harness import Server, mcpwrap_cmd, modern_meta

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


@pytest.fixture
def umask_zero() -> Iterator[None]:
    """The test and every process it starts run with umask 0."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def shared_paths(*roots: Path) -> list[str]:
    """Every path under `roots` (the roots too) that group or others may access at all."""
    found = []
    for root in roots:
        for path in [root, *root.rglob("*")]:
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and stat.S_IMODE(mode) & 0o077:
                found.append(f"{path.relative_to(root.parent)} {stat.S_IMODE(mode):04o}")
    return found


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


def test_the_helpers_ignore_the_umask(tmp_path: Path, umask_zero: None) -> None:
    durable.make_private_dir(tmp_path / "a" / "b" / "c", parents=True)
    os.close(durable.create_private(tmp_path / "a" / "file"))
    os.close(durable.open_private(tmp_path / "a" / "b" / "opened", os.O_RDWR | os.O_CREAT))
    durable.write_atomic(tmp_path / "a" / "atomic", b"x")
    durable.write_private(tmp_path / "a" / "user", b"x")
    assert shared_paths(tmp_path / "a") == []
    assert stat.S_IMODE((tmp_path / "a" / "b" / "c").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a" / "file").stat().st_mode) == 0o600


def test_a_restrictive_umask_still_gives_the_owner_access(tmp_path: Path) -> None:
    old = os.umask(0o377)
    try:
        durable.make_private_dir(tmp_path / "d" / "e", parents=True)
        os.close(durable.create_private(tmp_path / "d" / "e" / "f"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "d" / "e" / "f").stat().st_mode) == 0o600
