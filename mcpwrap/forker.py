"""The server's end of its task forker: a child that has imported the task module, trio, the
runner and the config loader, and forks one supervisor per task it is sent (its side of the
socket is `tasks._serve_forks`). The command then starts milliseconds after its record is
durable instead of after a fresh interpreter's imports.

Why a fork server and not the alternatives: a trio-free supervisor would duplicate the
runner (process group, cgroup/tag sweep, timeout, output cap); forking the server itself is
unsafe (threads, a running trio loop); a long-lived per-store daemon that outlives servers
would need a socket in the state dir with peer checks, a lifetime policy and a way to retire
a daemon of an older mcpwrap version. The forker lives exactly as long as its server's end of
a socketpair, so none of that arises; what it costs is one idle interpreter per server
(~27 MiB RSS). The forked supervisor is what `python -m mcpwrap.tasks` runs (the same
`supervise`, MAC check first), so every guarantee of the slow path holds.

The server starts it before its own imports (`front.start_task_forker`), and before the schema
checks of a file not seen before (`config.load`'s `before_schema_checks`), so the first task
waits little or not at all for the forker's; this module is apart from `tasks` because it is
the only part needed then, and it imports none of the task store (~10 ms less before the
forker is spawned).

A task travels as its id plus its running slot's fd (SCM_RIGHTS), so the slot stays locked
across the hand-over; a send that fails (its queue is full, it died) returns False and the
caller starts a fresh supervisor instead, and a dead forker is replaced then. If the forker
dies holding a task it has not forked yet, the slot frees itself and the unclaimed record is
reported failed after `tasks.START_GRACE_S`. Between tasks it forks the store's collection
pass every `tasks.GC_INTERVAL_S`, so no request waits for one.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import subprocess
import sys
import threading
from pathlib import Path


def store_root(state_dir: Path | str, tools_file: Path | str) -> Path:
    """Where the tasks of `tools_file` live (a store per tools file, under the state dir)."""
    digest = hashlib.sha256(str(Path(tools_file).resolve()).encode()).hexdigest()[:16]
    return Path(state_dir) / digest / "tasks"


def start_peer(args: list[str], cwd: str | None = None) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """A Python child in a session of its own, given the other end of a fresh SOCK_SEQPACKET
    socketpair (its fd number is its last argument); our end is non-blocking. It lives as long as
    it reads that end, which ends (EOF) when we exit, however we do."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        for end in (ours, theirs):                  # room for bursts of messages
            with contextlib.suppress(OSError):
                end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        process = subprocess.Popen([sys.executable, *args, str(theirs.fileno())], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, cwd=cwd, start_new_session=True, close_fds=True,
                                   pass_fds=(theirs.fileno(),))
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    ours.setblocking(False)
    return process, ours


class Forker:
    """A running forker, and the socket tasks are sent to it on."""

    def __init__(self, root: Path, secret_file: Path) -> None:
        self.key = (root, secret_file)
        self.process, self.socket = start_peer(["-m", "mcpwrap.tasks", "--forker", str(root), str(secret_file)])
        threading.Thread(target=self.process.wait, name=f"reap-{self.process.pid}", daemon=True).start()

    def fork(self, task_id: str, slot: int) -> bool:
        """Queue a supervisor for `task_id`; False if the forker cannot take it."""
        try:
            socket.send_fds(self.socket, [task_id.encode()], [slot])
        except BlockingIOError:
            return False                  # a backlog: this task takes the slow way
        except OSError:
            self.socket.close()
            with _LOCK:
                if _RUNNING.get(self.key) is self:
                    del _RUNNING[self.key]
            start(*self.key)              # gone: the next task is fast again
            return False
        return True


_RUNNING: dict[tuple[Path, Path], Forker] = {}   # (store root, secret file) -> this process's forker
_LOCK = threading.Lock()


def prewarm(state_dir: Path, tools_file: Path, secret_file: Path) -> None:
    """Start this process's forker for the store of `tools_file` (a server with task tools)."""
    start(store_root(state_dir, tools_file).absolute(), Path(secret_file).absolute())


def start(root: Path, secret_file: Path) -> None:
    with _LOCK:
        if (root, secret_file) in _RUNNING:
            return
        try:
            _RUNNING[root, secret_file] = Forker(root, secret_file)
        except OSError as exc:            # tasks still run, each in a fresh interpreter
            sys.stderr.write(f"mcpwrap: cannot start the task forker: {exc}\n")


def running(root: Path, secret_file: Path) -> Forker | None:
    """This process's forker for the store, if one was started (one being started is waited for)."""
    with _LOCK:
        return _RUNNING.get((root, secret_file))
