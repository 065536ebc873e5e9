"""What every driver shares, and needs before trio: the options, mcpwrap's stderr log, the secret
source, the core's construction, a message's encoding and a line's decoding.

Nothing here imports trio, threading or queue: the front answers a session's first requests with
this module and `protocol/` alone loaded (tests/blackbox/cli/test_startup.py pins it).
"""

from __future__ import annotations

import gc
import os
import resource
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from mcpwrap.config import model as config_module
from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol.core import Core, unexpected

if TYPE_CHECKING:
    import queue

    from mcpwrap.protocol.actions import Action
    from mcpwrap.state import signing

READ_CHUNK = 65536
OUTBOX_BYTES = 4 * 1024 * 1024    # stdout backlog past which the reader waits and notifications drop
FLUSH_S = 2.0                     # at exit, how long a client that does not read stdout is waited for
LOG_LINES = 10_000                # mcpwrap's own stderr lines held for a slow reader, then dropped
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

Message: TypeAlias = "dict[str, Any] | list[dict[str, Any]]"   # an outgoing message, or a batch's answers

LEVELS = ("debug", "info", "warning", "error")
_threshold = LEVELS.index("info")


class StderrLog:
    """mcpwrap's own log lines, written by one daemon thread.

    A client may never read our stderr; a blocking write there would freeze the
    server for good once the pipe is full. Lines queue (bounded) for the thread;
    past the bound they are dropped and counted, and the count is logged when
    stderr drains. The queue and the thread are made at the first line (threading and queue are
    not imported before the first answer).
    """

    def __init__(self, fd: int = 2) -> None:
        self.fd = fd
        self.lines: queue.Queue[bytes] | None = None
        self.dropped = 0

    def write(self, text: str) -> None:
        import queue

        if self.lines is None:
            import threading

            self.lines = queue.Queue(LOG_LINES)
            threading.Thread(target=self._run, args=(self.lines,), name="mcpwrap-stderr", daemon=True).start()
        try:
            self.lines.put_nowait((text + "\n").encode("utf-8", "replace"))
        except queue.Full:
            self.dropped += 1

    def _run(self, lines: queue.Queue[bytes]) -> None:
        while True:
            data = lines.get()
            dropped, self.dropped = self.dropped, 0
            if dropped:
                data = f"mcpwrap: {dropped} log line(s) dropped: stderr was not being read\n".encode() + data
            self._write_all(data)
            lines.task_done()

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view):]
            except BlockingIOError:
                time.sleep(0.01)          # someone made the shared stderr non-blocking
            except OSError:
                return                    # stderr is gone: the lines have nowhere to go

    def flush(self, timeout_s: float) -> None:
        """Wait (bounded) until the thread has written what is queued."""
        deadline = time.monotonic() + timeout_s
        while self.lines is not None and self.lines.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)


stderr = StderrLog()


def log(text: str, level: str = "info") -> None:
    """mcpwrap's own messages: stderr only, at or above --log-level, never blocking the caller."""
    if LEVELS.index(level) >= _threshold:
        stderr.write(text)


def tracing() -> bool:
    """--log-level debug: only then is a trace line worth formatting (it costs on every message)."""
    return _threshold == 0


@dataclass
class Options:
    """The `serve` options the driver needs beyond the tools file."""
    secret_file: Path
    state_dir: Path
    watch: bool = True
    log_level: str = "info"               # debug also traces every message and tool stderr line
    max_calls: int = 64                   # calls running at once; more wait (admission.QUEUED_PER_SLOT each)
    max_tasks: int = 16                   # durable tasks running at once (tasks/store.py counts them)
    toolset: config_module.Toolset = config_module.Toolset()   # applied again on every reload
    audit: Path | None = None             # `--audit FILE`: the audit trail, whatever `[server] audit` says

    def applied(self, config: config_module.Config) -> config_module.Config:
        """The tools file as served: the toolset's tools, and `--audit`'s path in place of
        `[server] audit`'s (its `audit_required` and `audit_max_bytes` kept); at start and on every reload."""
        config = self.toolset.apply(config)
        if self.audit is None or (config.audit is not None and config.audit.path == self.audit):
            return config
        kept = config.audit or config_module.Audit(self.audit)
        return replace(config, audit=replace(kept, path=self.audit))


