"""Terminal manners: progress and colour only on a terminal, NO_COLOR honoured, plain when piped."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

from tests.harness import HANG_S, mcpwrap_cmd

TOOLS = r"""
[tools.count]
shell = 'for i in 1 2 3; do echo "$i/3" >&2; sleep 0.05; done; echo counted'
progress = '(?<!\d)(\d+)/(\d+)'
"""


def run_on_terminal(args: list[str], env: dict[str, str], timeout: float = HANG_S) -> bytes:
    """Run with stdin, stdout and stderr on a pseudo-terminal; return everything it wrote."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(args, stdin=terminal, stdout=terminal, stderr=terminal, env=env, close_fds=True)
    os.close(terminal)
    output = b""
    deadline = time.monotonic() + timeout
    try:
        while select.select([controller], [], [], max(0.0, deadline - time.monotonic()))[0]:
            try:
                chunk = os.read(controller, 65536)
            except OSError:               # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            output += chunk
        else:
            raise AssertionError(f"still writing to its terminal after {timeout}s: {output!r}")
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
    return output


def test_progress_line_on_a_terminal_only(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text(TOOLS)
    env = {**os.environ}
    shown = run_on_terminal(mcpwrap_cmd("call", str(tools), "count"), env)
    assert b"\r\x1b[K" in shown and b"3/3" in shown and b"counted" in shown
    piped = subprocess.run(mcpwrap_cmd("call", str(tools), "count"), capture_output=True, timeout=30, env=env)
    assert piped.stdout == b"counted\n"
    assert b"\r" not in piped.stderr and b"\x1b[" not in piped.stderr
    assert piped.stderr.splitlines() == [b"1/3", b"2/3", b"3/3"]


def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text(TOOLS)
    coloured = run_on_terminal(mcpwrap_cmd("call", str(tools), "nope"), {**os.environ})
    assert b"\x1b[1;31mmcpwrap:" in coloured and b"no tool named 'nope'" in coloured
    plain = run_on_terminal(mcpwrap_cmd("call", str(tools), "nope"), {**os.environ, "NO_COLOR": "1"})
    assert b"\x1b[" not in plain and b"mcpwrap: no tool named 'nope'" in plain
    piped = subprocess.run(mcpwrap_cmd("call", str(tools), "nope"), capture_output=True, timeout=30)
    assert piped.returncode == 2 and piped.stderr.startswith(b"mcpwrap: no tool named")
