"""Red-team attacks on what issue 24's review did not reach: the front's hand-over to trio, hot-reload
races, the task ceiling and the nonce ledger across crashes, and Landlock grants through links.

Each test attacks one promise of the README's security model; those that held on the code they were
written against stay as regression tests. Waits are for events (a message, a stderr line, a process
gone), never sleeps; every timeout is a hang guard.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpwrap import config
from tests.harness import HANG_S, Server, until, write_atomically

TOOLS = """
[tools.echo]
command = ["echo", "{msg}"]
args.msg = { type = "string" }
"""
NEXT = TOOLS + """
[tools.next]
command = ["echo", "next"]
"""
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tests", "version": "1"}}


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    return path


def echoes(server: Server, text: str) -> None:
    """The server is alive and still serves its last good tools."""
    answer = server.call("tools/call", {"name": "echo", "arguments": {"msg": text}})
    assert answer["result"]["content"][0]["text"] == text + "\n", answer


def tool_names(server: Server) -> set[str]:
    return {tool["name"] for tool in server.call("tools/list")["result"]["tools"]}


# --- 2. hot reload: whatever the tools file becomes, the last good tools stay ---------------------
MAX_TOOLS_FILE = config.MAX_FILE_BYTES


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _dev_zero(path: Path) -> None:
    link = path.with_name("zero")
    link.symlink_to("/dev/zero")
    link.replace(path)


def _huge(path: Path) -> None:
    """A valid tools file past the size bound (a log or a dump linked by mistake could as well be
    gigabytes): read whole, it was accepted."""
    huge = path.with_name("huge")
    huge.write_bytes(NEXT.encode() + b"# " + b"x" * (MAX_TOOLS_FILE - len(NEXT) - 2) + b"\n")
    huge.replace(path)


def _truncated(path: Path) -> None:
    with path.open("r+") as f:
        f.truncate(0)


def _deleted(path: Path) -> None:
    path.unlink()


def _nested(path: Path) -> None:
    """Valid UTF-8, and TOML that the standard parser reads by recursion: past Python's recursion
    limit it raises RecursionError, not a TOML error."""
    write_atomically(path, TOOLS + "\n[x]\ny = " + "[" * 100_000 + "]" * 100_000 + "\n")


HOSTILE = {"directory": (_directory, "not a regular file"), "dev-zero": (_dev_zero, "not a regular file"),
           "huge": (_huge, "larger than"), "truncated": (_truncated, "no tools defined"),
           "deleted": (_deleted, "is gone"), "nested": (_nested, "maximum recursion depth")}


@pytest.mark.parametrize("change", list(HOSTILE))
def test_a_hostile_tools_file_keeps_the_last_good_tools_and_the_next_good_one_is_taken(
        tools: Path, tmp_path: Path, change: str) -> None:
    make, reason = HOSTILE[change]
    with Server(tools, tmp_path) as server:
        server.initialize()
        make(tools)
        server.wait_stderr(reason)
        assert any("keeping the last good tools" in line for line in server.stderr), server.stderr
        echoes(server, "still here")
        assert tool_names(server) == {"echo"}
        if tools.is_dir():
            tools.rmdir()
        elif tools.exists() or tools.is_symlink():
            tools.unlink()
        write_atomically(tools, NEXT)
        server.wait_stderr("reloaded")
        assert tool_names(server) == {"echo", "next"}
        echoes(server, "after")
        assert server.close() == 0
        assert not any("Traceback" in line for line in server.stderr), server.stderr
