"""The server's one audit writer: the records of every driver of a process, appended in order, off
the event loop.

`Auditor.post(record)` queues a record and returns at once; `Auditor.write(record)` queues it and
waits until it is on the disk (`fdatasync`), or returns why it could not be: a `call.start` when
the tools file says `audit_required = true`, so that nothing is spawned before its line is written.
One trio task (`run`, for the server's lifetime) takes what is queued, in order, and appends it
through `state.audit_log.AuditLog` in a worker thread, all that waits in one hop. Nothing is
dropped silently: a record that cannot be written is logged to stderr, once for each streak of
failures (and once when writing works again); when `audit_required`, the call it was for is refused.

The fsync policy (bench/README.md has the figures): only a `call.start` written with `write` (that
is, when `audit_required`) is flushed to the disk before the spawn; every other line is one
`write(2)` to the page cache, which a killed server does not lose (a crash of the machine may lose
the last lines).

`use(audit)` follows the tools file (a reload that changes `[server] audit` opens the new file for
the records queued after it); `reopen()` is SIGHUP's, for logrotate.
"""

from __future__ import annotations

import math
from typing import Any

import trio

from mcpwrap.config.model import Audit
from mcpwrap.serve.common import log
from mcpwrap.state.audit_log import AuditError, AuditLog

_Item = tuple[AuditLog, "dict[str, Any] | str", "list[str | None] | None", "trio.Event | None"]   # str: close, reopen


class Auditor:
    """Where a server process's audit records go (the file its tools file, or `--audit`, names)."""

    def __init__(self, audit: Audit | None) -> None:
        self.audit: Audit | None = None
        self.log: AuditLog | None = None
        self._send, self._receive = trio.open_memory_channel[_Item](math.inf)
        self._failing = False
        self._done = trio.Event()
        self.use(audit)

    @property
    def required(self) -> bool:
        return self.audit is not None and self.audit.required

    def use(self, audit: Audit | None) -> None:
        """The audit trail of the tools file now served; a new path (or size) takes a new writer."""
        if audit == self.audit:
            return
        if self.log is not None:
            self._queue((self.log, "close", None, None))   # closed once what was queued for it is written
        self.audit = audit
        self.log = None if audit is None else AuditLog(audit.path, max_bytes=audit.max_bytes, fsync=False)
        if audit is not None:
            log(f"mcpwrap: audit trail: {audit.path}" + (" (required: calls are refused when it cannot be written)"
                                                        if audit.required else ""))

    def reopen(self) -> None:
        """SIGHUP: the next record opens the path again (logrotate moved the file away)."""
        if self.log is not None:
            self._queue((self.log, "reopen", None, None))
            log(f"mcpwrap: SIGHUP: reopening the audit trail {self.log.path}")

    def post(self, record: dict[str, Any]) -> None:
        """Queue `record`; a failure to write it is logged (see the module docstring)."""
        if self.log is not None:
            self._queue((self.log, record, None, None))

    async def write(self, record: dict[str, Any]) -> str | None:
        """Queue `record` and wait until it is written and flushed; why it could not be, else None."""
        if self.log is None:
            return None
        outcome: list[str | None] = []
        done = trio.Event()
        self._queue((self.log, record, outcome, done))
        with trio.CancelScope(shield=True):      # once queued it is written: the caller learns how it went
            await done.wait()
        return outcome[0]

    async def closed(self) -> None:
        """No more records: return once `run` has written what was queued (and closed the file)."""
        if self.log is not None:
            self._queue((self.log, "close", None, None))
        self._send.close()
        with trio.CancelScope(shield=True):
            await self._done.wait()

    def _queue(self, item: _Item) -> None:
        try:
            self._send.send_nowait(item)
        except trio.ClosedResourceError:         # after `closed`: nothing is left to write it
            if isinstance(item[1], dict):
                log(f"mcpwrap: an audit record came after the audit trail was closed: {item[1]}", "error")

    async def run(self) -> None:
        """Append what is queued until `closed`, a batch at a time in a worker thread."""
        try:
            await self._run()
        finally:
            self._done.set()

    async def _run(self) -> None:
        async with self._receive:
            async for item in self._receive:
                batch = [item]
                while True:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                with trio.CancelScope(shield=True):   # what is queued is written, even as the server stops
                    failures = await trio.to_thread.run_sync(_append_all, batch)
                for (_, _, outcome, done), failure in zip(batch, failures):
                    if outcome is not None and done is not None:
                        outcome.append(failure)
                        done.set()
                self._report(failures)

    def _report(self, failures: list[str | None]) -> None:
        """One stderr line when writing starts failing, one when it works again."""
        for failure in failures:
            if failure is not None and not self._failing:
                self._failing = True
                consequence = ("calls are refused until it can" if self.required else
                               "calls run unaudited (audit_required = false)")
                log(f"mcpwrap: {failure}; {consequence}", "error")
            elif failure is None and self._failing:
                self._failing = False
                log("mcpwrap: the audit trail is written again", "warning")


def _append_all(batch: list[_Item]) -> list[str | None]:
    """In a worker thread: each record appended (a `write` one flushed to the disk), or its log closed;
    for each, why it failed or None."""
    failures: list[str | None] = []
    for audit_log, record, outcome, _ in batch:
        if isinstance(record, str):
            if record == "close":
                audit_log.close()
            else:
                audit_log.reopen()
            failures.append(None)
            continue
        try:
            audit_log.append(record, sync=outcome is not None)
            failures.append(None)
        except AuditError as exc:
            failures.append(str(exc))
        except Exception as exc:  # a bug must cost this record (said so), not the writer
            failures.append(f"cannot write the audit trail {audit_log.path}: {type(exc).__name__}: {exc}")
    return failures
