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
from hypothesis import given, settings, strategies as st

from mcpwrap.config import load
from mcpwrap.protocol import audit
from mcpwrap.protocol.argv import build_argv
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


def test_secret_argument_redacted_in_arguments_and_argv(tmp_path: Path) -> None:
    tool = _tool(tmp_path)
    args = {"token": "hunter2", "target": "prod", "extra": ["a", "b"]}
    argv = ["/usr/bin/prlimit", "--", *build_argv(tool, args)]
    record = audit.call_start(CALLER, 1, tool, args, argv, "/srv", "cgroup", "landlock")
    assert b"hunter2" not in orjson.dumps(record)
    assert record["arguments"] == {"token": "[redacted]", "target": "prod", "extra": ["[redacted]", "[redacted]"]}
    assert record["argv"] == ["/usr/bin/prlimit", "--", "deploy", "--token=[redacted]", "prod", "-e", "[redacted]",
                              "-e", "[redacted]", "--", "[redacted]"]
    assert record["identity"] == "bearer:0123" and record["event"] == "call.start"


def test_unknown_tool_refusal_records_argument_names_only() -> None:
    record = audit.refused(CALLER, 2, "unknown", "nope", {"password": "hunter2"}, "no such tool")
    assert b"hunter2" not in orjson.dumps(record) and record["argument_names"] == ["password"]


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


@pytest.mark.parametrize("change, named", [
    (_edit, "audit.log:6: line 5 was edited"),
    (lambda lines: lines.pop(4), "audit.log:5: seq jumps from 3 to 5: 1 line(s) removed"),
    (lambda lines: lines.__setitem__(slice(4, 6), [lines[5], lines[4]]), "audit.log:5: seq 5 comes before seq 4"),
    (lambda lines: lines.insert(4, lines[3]), "audit.log:5: a copy of line 4 (inserted)"),
    (_insert, "audit.log:6: it chains to line 4: line 5 was inserted"),
    (_recompute_prev, "audit.log:7: line 6 was edited"),
    (lambda lines: lines.pop(0), "audit.log:1: the file does not start with an audit.header"),
])
def test_verify_names_the_first_bad_line(tmp_path: Path, change, named: str) -> None:  # type: ignore[no-untyped-def]
    problem = _tampered(tmp_path, change)
    assert problem is not None and named in problem, problem


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_single_byte_change_is_detected(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("prop") / "audit.log"
    _write(path, 6).close()
    anchor = _verify(path).last_hash
    raw = bytearray(path.read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1))
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != raw[at]))
    raw[at] = byte
    verdict = audit_chain.verify([("audit.log", bytes(raw))])
    # a change in any line but the last breaks the chain; the last one is held by the anchor (the
    # last hash `mcpwrap audit verify` prints, kept elsewhere) alone, as for any unkeyed chain
    last_line = at >= raw.rstrip(b"\n").rfind(b"\n", 0, len(raw) - 1)
    assert verdict.problem is not None or verdict.torn_tail is not None or last_line and verdict.last_hash != anchor


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
