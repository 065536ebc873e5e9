"""Landlock on the real kernel: children started with `enforce` as preexec_fn, and what they can
still do. Tests that need Landlock (or a given ABI) are skipped, with the reason, where the
kernel has none; MCPWRAP_LANDLOCK_ABI=N in the environment runs them as on an older kernel."""

from __future__ import annotations

import errno
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mcpwrap.run import landlock
from mcpwrap.run.landlock import Policy

needs_landlock = pytest.mark.skipif(landlock.abi() == 0, reason="Landlock is not available on this kernel")

# What running /bin/cat, /bin/sh or Python needs: on Debian /bin, /lib, /lib64 are links into
# /usr; the interpreter may live elsewhere (pyenv), hence its prefix.
RUNTIME = tuple(p for p in ("/usr", "/bin", "/lib", "/lib64", sys.base_prefix) if os.path.exists(p))
PYTHON = os.path.realpath(sys.executable)

# A Python child that tries one thing and prints "ok" or the errno name, e.g. "EACCES".
ATTEMPT = """\
import errno, os, socket, sys
try:
    {}
except OSError as exc:
    print(errno.errorcode[exc.errno])
else:
    print("ok")
"""


def sandboxed(policy: Policy, argv: list[str], abi_level: int | None = None) -> subprocess.CompletedProcess[str]:
    ruleset = landlock.prepare(policy, abi_level)
    try:
        return subprocess.run(argv, preexec_fn=lambda: landlock.enforce(ruleset.fd), capture_output=True,
                              text=True, timeout=60)
    finally:
        ruleset.close()


