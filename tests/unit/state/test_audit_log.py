"""The audit trail: its records (secret arguments redacted), the chain `verify` checks, the writer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from mcpwrap.config import load
from mcpwrap.protocol import audit
from mcpwrap.state import audit_chain
from mcpwrap.state.audit_log import AuditError, AuditLog

CALLER = audit.Caller("bearer:0123", "http", "session-1")
TOOLS = b"""
[tools.deploy]
command = ["deploy", "--token={token}", "{target}", ["-e", "{extra}"], "--", "{token}"]
args.token = { type = "string", secret = true }
args.target = { type = "string" }
args.extra = { type = "array", items = { type = "string" }, secret = true, optional = true }
"""


def _tool(tmp_path: Path) -> load.Tool:
    tool = load.loads(TOOLS, tmp_path / "tools.toml").tool("deploy")
    assert tool is not None
    return tool


def _write(path: Path, n: int, **kw: object) -> AuditLog:
    log = AuditLog(path, **kw)  # type: ignore[arg-type]
    for i in range(n):
        log.append(audit.call_end(CALLER, i, "deploy", 0, None, 0.5, i, False, False))
    return log


def _verify(*paths: Path) -> audit_chain.Verdict:
    return audit_chain.verify([(str(p), p.read_bytes()) for p in paths])


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_untouched_log_verifies_and_file_is_private_under_umask_0(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = tmp_path / "audit.log"
        _write(path, 20).close()
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o600
    verdict = _verify(path)
    assert verdict.problem is None and verdict.lines == 21 and verdict.torn_tail is None
    first = orjson.loads(_lines(path)[0])
    assert first["event"] == "audit.header" and first["prev"] == audit_chain.GENESIS


def _tampered(tmp_path: Path, change) -> str | None:  # type: ignore[no-untyped-def]
    path = tmp_path / "audit.log"
    _write(path, 10).close()
    lines = _lines(path)
    change(lines)
    path.write_bytes(b"".join(lines))
    return _verify(path).problem


def _edit(lines: list[bytes]) -> None:
    lines[4] = lines[4].replace(b'"bytes_out":3', b'"bytes_out":4')


def _recompute_prev(lines: list[bytes]) -> None:
    _edit(lines)
    record = orjson.loads(lines[5])
    record["prev"] = audit_chain.line_hash(lines[4])
    lines[5] = orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n"


def _insert(lines: list[bytes]) -> None:
    """A line made to chain to the one before it, with the next sequence number."""
    before = orjson.loads(lines[3])
    forged = audit.call_end(CALLER, 99, "deploy", 0, None, 0.5, 99, False, False)
    lines.insert(4, audit_chain.encode(forged, before["seq"] + 1, audit_chain.line_hash(lines[3]), 0.0))


def test_rotation_chains_across_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _write(path, 200, max_bytes=8192).close()
    rotated = sorted(tmp_path.glob("audit.log.*"), key=lambda p: -int(p.suffix[1:]))
    assert len(rotated) >= 2
    verdict = _verify(*rotated, path)
    assert verdict.problem is None and verdict.notes == [] and verdict.lines == 200 + 1 + len(rotated)
    assert all(p.stat().st_size <= 8192 for p in rotated)
    newest_header = orjson.loads(_lines(path)[0])
    assert newest_header["prev"] == audit_chain.line_hash(_lines(rotated[-1])[-1])
    assert _verify(*rotated[:-1], path).problem is not None        # a file left out breaks the chain


def test_restart_continues_the_chain_and_a_torn_line_is_recovered(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _write(path, 3).close()
    with open(path, "ab") as f:
        f.write(b'{"event":"call.start","argu')                  # a writer died mid-line
    assert _verify(path).torn_tail == f"{path}:5"
    _write(path, 2).close()
    verdict = _verify(path)
    assert verdict.problem is None and verdict.torn_tail is None and verdict.lines == 4 + 1 + 2
    assert verdict.notes == [f"{path}:5: a line left unfinished by a writer that died, recovered at line 6"]


def test_two_writers_on_one_file_are_serialised(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    logs = [AuditLog(path, fsync=False) for _ in range(2)]

    def run(log: AuditLog) -> None:
        for i in range(200):
            log.append(audit.task_cancelled(CALLER, i, "t"))

    threads = [threading.Thread(target=run, args=(log,)) for log in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    verdict = _verify(path)
    assert verdict.problem is None and verdict.lines == 401


def test_a_file_others_may_write_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _write(path, 1).close()
    path.chmod(0o622)
    with pytest.raises(Exception, match="writable by group or others"):
        _write(path, 1)


def test_a_last_line_that_is_not_a_record_stops_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _write(path, 1).close()
    with open(path, "ab") as f:
        f.write(b"garbage\n")
    with pytest.raises(AuditError, match="not an audit record"):
        _write(path, 1)


WRITER = """
import sys
from pathlib import Path
from mcpwrap.protocol import audit
from mcpwrap.state.audit_log import AuditLog
log = AuditLog(Path(sys.argv[1]), fsync=False)
caller = audit.Caller("local", "stdio")
for i in range(10**9):
    log.append(audit.call_end(caller, i, "t" * 2000, 0, None, 0.1, i, False, False))
    if i == 50:
        print("ready", flush=True)
"""


def test_writer_killed_mid_write_verifies_to_the_last_complete_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    verdict = _verify(path)
    complete = path.read_bytes().count(b"\n")
    assert verdict.problem is None and verdict.lines == complete > 50
    if not path.read_bytes().endswith(b"\n"):
        assert verdict.torn_tail == f"{path}:{complete + 1}"
    _write(path, 1).close()                                        # the next writer continues the chain
    assert _verify(path).problem is None


def test_server_audit_keys(tmp_path: Path) -> None:
    config = load.loads(TOOLS + b'[server]\naudit = "log/audit.jsonl"\naudit_required = true\naudit_max_bytes = "1MiB"\n',
                        tmp_path / "tools.toml")
    assert config.audit == load.Audit(tmp_path.resolve() / "log/audit.jsonl", True, 1024 * 1024)
    with pytest.raises(load.ConfigError, match="'audit_required' needs 'audit = FILE'"):
        load.loads(TOOLS + b"[server]\naudit_required = true\n", tmp_path / "tools.toml")
