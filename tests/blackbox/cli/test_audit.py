"""`mcpwrap audit verify|tail` from the shell: exit codes, the named line, the readable tail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcpwrap.protocol import audit
from mcpwrap.state.audit_log import AuditLog

CALLER = audit.Caller("bearer:0123", "http", "s")


def _mcpwrap(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpwrap", *args], capture_output=True, text=True, timeout=60)


def _log(path: Path, n: int, max_bytes: int | None = None) -> None:
    log = AuditLog(path, max_bytes=max_bytes, fsync=False)
    for i in range(n):
        log.append(audit.refused(CALLER, i, "denied", "deploy" if i % 2 else "build", {}, "not allowed"))
    log.close()


def test_verify_untouched_rotated_trail(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _log(path, 100, max_bytes=4096)
    assert (tmp_path / "audit.log.2").exists()
    done = _mcpwrap("audit", "verify", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: ") and "last hash" in done.stdout


def test_verify_names_the_edited_line_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _log(path, 5)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b"not allowed", b"allowed!!!!")
    path.write_bytes(b"".join(lines))
    done = _mcpwrap("audit", "verify", str(path))
    assert done.returncode == 1
    assert f"{path}:4: line 3 was edited" in done.stderr


def test_verify_reports_a_torn_tail_with_its_own_status(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _log(path, 3)
    with open(path, "ab") as f:
        f.write(b'{"event":"ref')
    done = _mcpwrap("audit", "verify", str(path))
    assert done.returncode == 5 and f"{path}:5: unfinished last line" in done.stderr


def test_verify_missing_file_exits_3(tmp_path: Path) -> None:
    assert _mcpwrap("audit", "verify", str(tmp_path / "none")).returncode == 3


def test_tail_prints_one_readable_line_per_event(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _log(path, 4)
    done = _mcpwrap("audit", "tail", str(path), "-n", "2")
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert len(rows) == 2
    assert rows[-1].endswith("bearer:0123  refused  deploy  denied: not allowed")


def test_tail_follow_prints_appended_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _log(path, 1)
    proc = subprocess.Popen([sys.executable, "-m", "mcpwrap", "audit", "tail", str(path), "-n", "1", "--follow"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and "refused" in proc.stdout.readline()
        log = AuditLog(path, fsync=False)
        log.append(audit.confirm_answered(CALLER, 9, "deploy", "decline"))
        log.close()
        assert proc.stdout.readline().rstrip().endswith("confirm.answered  deploy  decline")
    finally:
        proc.kill()
        proc.wait(timeout=30)