def attempt(policy: Policy, statement: str, abi_level: int | None = None) -> str:
    done = sandboxed(policy, [PYTHON, "-I", "-S", "-c", ATTEMPT.format(statement)], abi_level)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A tmp 'home' with a secret outside any policy path, and a work tree beside it."""
    (tmp_path / "secret").write_text("secret\n")
    (tmp_path / "work" / "out").mkdir(parents=True)
    (tmp_path / "work" / "notes").write_text("notes\n")
    return tmp_path


@needs_landlock
def test_only_read_paths_can_be_read(home: Path) -> None:
    policy = Policy(read=(str(home / "work"), *RUNTIME), write=(), network=True)
    inside = sandboxed(policy, ["cat", str(home / "work" / "notes")])
    assert (inside.returncode, inside.stdout) == (0, "notes\n"), inside.stderr
    outside = sandboxed(policy, ["cat", str(home / "secret")])
    assert outside.returncode != 0 and outside.stdout == ""
    assert "Permission denied" in outside.stderr


@needs_landlock
def test_only_write_paths_can_be_written(home: Path) -> None:
    policy = Policy(read=(str(home / "work"), *RUNTIME), write=(str(home / "work" / "out"),), network=True)
    inside = sandboxed(policy, ["sh", "-c", f"echo made > {home / 'work' / 'out' / 'new'}"])
    assert inside.returncode == 0, inside.stderr
    assert (home / "work" / "out" / "new").read_text() == "made\n"
    for target in (home / "work" / "new", home / "new"):      # readable, and not even that
        outside = sandboxed(policy, ["sh", "-c", f"echo made > {target}"])
        assert outside.returncode != 0 and "Permission denied" in outside.stderr
        assert not target.exists()
    appended = sandboxed(policy, ["sh", "-c", f"echo more >> {home / 'work' / 'notes'}"])
    assert appended.returncode != 0 and (home / "work" / "notes").read_text() == "notes\n"


@needs_landlock
@pytest.mark.skipif(landlock.abi() < 3, reason="truncation is handled from Landlock ABI 3")
def test_files_outside_write_cannot_be_truncated(home: Path) -> None:
    policy = Policy(read=(str(home / "work"), *RUNTIME), write=(), network=True)
    notes, secret = home / "work" / "notes", home / "secret"
    assert attempt(policy, f"os.truncate({str(secret)!r}, 0)") == "EACCES"
    assert attempt(policy, f"os.open({str(notes)!r}, os.O_RDONLY | os.O_TRUNC)") == "EACCES"
    assert (secret.read_text(), notes.read_text()) == ("secret\n", "notes\n")


@needs_landlock
def test_a_file_path_gets_file_rights_only(home: Path) -> None:
    notes, log = home / "work" / "notes", home / "work" / "out" / "log"
    log.write_text("one\n")
    policy = Policy(read=(str(notes), *RUNTIME), write=(str(log),), network=True)
    assert sandboxed(policy, ["cat", str(notes)]).stdout == "notes\n"
    appended = sandboxed(policy, ["sh", "-c", f"echo two >> {log}"])
    assert appended.returncode == 0, appended.stderr
    assert log.read_text() == "one\ntwo\n"
    beside = sandboxed(policy, ["sh", "-c", f"echo x > {log.parent / 'beside'}; ls {notes.parent}"])
    assert beside.returncode != 0 and not (log.parent / "beside").exists()


@needs_landlock
def test_missing_paths_are_skipped_and_reported(home: Path) -> None:
    gone, under_file = str(home / "gone"), str(home / "work" / "notes" / "x")
    policy = Policy(read=(gone, str(home / "work"), *RUNTIME), write=(under_file,), network=True)
    ruleset = landlock.prepare(policy)
    ruleset.close()
    assert ruleset.skipped == (gone, under_file)
    assert sandboxed(policy, ["cat", str(home / "work" / "notes")]).stdout == "notes\n"


@needs_landlock
@pytest.mark.skipif(landlock.abi() < 4, reason="TCP is handled from Landlock ABI 4")
@pytest.mark.parametrize(("network", "abi_level", "expected"),
                         [(False, None, "EACCES"), (True, None, "ok"), (False, 3, "ok")],
                         ids=["network-false", "network-true", "network-false-on-abi-3"])
def test_tcp_connect_follows_network(network: bool, abi_level: int | None, expected: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        policy = Policy(read=RUNTIME, write=(), network=network)
        statement = f"socket.create_connection(('127.0.0.1', {port}), timeout=60).close()"
        assert attempt(policy, statement, abi_level) == expected


@needs_landlock
@pytest.mark.skipif(landlock.abi() < 6, reason="scoping needs Landlock ABI 6")
def test_a_sandboxed_child_cannot_signal_outside() -> None:
    policy = Policy(read=RUNTIME, write=(), network=True)
    assert attempt(policy, "os.kill(os.getpid(), 0)") == "ok"
    assert attempt(policy, f"os.kill({os.getpid()}, 0)") == "EPERM"


@needs_landlock
@pytest.mark.skipif(landlock.abi() < 6, reason="scoping needs Landlock ABI 6")
def test_a_sandboxed_child_cannot_reach_an_abstract_socket_outside() -> None:
    name = f"\0mcpwrap-test-{secrets.token_hex(8)}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(name)
        listener.listen()
        statement = f"socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect({name!r})"
        assert attempt(Policy(read=RUNTIME, write=(), network=True), statement) == "EPERM"


@needs_landlock
def test_enforce_sets_no_new_privs() -> None:
    """Root could restrict itself without it (CAP_SYS_ADMIN); a setuid tool must still not gain privileges."""
    get = "import ctypes; print(ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))"     # PR_GET_NO_NEW_PRIVS
    done = sandboxed(Policy(read=RUNTIME, write=(), network=True), [PYTHON, "-I", "-S", "-c", get])
    assert (done.returncode, done.stdout) == (0, "1\n"), done.stderr


def _enforce_errno(fd: int) -> int:
    """enforce(fd) in a forked child (it restricts for good); its exit code is the errno, 0 if none."""
    pid = os.fork()
    if pid == 0:
        code = 255
        try:
            landlock.enforce(fd)
            code = 0
        except OSError as exc:
            code = exc.errno or 255
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@needs_landlock
def test_enforce_on_a_bad_fd_raises_and_popen_fails(tmp_path: Path) -> None:
    with open(tmp_path / "plain", "w") as plain:
        closed = os.dup(plain.fileno())
        os.close(closed)
        assert _enforce_errno(closed) == errno.EBADF
        assert _enforce_errno(plain.fileno()) == errno.EBADFD     # open, but not a ruleset
    ran = tmp_path / "ran"
    with pytest.raises(subprocess.SubprocessError):
        subprocess.run(["touch", str(ran)], preexec_fn=lambda: landlock.enforce(closed), timeout=60)
    assert not ran.exists()


@needs_landlock
def test_the_abi_cap_simulates_an_older_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(landlock.ABI_ENV, raising=False)     # this file may run under a cap itself
    real = landlock.abi()
    monkeypatch.setenv(landlock.ABI_ENV, "3")
    assert landlock.abi() == min(real, 3)
    offline = Policy(read=RUNTIME, write=(), network=False)
    assert f"network = false needs Landlock ABI 4 (this kernel has ABI {min(real, 3)})" in \
        landlock.missing(offline, landlock.abi())
    monkeypatch.setenv(landlock.ABI_ENV, "99")
    assert landlock.abi() == real


def test_abi_0_means_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(landlock.ABI_ENV, "0")
    assert landlock.abi() == 0
    policy = Policy(read=RUNTIME, write=(), network=False)
    assert landlock.missing(policy, landlock.abi()) == [landlock.UNAVAILABLE]
    assert landlock.describe(policy, landlock.abi()) == [landlock.UNAVAILABLE]
    with pytest.raises(landlock.LandlockError, match="not available"):
        landlock.prepare(policy)
    monkeypatch.setenv(landlock.ABI_ENV, "three")
    with pytest.raises(landlock.LandlockError, match=landlock.ABI_ENV):
        landlock.abi()


@pytest.mark.parametrize("abi", range(1, 8))
def test_missing_names_each_gap_up_to_the_abi_that_closes_it(abi: int) -> None:
    def needed(policy: Policy) -> set[int]:
        return {int(line.split("needs Landlock ABI ")[1][0]) for line in landlock.missing(policy, abi)}

    everything = Policy(read=("/usr", "/dev/null"), write=(), network=False)
    assert needed(everything) == {need for need in (3, 4, 5, 6) if abi < need}
    assert needed(Policy(read=("/usr", "/"), write=(), network=False)) == needed(everything)   # / reaches /dev
    assert needed(Policy(read=("/usr", "/devices"), write=(), network=True)) == {need for need in (3, 6) if abi < need}
    assert all(f"(this kernel has ABI {abi})" in line for line in landlock.missing(everything, abi))


def test_describe_says_what_is_and_is_not_enforced() -> None:
    offline = Policy(read=("/usr",), write=(), network=False)
    lines = landlock.describe(offline, 7)
    assert "TCP bind and connect are denied" in lines
    assert any("UDP" in line and "not restricted" in line for line in lines)
    assert not landlock.missing(offline, 7)
    older = landlock.describe(offline, 3)
    assert "TCP bind and connect are denied" not in older
    assert set(landlock.missing(offline, 3)) <= set(older)
    assert any("another directory" in line for line in landlock.describe(offline, 1))
    assert "the network is not restricted (network = true)" in landlock.describe(Policy(("/usr",), (), True), 7)
