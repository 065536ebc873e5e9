"""The output spool: what a call wrote beyond `max_output`, kept on disk so it stays readable.

Layout: STATE_DIR/<sha256(resolved tools path)[:16]>/output/<call>.<stream>, beside
the task store of the same tools file. `<call>` and `<stream>` are those of the
stream's URI (`protocol.pages`), checked (`pages.valid`) before any path is built
from them. The directories are made 0700 and
checked like the task store's; each file is created 0600 with O_EXCL and every file
read back is opened with `durable.open_private` (ours, regular, not a symlink).
A Spool serves one principal (`protocol/identity.py`): another's `<call>` is
kept under a name derived from the principal and the call (`Spool.file`), so a
URI of one credential's call names nothing for any other ("not found").

Bounds: the files of one tools file share a quota (bytes); a writer that needs room
evicts the oldest files first (by mtime, its own open files excepted), and a
stream that would not fit even alone is dropped whole, so a kept stream is always
complete. Files older than the TTL are removed when a new one is opened and are
"not found" when read. Several mcpwrap processes may share the directory: the
usage is re-counted from the directory whenever the quota seems reached.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mcpwrap.protocol.identity import LOCAL
from mcpwrap.protocol.pages import Page, output_uri, valid
from mcpwrap.state.durable import open_private, private_tree


class Sink:
    """One stream being kept: `write` until it returns False (the quota could not hold it), then `close`."""

    def __init__(self, spool: Spool, call: str, stream: str) -> None:
        self.spool, self.name = spool, spool.file(call, stream)
        self.uri = output_uri(call, stream)
        self.size = 0
        self.fd: int | None = spool.create(self.name)
        self.kept = self.fd is not None        # False once dropped (spool off, or over the quota)

    def write(self, data: bytes | bytearray) -> bool:
        if self.fd is None:
            return False
        if not self.spool.reserve(len(data), self.name):
            self.abandon()
            return False
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        self.size += len(data)
        return True

    def abandon(self) -> None:
        self.close()
        self.spool.remove(self.name)
        self.kept = False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            with self.spool.lock:
                self.spool.active.discard(self.name)


class Spool:
    def __init__(self, root: Path, quota: int, ttl_s: float, clock: Callable[[], float] = time.time,
                 owner: str = LOCAL) -> None:
        self.root, self.quota, self.ttl_s, self.clock = Path(root).absolute(), quota, ttl_s, clock
        self.owner = owner                 # the principal whose calls this spool keeps and reads
        self.used: int | None = None       # bytes in the directory, as last counted plus what we wrote since
        self.active: set[str] = set()      # files this process is writing: never evicted
        self.lock = threading.Lock()       # calls write from worker threads, concurrently
        self._checked = False

    @classmethod
    def for_tools_file(cls, state_dir: Path | str, tools_file: Path | str, quota: int, ttl_s: float,
                       owner: str = LOCAL) -> Spool:
        digest = hashlib.sha256(str(Path(tools_file).resolve()).encode()).hexdigest()[:16]
        return cls(Path(state_dir) / digest / "output", quota, ttl_s, owner=owner)

    def file(self, call: str, stream: str) -> str:
        """The file that keeps `stream` of this owner's `call`: named by the call for the local user,
        by a digest of the owner and the call for anyone else (the same pattern, so one quota)."""
        if self.owner != LOCAL:
            call = hashlib.sha256(f"{self.owner}\0{call}".encode()).hexdigest()[:32]
        return f"{call}.{stream}"

    @property
    def enabled(self) -> bool:
        return self.quota > 0

    def _ready(self, create: bool) -> bool:
        if self._checked:
            return True
        self._checked = private_tree(self.root, create)
        return self._checked

    # --- writing --------------------------------------------------------------------------------
    def new_call(self) -> str:
        return secrets.token_hex(16)

    def open(self, call: str, stream: str) -> Sink:
        return Sink(self, call, stream)

    def create(self, name: str) -> int | None:
        """A new 0600 file for `name`, after expired files are removed; None when the spool is off."""
        if not self.enabled:
            return None
        with self.lock:
            self._ready(create=True)
            self._collect()
            fd = open_private(self.root / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            self.active.add(name)
        return fd

    def reserve(self, size: int, writer: str) -> bool:
        """Room for `size` more bytes of `writer`, evicting the oldest other files; False if it cannot fit."""
        with self.lock:
            return self._reserve(size, writer)

    def _reserve(self, size: int, writer: str) -> bool:
        if self.used is None or self.used + size > self.quota:
            entries = self._entries()
            self.used = sum(s for _, s, _ in entries)
            for _, file_size, name in sorted(entries):
                if self.used + size <= self.quota:
                    break
                if name != writer and name not in self.active:
                    self.remove(name)
                    self.used -= file_size
            if self.used + size > self.quota:
                return False
        self.used += size
        return True

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.root / name)

    def _entries(self) -> list[tuple[float, int, str]]:
        """(mtime, size, name) of every kept stream."""
        found = []
        with contextlib.suppress(FileNotFoundError), os.scandir(self.root) as it:
            for entry in it:
                call, _, stream = entry.name.partition(".")
                if valid(call, stream):
                    with contextlib.suppress(FileNotFoundError):
                        st = entry.stat(follow_symlinks=False)
                        found.append((st.st_mtime, st.st_size, entry.name))
        return found

    def _collect(self) -> None:
        """Remove the streams older than the TTL (not ones this process is still writing)."""
        horizon = self.clock() - self.ttl_s
        for mtime, size, name in self._entries():
            if mtime < horizon and name not in self.active:
                self.remove(name)
                if self.used is not None:
                    self.used -= size

    # --- reading --------------------------------------------------------------------------------
    def read(self, call: str, stream: str, offset: int, length: int) -> Page | None:
        """Bytes [offset, offset+length) of a kept stream; None when unknown, evicted or expired."""
        if not (self.enabled and valid(call, stream) and self._ready(create=False)):
            return None
        name = self.file(call, stream)
        try:
            fd = open_private(self.root / name)
        except FileNotFoundError:
            return None
        try:
            st = os.fstat(fd)
            if st.st_mtime < self.clock() - self.ttl_s and name not in self.active:
                return None
            return Page(os.pread(fd, length, offset) if offset < st.st_size else b"", offset, st.st_size)
        finally:
            os.close(fd)
