"""The server's one audit writer: the records of every driver of a process, appended in order by
one thread of its own, never on the event loop.

`Auditor.post(record)` queues a record and returns at once; `Auditor.write(record)` queues it and
waits until it is on the disk (`fdatasync`), or returns why it could not be: a `call.start` when
the tools file says `audit_required = true`, so that nothing is spawned before its line is written.
The writer thread takes what is queued, in order, and appends it through `state.audit_log.AuditLog`.
Nothing is dropped silently: a record that cannot be written is logged to stderr, once for each
streak of failures (and once when writing works again); when `audit_required`, the call it was
for is refused. `closed()` (at the server's end) returns once everything queued is written.

The fsync policy (bench/README.md has the figures): only a `call.start` written with `write` (that
is, when `audit_required`) is flushed to the disk before the spawn; every other line is one
`write(2)` to the page cache, which a killed server does not lose (a crash of the machine may lose
the last lines).

`use(audit)` follows the tools file (a reload that changes `[server] audit` opens the new file for
the records queued after it); `reopen()` is SIGHUP's, for logrotate.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import trio

from mcpwrap.config.model import Audit
from mcpwrap.serve.common import log
from mcpwrap.state.audit_log import AuditError, AuditLog

Done = Callable[["str | None"], None]          # told, in the writer thread, how an awaited record went
_Item = tuple[AuditLog, "dict[str, Any] | str", "Done | None"]   # str: close, reopen
_STOP = None
GROUP_S = 0.005        # how long a record that need not be flushed waits for others to share its write


class Auditor:
    """Where a server process's audit records go (the file its tools file, or `--audit`, names)."""

    def __init__(self, audit: Audit | None) -> None:
        self.audit: Audit | None = None
        self.log: AuditLog | None = None
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._urgent = threading.Event()          # cuts the group commit's wait short
        self._failing = False
        self.use(audit)

    @property
    def required(self) -> bool:
        return self.audit is not None and self.audit.required

    def use(self, audit: Audit | None) -> None:
        """The audit trail of the tools file now served; a new path (or size) takes a new writer."""
        if audit == self.audit:
            return
        if self.log is not None:
            self._put((self.log, "close", None))    # closed once what was queued for it is written
        self.audit = audit
        self.log = None if audit is None else AuditLog(audit.path, max_bytes=audit.max_bytes, fsync=False)
        if audit is not None:
            log(f"mcpwrap: audit trail: {audit.path}" + (" (required: calls are refused when it cannot be written)"
                                                        if audit.required else ""))

    def reopen(self) -> None:
        """SIGHUP: the next record opens the path again (logrotate moved the file away)."""
        if self.log is not None:
            self._put((self.log, "reopen", None))
            log(f"mcpwrap: SIGHUP: reopening the audit trail {self.log.path}")

    def post(self, record: dict[str, Any]) -> None:
        """Queue `record`; a failure to write it is logged (see the module docstring)."""
        if self.log is not None:
            self._put((self.log, record, None))

    async def write(self, record: dict[str, Any]) -> str | None:
        """Queue `record` and wait until it is written and flushed; why it could not be, else None."""
        if self.log is None:
            return None
        outcome: list[str | None] = []
        done, token = trio.Event(), trio.lowlevel.current_trio_token()

        def written(failure: str | None) -> None:
            outcome.append(failure)
            token.run_sync_soon(done.set)

        self._put((self.log, record, written))
        self._urgent.set()
        with trio.CancelScope(shield=True):      # once queued it is written: the caller learns how it went
            await done.wait()
        return outcome[0]

    async def closed(self) -> None:
        """No more records: return once the writer has written what was queued (and closed the file)."""
        if self._thread is None:
            return
        if self.log is not None:
            self._put((self.log, "close", None))
        self._queue.put(_STOP)
        self._urgent.set()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self._thread.join)

    def _put(self, item: _Item) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mcpwrap-audit", daemon=True)
            self._thread.start()
        self._queue.put(item)

    def _run(self) -> None:
        """The writer thread, until `closed`: each group (`_group`), its consecutive records for one
        file in one write, a close or reopen in its turn."""
        while True:
            group = self._group()
            records: list[_Item] = []
            for item in group:
                if item is _STOP:
                    break
                if records and (item[0] is not records[0][0] or not isinstance(item[1], dict)):
                    self._commit(records)
                    records = []
                if isinstance(item[1], dict):
                    records.append(item)
                else:
                    self._let_go(item[0], item[1] == "close")
            if records:
                self._commit(records)
            if group[-1] is _STOP:
                return

    def _group(self) -> list[_Item | None]:
        """The next item, and what else is queued GROUP_S later (sooner when a record waits to be
        flushed, or the server ends): a call's `call.start` and `call.end` then share one write,
        and the server's loop wakes this thread once a call, not once a record (a group commit)."""
        group = [self._queue.get()]
        if group[0] is not _STOP and group[0][2] is None:
            self._urgent.wait(GROUP_S)
        self._urgent.clear()
        while group[-1] is not _STOP:
            try:
                group.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return group

    def _let_go(self, audit_log: AuditLog, close: bool) -> None:
        """Close a file no longer served, or let go of it for the next record to reopen (SIGHUP)."""
        try:
            if close:
                audit_log.close()
            else:
                audit_log.reopen()
        except OSError as exc:
            log(f"mcpwrap: cannot close the audit trail {audit_log.path}: {exc}", "warning")

    def _commit(self, items: list[_Item]) -> None:
        """Records for one file in one write, flushed when one of them is awaited; each waiter told."""
        audit_log = items[0][0]
        try:
            audit_log.append_many([record for _, record, _ in items if isinstance(record, dict)],
                                  sync=any(done is not None for _, _, done in items))
            failure = None
        except AuditError as exc:
            failure = str(exc)
        except Exception as exc:  # a bug must cost these records (said so), not the writer
            failure = f"cannot write the audit trail {audit_log.path}: {type(exc).__name__}: {exc}"
        for _, _, done in items:
            if done is not None:
                done(failure)
        self._report(failure)

    def _report(self, failure: str | None) -> None:
        """One stderr line when writing starts failing, one when it works again."""
        if failure is not None and not self._failing:
            self._failing = True
            consequence = ("calls are refused until it can" if self.required else
                           "calls run unaudited (audit_required = false)")
            log(f"mcpwrap: {failure}; {consequence}", "error")
        elif failure is None and self._failing:
            self._failing = False
            log("mcpwrap: the audit trail is written again", "warning")
