"""Every file or directory a flag names is checked before `serve` starts (issue 28, item 3).

A server that started on a token file it cannot read answered 401 to everything, forever; one
whose state directory cannot be made failed its first task. Each case here must be refused with
exit status 3, the path and the fix on stderr, and no traceback; the server must never say it is
serving (that line is the failure the unchanged code showed).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.harness import HANG_S, mcpwrap_cmd

TOOLS = '[tools.hi]\ncommand = ["echo", "hi"]\n'


def refused(*args: str, env: dict[str, str] | None = None) -> str:
    """Run mcpwrap; it must exit 3 without ever serving. Its stderr."""
    proc = subprocess.Popen(mcpwrap_cmd(*args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:          # ends at EOF: the process exited (or is killed below)
            lines.append(line)
            assert "serving" not in line, f"it started anyway: {''.join(lines)}"
        code = proc.wait(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(lines)
    assert code == 3, f"exit {code}: {text}"
    assert "Traceback" not in text, text
    return text


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    return path


def private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("kind", ["missing", "empty", "comments only", "a directory"])
def test_serve_refuses_a_token_file_it_cannot_use(tools: Path, tmp_path: Path, kind: str) -> None:
    # unchanged code: "missing" served (the banner, then 401 forever); "a directory" was told to chmod 600
    token = tmp_path / "tokens"
    if kind == "empty":
        private(token, "")
    elif kind == "comments only":
        private(token, "# the newest last\n\n")
    elif kind == "a directory":
        token.mkdir(mode=0o700)
    text = refused("serve", str(tools), "--http", "127.0.0.1:0", "--token-file", str(token))
    assert str(token) in text
    assert "token" in text and ("token_urlsafe" in text or "a line" in text)     # the fix
    if kind == "a directory":
        assert "a directory" in text and "chmod" not in text


def test_client_config_refuses_a_missing_token_file(tmp_path: Path) -> None:
    # unchanged code: IndexError traceback, exit 1
    missing = tmp_path / "nope"
    text = refused("client-config", "--url", "https://ops.example/mcp", "--token-file", str(missing), "-c", "cursor")
    assert str(missing) in text and "token_urlsafe" in text


@pytest.mark.parametrize("which", ["--certfile", "--keyfile"])
def test_serve_refuses_a_missing_certificate_or_key_naming_it(tools: Path, tmp_path: Path, which: str) -> None:
    # unchanged code: exit 2, "cannot serve TLS with --certfile ... and --keyfile ...", not saying which
    files = {"--certfile": tmp_path / "cert.pem", "--keyfile": tmp_path / "key.pem"}
    other = next(path for flag, path in files.items() if flag != which)
    private(other, "-----BEGIN X-----\n")
    text = refused("serve", str(tools), "--http", "127.0.0.1:0", *(f"{f}={p}" for f, p in files.items()))
    assert f"{which} {files[which]}: no such file" in text and "PEM" in text


@pytest.mark.parametrize("via", ["--state-dir", "MCPWRAP_STATE_DIR"])
def test_serve_refuses_a_state_dir_it_cannot_create(tools: Path, tmp_path: Path, via: str) -> None:
    # unchanged code: served (exit 0 at stdin's end); its first task would have failed
    blocker = private(tmp_path / "a-file", "x")
    state = blocker / "state"
    args, env = ((["--state-dir", str(state)], None) if via == "--state-dir"
                 else ([], {"MCPWRAP_STATE_DIR": str(state)}))
    text = refused("serve", str(tools), *args, env=env)
    assert f"{via} {state}: cannot be created ({blocker} is not a directory)" in text
    assert "give a directory this user can write" in text


def test_serve_refuses_a_state_dir_that_is_a_file(tools: Path, tmp_path: Path) -> None:
    state = private(tmp_path / "state", "x")
    assert f"--state-dir {state}: not a directory" in refused("serve", str(tools), "--state-dir", str(state))


def test_serve_refuses_a_secret_file_that_is_a_directory(tools: Path, tmp_path: Path) -> None:
    # unchanged code: served (exit 0); a confirmation or a task would have failed on it
    secret = tmp_path / "secret"
    secret.mkdir()
    text = refused("serve", str(tools), "--secret-file", str(secret))
    assert f"--secret-file {secret}: a directory" in text and "mcpwrap secret init" in text


def test_serve_refuses_a_missing_tools_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    assert f"{missing}:1:1: cannot read tools file" in refused("serve", str(missing))


def test_a_missing_secret_file_in_a_writable_place_is_fine(tools: Path, tmp_path: Path) -> None:
    """`serve` creates the secret file when a tool first needs it: naming one that is not there yet is no error."""
    done = subprocess.run(mcpwrap_cmd("serve", str(tools), "--secret-file", str(tmp_path / "new" / "secret"),
                                      "--state-dir", str(tmp_path / "state")),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr
