"""`mcpwrap serve` on stdio before trio has loaded: the first answers come from here.

Importing trio (with the runner and the rest of `server`) is most of a cold start, while the
sans-IO `Core` answers `initialize`, `ping`, the listings and `server/discover` with no I/O. So
`run` first answers what is already waiting on stdin (a client writes `initialize` as it spawns the
server), then imports `server` in a thread and meanwhile serves stdin itself, synchronously, through
the `Core` the trio driver then takes over (the session carries over). A line whose actions are more
than messages and log lines (a call, a read, a task, a subscription to watch...) is decided here
and its actions wait; once the import is done, `server.serve` takes over in order: the bytes not
yet written, the actions decided and not yet performed, the lines read and not yet decided, then
the `LineReader` with its partial line. Nothing is lost, repeated or reordered.

EOF, a closed stdout or SIGTERM/SIGINT/SIGHUP before the hand-over end the session here as
`server.serve` ends it (shutdown actions, stdout flushed for at most FLUSH_S, exit 0), and trio
never runs. stdout is written non-blocking from a backlog bounded like `server.Outbox`: past
OUTBOX_BYTES no request is taken, so a client that never reads stdout neither blocks nor grows the
front; the backlog is the Outbox's first item at the hand-over.

Also here, because they are needed before trio: the options, mcpwrap's stderr log, the secret source.
"""

from __future__ import annotations

import gc
import os
import resource
import select
import signal
import stat
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpwrap.config import model as config_module
from mcpwrap.protocol import jsonrpc
from mcpwrap.protocol.actions import Send, Stderr
from mcpwrap.protocol.core import Core, unexpected

if TYPE_CHECKING:
    import queue
    import threading

    from mcpwrap.protocol.actions import Action
    from mcpwrap.state import signing

READ_CHUNK = 65536
OUTBOX_BYTES = 4 * 1024 * 1024    # stdout backlog past which the reader waits and notifications drop
FLUSH_S = 2.0                     # at exit, how long a client that does not read stdout is waited for
LOG_LINES = 10_000                # mcpwrap's own stderr lines held for a slow reader, then dropped
FRONT_SWITCH_S = 0.0005           # the GIL switch interval while trio imports: how long a request may wait for it
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
LOADED = b"\0"                    # the import thread's byte on the wake pipe (a signal writes its number)

LEVELS = ("debug", "info", "warning", "error")
_threshold = LEVELS.index("info")


class _StderrLog:
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


_stderr = _StderrLog()


def log(text: str, level: str = "info") -> None:
    """mcpwrap's own messages: stderr only, at or above --log-level, never blocking the caller."""
    if LEVELS.index(level) >= _threshold:
        _stderr.write(text)


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
    max_calls: int = 64                   # calls running at once; more wait (QUEUED_PER_SLOT each, WAITING_BYTES)
    max_tasks: int = 16                   # durable tasks running at once (tasks/store.py counts them)
    toolset: config_module.Toolset = config_module.Toolset()   # applied again on every reload


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


def _needs_secret(config: config_module.Config) -> bool:
    return any(t.confirm for t in config.tools) or any(a.elicit for t in config.tools for a in t.args)


def new_core(config: config_module.Config, options: Options) -> Core:
    """The server's core; a bad secret file is refused here, before any request, when a tool asks questions."""
    secret = SecretSource(options.secret_file)
    if _needs_secret(config):
        secret()
    return Core(config, secret, time.time)


def encoded(message: dict[str, Any] | list[dict[str, Any]]) -> bytes | None:
    """A message as its line (traced at debug); one that cannot be encoded becomes an internal error
    for its id, and a notification that cannot be encoded is not written (None)."""
    try:
        data = jsonrpc.encode(message)
    except TypeError:               # orjson.JSONEncodeError: too deep, a bad key, a huge int
        if isinstance(message, list):
            data = jsonrpc.encode([_encodable(item) for item in message])
        elif (replacement := _encodable(message)) is message:
            return None
        else:
            data = jsonrpc.encode(replacement)
    if tracing():
        log("mcpwrap -> " + data.decode().rstrip(), "debug")
    return data


def _encodable(message: dict[str, Any]) -> dict[str, Any]:
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


