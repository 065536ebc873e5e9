"""`mcpwrap audit verify|tail`: the audit trail (`serve --audit`, `[server] audit`) from the shell.

`verify FILE` checks FILE and the rotated files before it (FILE.N ... FILE.1, those that exist,
oldest first) with `state.audit_chain.verify`. Exit status: 0 the chain holds (the last hash is
printed: keep it elsewhere, it anchors everything checked); 1 a line fails (named on stderr as
FILE:LINE: why); 3 a file cannot be read; 5 the chain holds up to an unfinished last line (a
writer died mid-write, or is writing now). `tail` prints the last lines, one event a line.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcpwrap.cli.common import EXIT_CONFIG, EXIT_TOOL_ERROR, UsageError, fail, note

EXIT_TAMPERED = EXIT_TOOL_ERROR
EXIT_TORN_TAIL = 5
FOLLOW_POLL_S = 0.25


def rotated(file: Path) -> list[Path]:
    """FILE.N ... FILE.1 that exist (no gap), then FILE: the trail oldest first."""
    older = []
    n = 1
    while Path(f"{file}.{n}").exists():
        older.append(Path(f"{file}.{n}"))
        n += 1
    return [*reversed(older), file]


def audit_verify(file: str) -> None:
    from mcpwrap.state.audit_chain import verify

    paths = rotated(Path(file))
    try:
        verdict = verify([(str(p), p.read_bytes()) for p in paths])
    except OSError as exc:
        fail(f"cannot read {exc.filename}: {exc.strerror}", EXIT_CONFIG)
    for text in verdict.notes:
        note(text)
    if verdict.problem is not None:
        fail(f"{verdict.problem}; {verdict.lines} line(s) before it verify", EXIT_TAMPERED)
    print(f"ok: {verdict.lines} lines in {len(paths)} file(s) chain; last hash {verdict.last_hash}")  # stdout-ok
    if verdict.torn_tail is not None:
        note(f"{verdict.torn_tail}: unfinished last line (a writer died mid-write, or is writing now)")
        raise SystemExit(EXIT_TORN_TAIL)


def audit_tail(file: str, lines: str, follow: bool) -> None:
    try:
        count = int(lines)
    except ValueError:
        count = -1
    if count < 0:
        raise UsageError(f"-n wants a number of lines, not {lines!r}")
    path = Path(file)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}", EXIT_CONFIG)
    with os.fdopen(fd, "rb") as f:
        _show(_last_lines(f, count))
        moved = follow and _follow(path, f)
    while moved:                                  # rotated: its successor, from its first line
        with open(path, "rb") as f:
            moved = _follow(path, f)


def _last_lines(f: Any, count: int) -> bytes:
    """The last `count` complete lines of the open file, which is left at its end."""
    end = f.seek(0, os.SEEK_END)
    pos, tail = end, b""
    while pos > 0 and tail.count(b"\n") <= count:
        step = min(pos, 64 * 1024)
        pos -= step
        f.seek(pos)
        tail = f.read(step) + tail
    f.seek(end)
    complete = tail[:tail.rfind(b"\n") + 1]
    return b"\n".join(complete.split(b"\n")[-count - 1:-1]) + b"\n" if count else b""


def _follow(path: Path, f: Any) -> bool:
    """Print lines as they are appended; True when another file has taken the path (rotation)."""
    pending = b""
    while True:
        chunk = f.read()
        if chunk:
            done, _, pending = (pending + chunk).rpartition(b"\n")
            if done:
                _show(done + b"\n")
            continue
        try:
            if os.stat(path).st_ino != os.fstat(f.fileno()).st_ino:
                return True
        except FileNotFoundError:
            pass
        time.sleep(FOLLOW_POLL_S)


def _show(data: bytes) -> None:
    for text in _readable(data):
        sys.stdout.write(text + "\n")  # stdout-ok
    sys.stdout.flush()


def _readable(data: bytes) -> Iterator[str]:
    """One line per event: time, identity, kind, tool, outcome."""
    import orjson

    for line in data.splitlines():
        try:
            r = orjson.loads(line)
            if not isinstance(r, dict):
                raise TypeError(line)
        except (ValueError, TypeError):
            yield f"(not an audit record: {line[:60]!r})"
            continue
        yield "  ".join((str(r.get("time", "?")), str(r.get("identity") or "-"), str(r.get("event", "?")),
                         str(r.get("tool") or "-"), _outcome(r)))


def _outcome(r: dict[str, Any]) -> str:
    import shlex

    kind = r.get("event")
    if kind == "call.start":
        return shlex.join(map(str, r.get("argv") or []))
    if kind == "call.end":
        how = f"signal {r['signal']}" if r.get("signal") else f"exit {r.get('exit_status')}"
        extra = [" truncated" if r.get("truncated") else "", " isError" if r.get("is_error") else ""]
        return f"{how} in {r.get('duration_s')}s, {r.get('bytes_out')} bytes out{''.join(extra)}"
    if kind == "refused":
        return f"{r.get('reason')}: {r.get('detail')}"
    if kind == "confirm.asked":
        return str(r.get("question"))
    if kind == "confirm.answered":
        return str(r.get("answer"))
    if kind in ("task.created", "task.cancelled"):
        return str(r.get("task_id"))
    if kind == "task.finished":
        return f"{r.get('task_id')} {r.get('status')} (exit {r.get('exit_status')})"
    if kind == "audit.header":
        return f"{r.get('format')} (seq {r.get('seq')})"
    if kind == "audit.torn":
        return f"the line before was left unfinished ({r.get('torn_bytes')} bytes)"
    return ""
