"""The audit trail's writer: whole lines appended to one file, chained (`state.audit_chain`).

`AuditLog.append(record)` is synchronous and blocking: a driver calls it through a worker thread
(`trio.to_thread.run_sync`), never on the event loop, and awaits it, so a call whose `call.start`
must be written is not spawned until it is. It returns the line's `seq` or raises `AuditError`
(a full disk, a file that is not ours...): nothing is dropped silently.

Each append is one `write(2)` on an O_APPEND fd of whole lines, then `fdatasync` when asked (`sync`,
by default the writer's `fsync`; without it only the page cache holds the line: a crash of the
machine, not of the process, may lose the last lines).
The file is created 0600 (`durable.create_private`); an existing one must be ours and writable by
nobody else (`durable.open_private`). Several processes may share a file (every `serve` of a
tools file whose `[server] audit` names it): an append holds `flock(LOCK_EX)` on it, and when the
file is not as this writer left it, it reads the last complete line to continue the chain.
A short write is cut off again (`ftruncate`) before the error is raised; a line left unfinished
by a writer that died is ended with a newline and followed by an `audit.torn` line.

Rotation: past `max_bytes`, the next append moves FILE.N to FILE.N+1 (none is deleted), and FILE
to FILE.1, having first made the new FILE, whose header chains to the old file's last line, under
a temporary name. For logrotate, `reopen()` (the driver calls it on SIGHUP) drops the fd, and every
append reopens the path anyway when the file there is no longer the one it holds; the header of
a file logrotate created chains to the last line this writer knows of.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from mcpwrap.state import audit_chain as chain
from mcpwrap.state.durable import UnsafePathError, create_private, open_private

_CHUNK = 64 * 1024


class AuditError(Exception):
    """The audit trail could not be written (or continued); the event it was for is not recorded."""


class AuditLog:
    """One audit file, appended to by this process (thread-safe) and any other that shares it."""

    def __init__(self, path: Path, *, max_bytes: int | None = None, fsync: bool = True,
                 clock: Callable[[], float] = time.time) -> None:
        self.path, self.max_bytes, self.fsync, self.clock = Path(path), max_bytes, fsync, clock
        self._mutex = threading.Lock()
        self._fd: int | None = None
        self._known: tuple[int, int] | None = None      # (inode, size) as this writer left the file
        self._prev, self._seq = chain.GENESIS, -1

    def append(self, record: Mapping[str, Any], *, sync: bool | None = None) -> int:
        """Write `record` as the next line; its `seq`. Raises AuditError. `sync` (default: the
        writer's `fsync`) says whether the line is flushed to the disk before this returns."""
        return self.append_many([record], sync=sync)

    def append_many(self, records: Sequence[Mapping[str, Any]], *, sync: bool | None = None) -> int:
        """Write `records` as the next lines, in one write (a group commit); the last one's `seq`.
        Raises AuditError: then none of them is written."""
        with self._mutex:
            try:
                return self._append(records, self.fsync if sync is None else sync)
            except OSError as exc:
                raise AuditError(f"cannot write the audit trail {self.path}: {exc.strerror or exc}") from exc
            except UnsafePathError as exc:
                raise AuditError(f"cannot write the audit trail: {exc}") from exc

    def reopen(self) -> None:
        """Let go of the file; the next append opens the path again (logrotate's SIGHUP)."""
        with self._mutex:
            self._close()

    def close(self) -> None:
        with self._mutex:
            self._close()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd, self._known = None, None

    def _append(self, records: Sequence[Mapping[str, Any]], sync: bool) -> int:
        fd = self._locked()
        try:
            st = os.fstat(fd)
            size = st.st_size
            torn = self._continue(fd, size) if size and self._known != (st.st_ino, size) else 0
            data, after = self._lines(records, size, torn)
            if self.max_bytes is not None and size and not torn and size + len(data) > self.max_bytes:
                fd = self._rotate(fd)
                size = os.fstat(fd).st_size
                data, after = self._lines(records, size, 0)
            self._write(fd, (b"\n" if torn else b"") + data, size, sync)
            self._prev, self._seq = after
            self._known = (os.fstat(fd).st_ino, os.fstat(fd).st_size)
            return self._seq
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _lines(self, records: Sequence[Mapping[str, Any]], size: int, torn: int) -> tuple[bytes, tuple[str, int]]:
        """The records' lines, after the header an empty file needs and the `audit.torn` line an
        unfinished one does; and the chain's (hash, seq) once they are written."""
        prev, seq, now = self._prev, self._seq, self.clock()
        lines = []
        for line_record in ([chain.header()] if size == 0 else []) + ([chain.torn(torn)] if torn else []) + [*records]:
            seq += 1
            line = chain.encode(line_record, seq, prev, now)
            prev = chain.line_hash(line)
            lines.append(line)
        return b"".join(lines), (prev, seq)

    def _locked(self) -> int:
        """The fd of the file now at the path, opened (created 0600) if need be, under LOCK_EX."""
        while True:
            if self._fd is None:
                self._fd = open_private(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
                os.set_blocking(self._fd, True)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                same = os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return self._fd
            fcntl.flock(self._fd, fcntl.LOCK_UN)         # rotated away (by us elsewhere, another writer, logrotate)
            self._close()

    def _continue(self, fd: int, size: int) -> int:
        """Take up the chain from the file's last complete line; the length of an unfinished line after it."""
        end, tail = size, b""
        while end > 0 and tail.count(b"\n") < 2:        # the last complete line lies between the last two
            start = max(0, end - _CHUNK)
            tail = os.pread(fd, end - start, start) + tail
            end = start
        lines = tail.split(b"\n")
        unfinished = lines.pop()                         # b"" when the file ends with a newline
        complete = lines[-1] if lines else b""
        try:
            seq = orjson.loads(complete)["seq"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise AuditError(f"cannot continue the audit trail {self.path}: its last line is not an audit "
                             "record; run: mcpwrap audit verify") from None
        self._prev, self._seq = chain.line_hash(complete), seq
        return len(unfinished)

    def _write(self, fd: int, data: bytes, size: int, sync: bool = True) -> None:
        """All of `data` in one write, synced; a short write is cut off again and raised."""
        try:
            written = os.write(fd, data)
        except OSError:
            os.ftruncate(fd, size)
            raise
        if written != len(data):
            os.ftruncate(fd, size)
            raise AuditError(f"cannot write the audit trail {self.path}: short write ({written} of {len(data)} bytes)")
        if sync:
            os.fdatasync(fd)

    def _rotate(self, fd: int) -> int:
        """FILE.N -> FILE.N+1, a new FILE (its header chaining to this one's last line) -> FILE;
        called under the old file's lock, which is kept until the caller's append is written."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(6)}.new")
        new = create_private(tmp, os.O_RDWR | os.O_APPEND)
        try:
            fcntl.flock(new, fcntl.LOCK_EX)
            header = chain.encode(chain.header(), self._seq + 1, self._prev, self.clock())
            self._write(new, header, 0)
            n = 1
            while os.path.lexists(f"{self.path}.{n}"):
                n += 1
            for k in range(n, 1, -1):
                os.rename(f"{self.path}.{k - 1}", f"{self.path}.{k}")
            os.rename(self.path, f"{self.path}.1")
            os.rename(tmp, self.path)
        except BaseException:
            os.close(new)
            tmp.unlink(missing_ok=True)
            raise
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        self._fd = new
        self._prev, self._seq = chain.line_hash(header), self._seq + 1
        self._known = (os.fstat(new).st_ino, len(header))
        return new
