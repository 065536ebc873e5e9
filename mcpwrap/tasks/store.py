"""The durable task store: records, locks, the index, the running ceiling, collection.

Store: one directory per tools file, STATE_DIR/<sha256(resolved path)[:16]>/tasks/
(the path, not the content digest, so a reload keeps the store). Per task:
`<id>.json` the record, `<id>.lock` the flock that serialises read-modify-write
across processes, `<id>.log` the supervisor's stderr (capped). Records are
written atomically (temporary file, fsync, rename or link, directory fsync)
and exist before any response names them. Terminal records never change
again, so a cancel racing a completion ends in exactly one terminal state.
Ids are `tasking.new_id()` (128 random bits, never a leading `-`) and are
matched against a strict pattern before any path is built from them: they
come from the client. `tasks/get` opens one record.

Index: `index.2` lists the tasks in creation order so that `tasks/list` pages cost the
page, not the store (`tasks.index`); the records stay the truth it is derived from.

Collection: `gc` removes expired tasks, rewrites the index and clears stale
leftovers. Nothing on a request path runs it: each supervisor, once its task's
outcome is recorded, runs `maybe_gc` (a pass at most every GC_INTERVAL_S per
store, one at a time, at most GC_BUDGET removals), so a store is collected as
tasks are added to it; `mcpwrap tasks gc` runs it in full.
A `tasks/get` of an expired task still removes that one record.

Trust: the store is shared with nobody. Its three directories (state dir,
digest, tasks) are created 0700 and, on a Store's first use, checked to be
directories of ours that group and others cannot write (not symlinks); every
file read or locked in it is opened with O_NOFOLLOW and checked to be a
regular file of ours, not group/world-writable (`durable.open_private`). A
failed check is an `UnsafePathError` naming the path and the fix. A record's
creation fields (`SIGNED`) carry an HMAC-SHA256 under the shared secret's
current key; the supervisor checks it (current or still-valid previous keys)
before it runs anything, so a record swapped or forged on disk runs nothing.
Each record names the principal that created it (`protocol/identity.py`, a
digest, never a token; MAC-bound too): `get`, `cancel` and `page` given a
principal treat another's task exactly as an unknown id. The CLI passes none:
it acts as the local user, who owns the store and sees every task in it.

Ceiling: `create_task` takes a running slot first: STORE/running/<id>, an
flock held by the task's supervisor for its life (the creator's locked fd is
inherited: there is no gap before it starts). Counting is a non-blocking flock
attempt per entry in running/, under running/.lock; an entry whose lock is free
belongs to a dead supervisor and goes. Past `max_running`, `TooManyTasks`
before any record is written.

A reader that finds a running task whose supervisor (`tasks/supervisor.py`)
is gone (or never claimed it within START_GRACE_S) marks it failed and kills
what the command left behind (found by the MCPWRAP_TASK_ID variable every
descendant inherits).

Imports: this module loads neither trio nor the runner, so
`mcpwrap tasks list|show|result|cancel|gc` starts in less than trio's import alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import orjson

from mcpwrap.protocol import identity, tasking
from mcpwrap.protocol.tasking import (
    CANCELLED_MESSAGE,
    CREATED_MESSAGE,
    TRANSITIONS,
    TaskLookupError,
    TaskRecord,
    TaskTerminalError,
    new_id,
    valid_id,
)
from mcpwrap.run.procfs import proc_stat
from mcpwrap.state import signing
from mcpwrap.state.durable import open_private, private_dir, private_tree, write_atomic
from mcpwrap.tasks.index import OLD_INDEX, Index, entries, resume, tag

RECORD_VERSION = 1
RESULT_POLL_S = 0.1          # tasks/result and `tasks result --wait`
START_GRACE_S = 30.0         # a record with no supervisor pid after this long never got one
GC_INTERVAL_S = 60.0         # a supervisor's collection pass, at most this often per store
GC_BUDGET = 1000             # expired tasks one pass removes at most
STALE_FILE_S = 3600.0        # leftover temp/lock/log files older than this go
STALE_ENTRY_S = 60.0         # an index entry without a record (or a record without one) this old is repaired
GC_MARKER = ".gc"            # its mtime: the last collection pass; its flock: one pass at a time
MAX_RUNNING = 16             # tasks running at once per store (`--max-tasks`)
_FIELDS = {f.name for f in fields(TaskRecord)}
# what a task is, fixed at creation: the MAC covers these, so a record swapped on disk runs nothing
SIGNED = ("task_id", "tool", "arguments", "created_at", "ttl_ms", "poll_ms", "tools_file", "digest", "snapshot")
_MAC_CONTEXT = b"mcpwrap task record v1\0"   # a MAC here is never valid as any other mcpwrap MAC


class TooManyTasks(Exception):
    """Creation refused: `max_running` supervisors are alive in this store."""

    def __init__(self, running: int) -> None:
        super().__init__(f"{running} task{' is' if running == 1 else 's are'} already running (--max-tasks); "
                         "wait for one to finish or raise the limit")


def process_start(pid: int, zombies: bool = False) -> int | None:
    """Start time (clock ticks since boot), which tells a reused pid apart; None if gone (or a zombie)."""
    if (stat := proc_stat(pid)) is None:
        return None
    return None if stat[0] == b"Z" and not zombies else int(stat[19])


def record_mac(record: TaskRecord, key: bytes) -> str:
    """The MAC over `SIGNED`, the creator's principal (absent from records written before
    principals, which keep the MAC they were written with) and `asks` when set."""
    signed = {name: getattr(record, name) for name in SIGNED}
    signed.update({k: v for k, v in (("principal", record.principal), ("asks", record.asks or None)) if v is not None})
    body = orjson.dumps(signed, option=orjson.OPT_SORT_KEYS)
    return hmac.new(key, _MAC_CONTEXT + body, hashlib.sha256).hexdigest()


def signed_by(record: TaskRecord, keyring: signing.Keyring, now: float) -> bool:
    """Whether one of the keys that still verify made the record's MAC (every key tried: no timing tell)."""
    if record.mac is None:
        return False
    matches = [hmac.compare_digest(record_mac(record, key), record.mac) for key in keyring.verifying_keys(now)]
    return any(matches)


