"""The index of a task store: its tasks in creation order, so `tasks/list` pages cost the page.

`index.2` lists the tasks in creation order, one fixed-width line each
(key, expiry, a 32-bit tag of the creator's principal, id; `ENTRY` bytes), so
`tasks/list` pages cost the page: a cursor names the last entry shown (key,
position, id), the next page starts right after it (a binary search on the
increasing keys when a rewrite moved it), and only the records shown are
opened; expired entries and other principals' are skipped by the index alone. Chosen over the alternatives: a directory listing costs the
store on every page, id prefixes ordered by time would change the id format
clients and the CLI already hold, SQLite is a second source of truth that a
crash can disagree with. The records stay the truth: the record is written
(durably) before its entry is appended (under an flock on the store
directory, not synced), and a collection pass re-adds a record the index
misses and drops entries whose record is gone; a store written before the
index existed (or before `index.2`) gets one on first use, and a creator whose
record such a build already indexed does not append it again.

`Index` reads and writes the file; the records it is derived from are the store's
(`tasks.store`), which it is handed as two functions: the ids stored, and a record by id.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from mcpwrap.protocol import identity
from mcpwrap.protocol.tasking import TaskRecord, valid_id
from mcpwrap.state.durable import private_dir, write_atomic

INDEX = "index.2"            # the creation-ordered index of the store (see Store.page)
ENTRY = 63                   # bytes per index entry
OLD_INDEX = "index"          # the index before principals (no owner tag): a collection pass removes it


class Index:
    """The index file of the store at `root`: appended on creation, built when missing, rewritten by `gc`.

    `open_file` opens a file of the store, checked (`Store.open_file`); `ids` lists the ids with a
    record; `readable` is a record by id, None when it is gone or unreadable."""

    def __init__(self, root: Path, open_file: Callable[[Path, int], int], ids: Callable[[], list[str]],
                 readable: Callable[[str], TaskRecord | None]) -> None:
        self.root, self._open_file, self._ids, self._readable = root, open_file, ids, readable

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Appends and rewrites of the index, one at a time: an flock on the store directory
        itself (its inode never changes, unlike the index's, which a rewrite replaces)."""
        fd = private_dir(self.root, create=False)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def append(self, record: TaskRecord) -> None:
        """Add the record's entry with a key above every key in the index. Not synced: the index
        is derived from the records, and a pass of `gc` re-adds what a crash lost."""
        with self.locked():
            try:
                fd = self._open_file(self.root / INDEX, os.O_RDWR)
            except FileNotFoundError:
                if set(self._ids()) - {record.task_id}:
                    self.build()          # records of an earlier version: all of them, this one included
                    return
                fd = self._open_file(self.root / INDEX, os.O_RDWR | os.O_CREAT)
            try:
                size = os.fstat(fd).st_size
                if size % ENTRY:              # a torn entry from a crash: every later one would be misaligned
                    size -= size % ENTRY
                    os.ftruncate(fd, size)
                if _indexed(fd, size, record):
                    return                    # another process built the index after this record was written
                last = _parse_entry(os.pread(fd, ENTRY, size - ENTRY)) if size else None
                key = max(int(record.created_at * 1_000_000), last[0] + 1 if last else 0)
                os.pwrite(fd, _entry(key, record), size)
            finally:
                os.close(fd)

    def open(self) -> int:
        """The index as a checked fd. A store with records but no index (written by an earlier
        version) gets one first. FileNotFoundError: no store, or nothing in it."""
        try:
            return self._open_file(self.root / INDEX, os.O_RDONLY)
        except FileNotFoundError:
            if not self._ids():
                raise
        with self.locked():
            try:
                return self._open_file(self.root / INDEX, os.O_RDONLY)
            except FileNotFoundError:
                self.build()
        return self._open_file(self.root / INDEX, os.O_RDONLY)

    def build(self) -> None:
        """The index of every record, in creation order (the caller holds the index lock)."""
        records = sorted((r for i in self._ids() if (r := self._readable(i)) is not None),
                         key=lambda r: (r.created_at, r.task_id))
        entries, key = [], 0
        for record in records:
            key = max(int(record.created_at * 1_000_000), key + 1)
            entries.append(_entry(key, record))
        write_atomic(self.root / INDEX, b"".join(entries))

    def rewrite(self, stored: set[str], recent: set[str], expired: set[str], young: float) -> None:
        """Drop entries whose record is gone, add records the index misses. Unless it has expired,
        an entry (keyed after `young`) or a record (in `recent`) younger than the store's
        STALE_ENTRY_S is left alone: its creator may be between writing the record and appending
        the entry. `stored`: the ids with a record."""
        with self.locked():
            fd = self._open_file(self.root / INDEX, os.O_RDONLY)
            try:
                found = list(entries(fd, 0))
                raw = os.pread(fd, os.fstat(fd).st_size, 0)
            finally:
                os.close(fd)
            indexed = {task_id for *_, task_id in found}
            young_key = int(young * 1_000_000)
            kept = [raw[p * ENTRY:(p + 1) * ENTRY] for p, key, _, _, task_id in found
                    if task_id in stored or (key >= young_key and task_id not in expired)]
            missed = sorted((r for i in stored - indexed - recent if (r := self._readable(i)) is not None),
                            key=lambda r: (r.created_at, r.task_id))
            key = max((k for _, k, *_ in found), default=0)
            for record in missed:
                key += 1
                kept.append(_entry(key, record))
            if len(kept) != len(found) or missed or len(raw) != len(found) * ENTRY:
                write_atomic(self.root / INDEX, b"".join(kept))