class SecretSource:
    """The shared keyring, loaded once on first need (or at start when a tool asks questions)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keyring: signing.Keyring | None = None

    def __call__(self) -> signing.Keyring:
        if self.keyring is None:
            from mcpwrap.state import signing

            self.keyring = signing.ensure_secret(self.path, time.time())
        return self.keyring


def needs_secret(config: config_module.Config) -> bool:
    """A tool asks questions (confirm, elicit): the secret must be readable before any request."""
    return any(t.confirm for t in config.tools) or any(a.elicit for t in config.tools for a in t.args)


def new_core(config: config_module.Config, options: Options) -> Core:
    """The server's core; a bad secret file is refused here, before any request, when a tool asks questions."""
    secret = SecretSource(options.secret_file)
    if needs_secret(config):
        secret()
    return Core(config, secret, time.time)


def encoded(message: dict[str, Any] | list[dict[str, Any]]) -> bytes | None:
    """A message as its line (see `written`); None for a notification that cannot be encoded."""
    out = written(message)
    return None if out is None else out[1]


def written(message: Message) -> tuple[Message, bytes] | None:
    """What is written for a message, and its line (traced at debug): an answer that cannot be
    encoded becomes an internal error for its id; a notification that cannot be encoded is not
    written (None)."""
    try:
        data = jsonrpc.encode(message)
    except TypeError:               # orjson.JSONEncodeError: too deep, a bad key, a huge int
        if isinstance(message, list):
            message = [encodable(item) for item in message]
        elif (replacement := encodable(message)) is message:
            return None
        else:
            message = replacement
        data = jsonrpc.encode(message)
    if tracing():
        log("mcpwrap -> " + data.decode().rstrip(), "debug")
    return message, data


def encodable(message: dict[str, Any]) -> dict[str, Any]:
    """The message, or for an answer that cannot be encoded, an internal error for its id."""
    try:
        jsonrpc.encode(message)
        return message
    except TypeError as exc:
        log(f"mcpwrap: cannot encode an outgoing message ({exc}); answering with an error instead", "error")
        if "method" in message or "id" not in message:
            return message
        return {"jsonrpc": "2.0", "id": message["id"], "error": {
            "code": jsonrpc.INTERNAL_ERROR, "message": f"internal error: the answer could not be encoded ({exc})"}}


def received(core: Core, line: bytes | None) -> list[Action]:
    """The actions for one line read. `Core.receive` answers a bug it meets with -32603; should one
    escape it anyway, it costs this line (the same answer, and a log line), never the server."""
    message: jsonrpc.Message | None = None
    try:
        message = jsonrpc.decode_line(line)
        return core.receive(message)
    except Exception as exc:
        return unexpected(message, exc)


def trace_in(line: bytes | None) -> None:
    if tracing():
        log("mcpwrap <- " + (line or b"(oversized line)").decode("utf-8", "replace"), "debug")


def prepare(options: Options) -> None:
    """The process around a driver: log level, fd limit, and no collection walking the tools."""
    global _threshold
    _threshold = LEVELS.index(options.log_level)
    _raise_fd_limit()
    gc.freeze()                           # the tools live as long as the server: no collection need walk them
    gc.enable()                           # `serve_command` left it off until now


def _raise_fd_limit() -> None:
    """Every call holds pipes: take the hard RLIMIT_NOFILE as servers commonly do, not the soft 1,024."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))
    except (ValueError, OSError):
        pass


def file_signature(path: Path) -> tuple[int, ...] | None:
    """What tells a file's change (mtime, size, inode, mode); None while it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode)