def _encode(record: TaskRecord) -> bytes:
    return orjson.dumps({"v": RECORD_VERSION, **asdict(record)})


def _decode(data: bytes) -> TaskRecord:
    doc = orjson.loads(data)
    if not isinstance(doc, dict) or doc.get("v") != RECORD_VERSION:
        raise ValueError(f"task record format {doc.get('v') if isinstance(doc, dict) else '?'} is not "
                         f"{RECORD_VERSION}: written by another mcpwrap version")
    return TaskRecord(**{k: v for k, v in doc.items() if k in _FIELDS})


def store_root(state_dir: Path | str, tools_file: Path | str) -> Path:
    """Where the tasks of `tools_file` live (a store per tools file, under the state dir)."""
    digest = hashlib.sha256(str(Path(tools_file).resolve()).encode()).hexdigest()[:16]
    return Path(state_dir) / digest / "tasks"


class Store:
    """The task records of one tools file; every method is safe across processes."""

    def __init__(self, root: Path, clock: Callable[[], float] = time.time) -> None:
        self.root, self.clock = Path(root).absolute(), clock   # the supervisor's cwd may differ
        self.running = self.root / "running"
        self.index = Index(self.root, self.open_file, self.ids, self._readable)
        self._checked = False

    def ready(self, create: bool = False) -> bool:
        """Check (once per Store) that STATE_DIR, its digest dir and the store are ours and private;
        with `create`, make what is missing 0700 first. False: there is no store yet."""
        if self._checked:
            return True
        self._checked = private_tree(self.root, create)
        return self._checked

    def open_file(self, path: Path, flags: int = os.O_RDONLY) -> int:
        """A file of the store, checked (`durable.open_private`); O_CREAT makes the store first."""
        self.ready(create=bool(flags & os.O_CREAT))
        return open_private(path, flags)

    @classmethod
    def for_tools_file(cls, state_dir: Path | str, tools_file: Path | str,
                       clock: Callable[[], float] = time.time) -> Store:
        return cls(store_root(state_dir, tools_file), clock)

    def path(self, task_id: str, suffix: str = ".json") -> Path:
        if not valid_id(task_id):
            raise TaskLookupError()
        return self.root / f"{task_id}{suffix}"

    def read(self, task_id: str) -> TaskRecord | None:
        """The record as stored (no expiry or liveness check); None when there is none."""
        path = self.path(task_id)
        try:
            fd = self.open_file(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        with os.fdopen(fd, "rb") as f:
            return _decode(f.read())

    def create(self, *, tool: str, arguments: Mapping[str, Any], ttl_ms: int, poll_ms: int,
               tools_file: Path, digest: str, snapshot: str | None, key: bytes,
               task_id: str | None = None, principal: str = identity.LOCAL, askable: bool = False,
               asks: bool = False) -> TaskRecord:
        """Write a new record for `principal`, MAC'd with `key` (the secret's current key)."""
        self.ready(create=True)
        now = self.clock()
        record = TaskRecord(task_id=task_id or new_id(), status="working", tool=tool,
                            arguments=dict(arguments), created_at=now, updated_at=now, ttl_ms=ttl_ms,
                            poll_ms=poll_ms, tools_file=str(Path(tools_file).resolve()), digest=digest,
                            status_message=CREATED_MESSAGE, snapshot=snapshot, principal=principal,
                            askable=askable, asks=asks)
        record = replace(record, mac=record_mac(record, key))
        write_atomic(self.path(record.task_id), _encode(record), exclusive=True)
        try:
            self.index.append(record)
        except BaseException:
            self.path(record.task_id).unlink(missing_ok=True)
            raise
        return record

    def _readable(self, task_id: str) -> TaskRecord | None:
        with contextlib.suppress(ValueError, OSError):
            return self.read(task_id)
        return None

    @contextlib.contextmanager
    def _flocked(self, path: Path) -> Iterator[None]:
        fd = self.open_file(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def locked(self, task_id: str) -> contextlib.AbstractContextManager[None]:
        return self._flocked(self.path(task_id, ".lock"))

    def reserve(self, task_id: str, max_running: int) -> int:
        """A running slot for `task_id`: an fd holding the flock on running/<id>, for its supervisor
        to inherit. TooManyTasks when `max_running` slots are held already."""
        self.ready(create=True)
        os.close(private_dir(self.running))
        with self._flocked(self.running / ".lock"):
            held = sum(self._held(self.running / name) for name in os.listdir(self.running) if valid_id(name))
            if held >= max_running:
                raise TooManyTasks(held)
            slot = self.open_file(self.running / task_id, os.O_RDWR | os.O_CREAT | os.O_EXCL)
            fcntl.flock(slot, fcntl.LOCK_EX)
            return slot

    def _held(self, slot: Path) -> bool:
        """Whether a live supervisor holds `slot`; a slot whose lock is free was a dead one's and goes."""
        try:
            fd = self.open_file(slot)
        except FileNotFoundError:
            return False                  # released just now
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        slot.unlink(missing_ok=True)
        return False

    def release(self, task_id: str) -> None:
        self.path(task_id)                    # the id is checked before it names a file
        (self.running / task_id).unlink(missing_ok=True)

    def update(self, task_id: str, change: Callable[[TaskRecord], TaskRecord | None]) -> TaskRecord | None:
        """Read-modify-write under the task's lock. A terminal record is never changed; None: no record."""
        if self.read(task_id) is None:
            return None                   # no lock file for ids that never existed
        with self.locked(task_id):
            current = self.read(task_id)
            if current is None or current.terminal:
                return current
            new = change(current)
            if new is None or new == current or new.status not in TRANSITIONS[current.status]:
                return current
            new = replace(new, updated_at=max(self.clock(), current.updated_at))
            write_atomic(self.path(task_id), _encode(new))
            return new

    def claim(self, task_id: str, pid: int, start: int | None) -> TaskRecord | None:
        """Record the supervisor's identity, once."""
        return self.update(task_id, lambda r: replace(r, supervisor_pid=pid, supervisor_start=start)
                           if r.supervisor_pid is None else None)

    def finish(self, task_id: str, result: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None) -> TaskRecord | None:
        """The outcome: a tool result (completed) or an error (failed). Ignored once terminal."""
        if error is not None:
            status, message = "failed", str(error["message"])
        else:
            status, message = "completed", _summary(result or {})
        return self.update(task_id, lambda r: replace(r, status=status, status_message=message,
                                                      result=result, error=error))

    def answer(self, task_id: str, responses: Mapping[str, Any], principal: str | None = None) -> TaskRecord:
        """tasks/update: each response to a request the task has outstanding and not yet answered is
        kept for its supervisor (under the task's lock: whichever replica comes first answers, once);
        the others are ignored. Once none is outstanding the task is `working` again. TaskLookupError as `get`."""
        self.get(task_id, principal)

        def change(current: TaskRecord) -> TaskRecord | None:
            outstanding = current.input_requests or {}
            taken = dict(current.input_responses or {})
            new = {k: v for k, v in responses.items() if k in outstanding and k not in taken and isinstance(v, dict)}
            kept = {**taken, **new}
            answered = current.status == "input_required" and not set(outstanding) - set(kept)
            return replace(current, input_responses=kept, status="working" if answered else current.status) if new else None
        return self.update(task_id, change) or self.get(task_id, principal)

    def cancel(self, task_id: str, principal: str | None = None) -> TaskRecord:
        """Mark cancelled (the supervisor stops the command); TaskTerminalError if already finished.
        `principal` as for `get`."""
        self.get(task_id, principal)      # unknown, another's, expired, or a dead supervisor's (then failed)
        applied: list[bool] = []

        def change(current: TaskRecord) -> TaskRecord:
            applied.append(True)          # only called while the task is not terminal
            return replace(current, status="cancelled", status_message=CANCELLED_MESSAGE)

        record = self.update(task_id, change)
        if record is None:
            raise TaskLookupError()
        if not applied:
            raise TaskTerminalError(record)
        return record

    def get(self, task_id: str, principal: str | None = None) -> TaskRecord:
        """The record for a requestor: another principal's task is not found (exactly as an unknown
        id), expired is gone, a dead supervisor's task is failed. `principal` None: any (the CLI)."""
        record = self.read(task_id)
        if record is None or not identity.visible(record.principal, principal):
            raise TaskLookupError()
        if self.clock() >= record.expires_at:
            self.remove(task_id)
            raise TaskLookupError("Task has expired")
        if not record.terminal and not self._supervised(record):
            record = self._mark_dead(record)
        return record

    def _supervised(self, record: TaskRecord) -> bool:
        if record.supervisor_pid is None:
            return self.clock() - record.created_at < START_GRACE_S
        return process_start(record.supervisor_pid) == record.supervisor_start

    def _mark_dead(self, record: TaskRecord) -> TaskRecord:
        pid = record.supervisor_pid
        message = (f"the task's supervisor (pid {pid}) died without recording a result" if pid is not None
                   else f"the task's supervisor did not start within {START_GRACE_S:g}s")
        error = {"code": -32603, "message": message}
        marked = self.update(record.task_id, lambda r: None if self._supervised(r) else replace(
            r, status="failed", status_message=message, error=error))
        if marked is not None and marked.error == error:
            kill_leftovers(record.task_id)
        return marked or record

    def page(self, cursor: str | None, size: int,
             principal: str | None = None) -> tuple[list[TaskRecord], str | None]:
        """Up to `size` live tasks of `principal` (None: of anyone) after `cursor`, oldest first,
        and the cursor of the next page (None: no live task of theirs follows). Costs the page,
        not the store: the index is read from where the cursor points, each entry's owner tag
        skips other principals' tasks unopened, and only the records shown (plus the one that
        proves there is a next page) are opened."""
        after = tasking.decode_cursor(cursor) if cursor is not None else None   # -32602 before any I/O
        chosen: list[TaskRecord] = []
        try:
            fd = self.index.open()
        except FileNotFoundError:
            return [], None
        try:
            last: tuple[int, int] = (0, 0)
            for position, key, record in self._live(fd, resume(fd, *after) if after else 0, principal):
                if len(chosen) == max(1, size):
                    return chosen, tasking.encode_cursor(last[1], last[0], chosen[-1].task_id)
                chosen.append(record)
                last = (position, key)
        finally:
            os.close(fd)
        return chosen, None

    def _live(self, fd: int, start: int, principal: str | None = None) -> Iterator[tuple[int, int, TaskRecord]]:
        """(position, key, record) of each task of `principal` (None: anyone's) from entry `start`
        on that has neither expired (by the index alone) nor gone; a dead supervisor's task is
        reported failed on the way. Another's task is skipped by its entry's tag, unopened (a tag
        that collides is caught by `get`)."""
        wanted = None if principal is None else tag(principal)
        for position, key, expires_ms, owner, task_id in entries(fd, start):
            if expires_ms <= self.clock() * 1000 or wanted not in (None, owner):
                continue
            with contextlib.suppress(TaskLookupError, ValueError, OSError):
                yield position, key, self.get(task_id, principal)

    def records(self) -> list[TaskRecord]:
        """Every live task, oldest first."""
        try:
            fd = self.index.open()
        except FileNotFoundError:
            return []
        try:
            return [record for _, _, record in self._live(fd, 0)]
        finally:
            os.close(fd)

    def ids(self) -> list[str]:
        if not self.ready():
            return []
        names = os.listdir(self.root)
        return [n[:-5] for n in names if n.endswith(".json") and valid_id(n[:-5])]

    def remove(self, task_id: str) -> bool:
        """Delete an expired task's files (its supervisor, if any, sees the record vanish and stops)."""
        with self.locked(task_id):
            record = self.read(task_id)
            if record is not None and self.clock() < record.expires_at:
                return False
            for suffix in (".json", ".log", ".lock"):
                self.path(task_id, suffix).unlink(missing_ok=True)
        return record is not None

    def gc(self, budget: int | None = None) -> int:
        """Remove expired tasks (at most `budget` of them), then rewrite the index without the
        entries whose record is gone and with any record it missed (a creator killed between
        the two writes); stale leftovers go too. Returns how many tasks went.

        Reads the whole index and lists the directory: never on a request, only from
        `mcpwrap tasks gc` and the supervisors' periodic pass (`maybe_gc`)."""
        if not self.ready():
            return 0
        try:
            fd = self.index.open()
        except FileNotFoundError:
            return 0
        try:
            now_ms = self.clock() * 1000
            expired = [task_id for _, _, expires_ms, _, task_id in entries(fd, 0) if expires_ms <= now_ms]
        finally:
            os.close(fd)
        removed = 0
        for task_id in expired[:budget]:
            with contextlib.suppress(ValueError, OSError):
                removed += self.remove(task_id)
        young = time.time() - STALE_ENTRY_S
        stored, recent = self._sweep(young)
        self.index.rewrite(stored, recent, set(expired), young)
        return removed

    def _sweep(self, young: float) -> tuple[set[str], set[str]]:
        """The ids with a record, and those of them written after `young`; on the way, temporary
        files older than STALE_FILE_S go, the index of the earlier format, and the lock and log
        files of tasks that are gone."""
        stored, recent = set(), set()
        cutoff = time.time() - STALE_FILE_S
        for entry in os.scandir(self.root):
            name, stem = entry.name, entry.name.rsplit(".", 1)[0]
            with contextlib.suppress(OSError):
                if name.endswith(".json") and valid_id(stem):
                    stored.add(stem)
                    if entry.stat().st_mtime >= young:
                        recent.add(stem)
                elif (name.endswith(".tmp") and entry.stat().st_mtime < cutoff) or name == OLD_INDEX:
                    os.unlink(entry.path)
        for entry in os.scandir(self.root):       # lock and log files of tasks that are gone
            stem = entry.name.rsplit(".", 1)[0]
            with contextlib.suppress(OSError):
                if entry.name.endswith((".lock", ".log")) and stem not in stored and entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
        return stored, recent

    def maybe_gc(self) -> int:
        """`gc(GC_BUDGET)` at most every GC_INTERVAL_S per store, by one process at a time."""
        if not self.ready():
            return 0
        fd = self.open_file(self.root / GC_MARKER, os.O_RDWR | os.O_CREAT)
        try:
            st = os.fstat(fd)
            if st.st_size and time.time() - st.st_mtime < GC_INTERVAL_S:
                return 0
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0                  # another process is collecting
            os.pwrite(fd, b"1", 0)
            os.utime(fd)
            return self.gc(GC_BUDGET)
        finally:
            os.close(fd)


def _summary(result: Mapping[str, Any]) -> str:
    if not result.get("isError"):
        return "The tool finished."
    texts = [b.get("text", "") for b in result.get("content", []) if b.get("type") == "text"]
    first = next((line.strip() for t in texts for line in t.splitlines() if line.strip()), "")
    return "The tool reported an error" + (f": {first[:200]}" if first else ".")


def kill_leftovers(task_id: str) -> None:
    """SIGKILL every process that inherited this task's MCPWRAP_TASK_ID (its supervisor is gone)."""
    from mcpwrap.run import contain, process as runner

    contain.kill_tagged(runner.TASK_ENV, [task_id])