def entries(fd: int, start: int) -> Iterator[tuple[int, int, int, int, str]]:
    """(position, key, expiry in ms, owner tag, id) from entry `start` on, a few pages at a time."""
    position = start
    while chunk := os.pread(fd, ENTRY * 64, position * ENTRY):
        for offset in range(0, len(chunk) - ENTRY + 1, ENTRY):
            parsed = _parse_entry(chunk[offset:offset + ENTRY])
            if parsed is not None:
                yield (position, *parsed)
            position += 1
        if len(chunk) < ENTRY * 64:
            return


def resume(fd: int, key: int, position: int, task_id: str) -> int:
    """Where the page after (key, position, id) starts: that entry's successor, found at
    `position` unless a rewrite moved it, else by binary search (keys only increase)."""
    low, high = 0, os.fstat(fd).st_size // ENTRY
    at = _parse_entry(os.pread(fd, ENTRY, position * ENTRY)) if position < high else None
    if at is not None and at[0] == key and at[3] == task_id:
        return position + 1
    while low < high:
        middle = (low + high) // 2
        entry = _parse_entry(os.pread(fd, ENTRY, middle * ENTRY))
        if entry is not None and entry[0] > key:
            high = middle
        else:
            low = middle + 1
    return low


def tag(principal: str | None) -> int:
    """32 bits that tell most principals' index entries apart without opening their records."""
    return int.from_bytes(hashlib.sha256((principal or identity.LOCAL).encode()).digest()[:4], "big")


def _indexed(fd: int, size: int, record: TaskRecord) -> bool:
    """Whether the index already holds the record. Keys only increase and none is below its
    creator's creation time, so its entry can only be in the tail keyed at or after the record's
    creation: the entries of tasks created since, a handful, are all this reads."""
    floor, position = int(record.created_at * 1_000_000), size // ENTRY - 1
    while position >= 0 and (entry := _parse_entry(os.pread(fd, ENTRY, position * ENTRY))) and entry[0] >= floor:
        if entry[3] == record.task_id:
            return True
        position -= 1
    return False


def _entry(key: int, record: TaskRecord) -> bytes:
    """One index line, ENTRY bytes: creation key (µs, unique, increasing), expiry (ms), owner tag, id."""
    return f"{key:016x} {int(record.expires_at * 1000):012x} {tag(record.principal):08x} {record.task_id:<23}\n".encode()


def _parse_entry(raw: bytes) -> tuple[int, int, int, str] | None:
    """(key, expiry in ms, owner tag, id), or None for anything that is not a whole, well-formed entry."""
    if len(raw) != ENTRY or raw[-1:] != b"\n":
        return None
    try:
        key, expires_ms, owner = int(raw[:16], 16), int(raw[17:29], 16), int(raw[30:38], 16)
        task_id = raw[39:62].decode().rstrip(" ")
    except (ValueError, UnicodeDecodeError):
        return None
    return (key, expires_ms, owner, task_id) if valid_id(task_id) else None
