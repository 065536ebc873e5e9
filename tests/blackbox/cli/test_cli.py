"""Terminal manners: progress and colour only on a terminal, NO_COLOR honoured, plain when piped."""

from __future__ import annotations

import base64
import json
import os
import pty
import re
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


TYPED = """
[tools.show]
command = ["printf", "%s|%s|%s|%s", "{branch}", "{n}", "{flag}", "{level}"]
args.branch = { type = "string" }
args.n = { type = "integer" }
args.flag = { type = "boolean", default = false }
args.level = { type = ["integer", "string"], default = 0 }
"""


def test_arg_values_are_typed_by_the_schema(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text(TYPED)

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(mcpwrap_cmd("call", str(tools), "show", *args), capture_output=True, text=True,
                              timeout=HANG_S)

    done = call("--arg", "branch=1.0", "--arg", "n=3", "--arg", "flag=true", "--arg", "level=high")
    assert (done.returncode, done.stdout) == (0, "1.0|3|true|high\n"), done.stderr
    assert call("--arg", "branch=1.0", "--arg", "n=3", "--arg", "level=7").stdout == "1.0|3|false|7\n"
    assert call('{"branch": "1.0", "n": 3}', "--arg", "branch=2.0").stdout == "2.0|3|false|0\n"
    bad = call("--arg", "branch=x", "--arg", "n=x")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "'n' takes integer" in bad.stderr and "nothing ran" in bad.stderr
    unknown = call("--arg", "branch=x", "--arg", "nn=3")
    assert unknown.returncode == 2 and "no argument 'nn'" in unknown.stderr
    assert "branch, n, flag, level" in unknown.stderr


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
IMAGES = f"""
[tools.png]
command = ["python3", "-c", "import sys; sys.stdout.buffer.write(bytes.fromhex('{PNG.hex()}'))"]
output = "image/png"

[tools.two]
command = ["python3", "-c", '''
import base64, json
data = base64.b64encode(bytes.fromhex("{PNG.hex()}")).decode()
print(json.dumps({{"content": [{{"type": "text", "text": "two charts"}},
    {{"type": "image", "data": data, "mimeType": "image/png"}},
    {{"type": "audio", "data": base64.b64encode(b"RIFF").decode(), "mimeType": "audio/wav"}}], "isError": True}}))
''']
output = "mcp"

[tools.words]
command = ["echo", "no chart"]
"""


def test_binary_content_goes_to_files_never_to_stdout(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text(IMAGES)
    plain = subprocess.run(mcpwrap_cmd("call", str(tools), "png"), capture_output=True, text=True, timeout=HANG_S)
    assert plain.returncode == 0 and plain.stdout.strip() == ""
    said = re.fullmatch(r"wrote image/png, (\d+) bytes, to (\S+\.png)\n", plain.stderr)
    assert said and int(said[1]) == len(PNG), plain.stderr
    written = Path(said[2])
    assert written.read_bytes() == PNG
    written.unlink()

    out = tmp_path / "chart.png"
    both = subprocess.run(mcpwrap_cmd("call", str(tools), "two", "--output", str(out)), capture_output=True,
                          text=True, timeout=HANG_S)
    assert (both.returncode, both.stdout) == (1, "two charts\n")
    assert out.read_bytes() == PNG and (tmp_path / "chart-2.png").read_bytes() == b"RIFF"
    assert f"wrote audio/wav, 4 bytes, to {tmp_path / 'chart-2.png'}" in both.stderr

    as_json = subprocess.run(mcpwrap_cmd("call", str(tools), "png", "--json", "-o", str(tmp_path / "no.png")),
                             capture_output=True, timeout=HANG_S)
    assert json.loads(as_json.stdout)["content"][0]["data"] == base64.b64encode(PNG).decode()
    assert not (tmp_path / "no.png").exists()
    words = subprocess.run(mcpwrap_cmd("call", str(tools), "words", "-o", str(tmp_path / "none.png")),
                           capture_output=True, text=True, timeout=HANG_S)
    assert (words.returncode, words.stdout) == (0, "no chart\n") and not (tmp_path / "none.png").exists()
    assert "no binary content; nothing written to" in words.stderr

    shown = run_on_terminal(mcpwrap_cmd("call", str(tools), "png", "-o", str(tmp_path / "t.png")), {**os.environ})
    assert PNG[:4] not in shown and b"wrote image/png" in shown