class Front:
    """stdin and stdout served synchronously by `core` until trio is loaded (see the module docstring).

    What `server.serve` takes over: `output` (encoded, not yet written), `pending` (the actions
    decided for a line of `request_bytes` bytes, not yet performed), `lines` (read, not yet
    decided), `reader` (its partial line) unless `eof`; and `signalled`, the stop signals
    caught since, until trio's own receiver replaces the handler.
    """

    def __init__(self, core: Core, fd_in: int = 0, fd_out: int = 1) -> None:
        self.core = core
        self.fd_in, self.fd_out = fd_in, fd_out
        self.reader = jsonrpc.LineReader()
        self.lines: deque[bytes | None] = deque()
        self.pending: list[Action] = []
        self.request_bytes = 0
        self.output = bytearray()
        self.eof = False
        self.closed = False               # stdout is gone
        self.signalled = False
        self.loaded = False

    def __enter__(self) -> Front:
        """stdout non-blocking while the front writes (a regular file never blocks, and keeps its mode)."""
        self.regular = stat.S_ISREG(os.fstat(self.fd_out).st_mode)
        self.blocking = os.get_blocking(self.fd_out)
        if not self.regular:
            os.set_blocking(self.fd_out, False)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.regular:
            os.set_blocking(self.fd_out, self.blocking)   # as trio's FdStream expects to find and leave it

    def decide(self) -> None:
        """Answer the lines read, in order, until one needs the driver or stdout's backlog is full."""
        while self.lines and not self.pending and len(self.output) < OUTBOX_BYTES:
            line = self.lines.popleft()
            trace_in(line)
            actions = received(self.core, line)
            if self.core.listens or self.core.subscribed or not all(isinstance(a, (Send, Stderr)) for a in actions):
                self.pending, self.request_bytes = actions, len(line) if line else 0
                return
            self.perform(actions)

    def perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                data = encoded(action.message)
                if data is not None and not self.closed:
                    self.output += data
            elif isinstance(action, Stderr):
                log(action.text, action.level)

    def feed(self, chunk: bytes) -> None:
        if chunk:
            self.lines.extend(self.reader.feed(chunk))
        else:
            self.eof = True
            self.lines.extend(self.reader.finish())

    def caught(self, signum: int, frame: Any) -> None:
        """The handler of the stop signals, from the start until trio's receiver replaces it."""
        self.signalled = True

    def serve(self, wake: int) -> bool:
        """Until trio is loaded (True: hand over) or the session ends here (False: finish)."""
        while True:
            self.decide()
            if self.signalled or self.closed or (self.eof and not self.lines and not self.pending):
                return False
            if self.loaded:
                return True
            self._poll(wake, None, reading=not self.eof and not self.pending and len(self.output) < OUTBOX_BYTES)

    def answer_waiting(self, wake: int) -> None:
        """Answer the requests already on stdin before trio's import starts to share the GIL with us
        (a client writes `initialize` as it starts the server: it is there by now)."""
        self._poll(wake, 0, reading=True)
        self.decide()
        self._poll(wake, 0, reading=False)

    def finish(self, wake: int) -> None:
        """The session ended before the hand-over: end it as `server.serve` does, without trio."""
        self.pending = []                 # as a cancellation would: what was decided never starts
        self.perform(self.core.shutdown())
        deadline = time.monotonic() + FLUSH_S
        while self.output and not self.closed and (left := deadline - time.monotonic()) > 0:
            self._poll(wake, left, reading=False)

    def _poll(self, wake: int, timeout_s: float | None, reading: bool) -> None:
        poller = select.poll()
        poller.register(wake, select.POLLIN)
        if reading:
            poller.register(self.fd_in, select.POLLIN)
        if self.output and not self.closed:
            poller.register(self.fd_out, select.POLLOUT)
        for fd, _ in poller.poll(None if timeout_s is None else timeout_s * 1000):
            if fd == wake:
                self.loaded = self.loaded or LOADED in os.read(wake, 64)   # else a signal's number: see caught
            elif fd == self.fd_in:
                try:
                    self.feed(os.read(self.fd_in, READ_CHUNK))
                except OSError:
                    self.feed(b"")        # stdin is gone: as at EOF
            elif fd == self.fd_out:
                self._write()

    def _write(self) -> None:
        try:
            del self.output[:os.write(self.fd_out, self.output)]
        except BlockingIOError:
            pass
        except OSError:
            log("mcpwrap: stdout was closed by the client; shutting down", "info")
            self.closed = True
            self.output.clear()


def file_signature(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode)


def run(config: config_module.Config, options: Options) -> int:
    """`mcpwrap serve` on stdio: the front while `server` imports, then trio, or never if the session ends first."""
    prepare(options)
    try:
        front = Front(new_core(config, options))
        signature = file_signature(config.path) if options.watch else None   # before any request: no change missed
        if not _front(front, config):
            return 0
        import trio                       # loaded by now, with the driver

        from mcpwrap.serve import stdio as server
        gc.freeze()                       # as `prepare`'s: what the import made lives as long as the server
        return trio.run(server.serve, config, options, front, signature)
    finally:
        _stderr.flush(FLUSH_S)


def _front(front: Front, config: config_module.Config) -> bool:
    """Serve with the front while `server` imports in a thread; True once it has, to hand over."""
    wake, loaded = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    failure: list[BaseException] = []
    importer = None
    previous = signal.set_wakeup_fd(loaded)
    for signum in STOP_SIGNALS:
        signal.signal(signum, front.caught)       # kept until trio's receiver takes over: see server.serve
    interval = sys.getswitchinterval()
    sys.setswitchinterval(FRONT_SWITCH_S)
    try:
        with front:
            front.answer_waiting(wake)
            import threading              # only now: the answers already due are written (see _StderrLog)

            gate, ended = threading.Lock(), list[bool]()
            importer = threading.Thread(target=_import_server, args=(config, loaded, failure, gate, ended),
                                        name="mcpwrap-import", daemon=True)
            importer.start()
            if front.serve(wake):
                importer.join()           # it has written `loaded`: it is ending
                if failure:
                    raise failure[0]
                return True
            front.finish(wake)
        with gate:                        # a containment set up meanwhile is whole (and removed at exit); none
            ended.append(True)            # is set up after: the session ends without waiting for trio's import
        return False
    finally:
        sys.setswitchinterval(interval)
        signal.set_wakeup_fd(previous)
        if importer is None or not importer.is_alive():   # else it still writes `loaded` once done
            os.close(wake)
            os.close(loaded)


def _import_server(config: config_module.Config, loaded: int, failure: list[BaseException], gate: threading.Lock,
                   ended: list[bool]) -> None:
    """In a thread: import trio, the runner and the driver; unless the session `ended` in the
    front meanwhile, say which containment is in force (setting it up)."""
    try:
        from mcpwrap.run import process as runner  # noqa: F401
        from mcpwrap.serve import stdio as server  # noqa: F401  (imported for the hand-over)
        with gate:
            if not ended:
                log(f"mcpwrap: serving {len(config.tools)} tool(s) from {config.path}; "
                    f"containment: {runner.containment()}")
    except BaseException as exc:  # re-raised by the front at the hand-over
        failure.append(exc)
    finally:
        os.write(loaded, LOADED)

