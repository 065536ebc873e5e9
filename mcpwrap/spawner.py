"""The spawn helper: a process of its own that starts calls' commands for a busy server.

Why: spawning on a thread of the server made each spawn hand the GIL back and forth with the
loop at every system call of Popen and of the cgroup move (~8 a spawn); with many calls at
once that serial step held pipelined throughput near 0.65 x a thread pool's. Here the spawn
and the move run under another interpreter's GIL, so the loop only sends a request and reads
two short answers.

Everything about the call's end stays the server's (`runner._Call.end`). What would need the
command to be the server's child is kept true here instead: the helper reports the leader's
exit without reaping it (`waitid(WNOWAIT)`), together with whether it was alone (no process was
created after it), and reaps it only when the server says so. Until then its pid, and so its
process group id, cannot be reused, so the server may still signal the group.

Wire (one SOCK_SEQPACKET datagram each, orjson arrays):
    server -> helper  a list of requests, their fds in order:
                      [SPAWN, id, executable, argv, cwd, env, needle] + fds stdin, stdout, stderr, cgroup.procs
                      [REAP, id]
                      [PING]: answered at once by the loop (the spawning threads may be busy)
    helper -> server  a list of answers:
                      [READY]
                      [SPAWNED, id, pid, moved, sweep] | [FAILED, id, errno, strerror]
                      [EXITED, id, returncode, alone]
                      [PONG]
The helper ends at EOF: the server is gone, and what it started is the watchdog's (runner).

The /proc readers and the chase for a leader's early forks live here, shared with the runner
and limits, so the helper imports nothing else of mcpwrap (~25 ms to start, ~15 MiB RSS).
"""

from __future__ import annotations

import array
import contextlib
import os
import queue
import selectors
import socket
import subprocess
import sys
import threading
import traceback
from typing import Any

import orjson


SPAWN, REAP, PING = 0, 1, 2
READY, SPAWNED, FAILED, EXITED, PONG = 0, 1, 2, 3, 4
MESSAGE_MAX = 60_000        # bytes of a datagram: a bigger request (a huge argument) goes the in-process way
WORKERS = 2                 # spawns at once: one's exec or cgroup move waits on the kernel while another's runs
FDS_MAX = 252               # fds a datagram carries (the kernel's SCM_MAX_FD is 253): 4 a spawn
FDS = array.array("i")      # the item size of a passed fd
RECENT_S = 10.0             # a process with no environment read that started this recently may be mid-exec


def proc_stat(pid: int | str) -> list[bytes] | None:
    """/proc/<pid>/stat after the command name (index 0 = state, 2 = pgid, 19 = start time); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def read_file(path: str) -> bytes:
    """The file's bytes, b"" when it cannot be read; raw reads, as a call reads several per run."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return b""
    finally:
        os.close(fd)
    return b"".join(chunks)


def mid_exec(pid: str) -> bool:
    """Whether an empty environment read may be a live process between exec's mm switch and its new stack.

    Zombies, kernel threads and processes started long ago (pid 1 often has no environment at all)
    are not: only a process that started in the last few seconds is worth a second look.
    """
    stat = proc_stat(pid)
    if stat is None or stat[0] == b"Z" or stat[1] in (b"0", b"2") or pid == "2":
        return False
    try:
        uptime = float(read_file("/proc/uptime").split()[0])
    except (IndexError, ValueError):
        return True
    return uptime - int(stat[19]) / os.sysconf("SC_CLK_TCK") < RECENT_S


_last_pid_fd: int | None = None


def last_pid() -> int:
    """The pid last handed out: one pread of a file kept open."""
    global _last_pid_fd
    try:
        if _last_pid_fd is None:
            _last_pid_fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_RDONLY | os.O_CLOEXEC)
        return int(os.pread(_last_pid_fd, 32, 0))
    except (OSError, ValueError):
        return -1


def _ours(pid: int) -> bool:
    """Another call's leader, spawned by this process: a leader's forks have the leader as parent."""
    stat = proc_stat(pid)
    return stat is not None and stat[1] == b"%d" % os.getpid()


def adopt_early_forks(pid: int, needle: bytes, procs: int) -> bool:
    """Move in what the leader forked before its own move; False when that is not certain.

    Pids are handed out in order, so such forks hold pids after the leader's, up to
    ns_last_pid; a round repeats over pids allocated meanwhile until none were.
    `needle` is the call's tag as it appears in an environment (NAME=value).
    """
    low = pid
    for _ in range(4):
        high = last_pid()
        if high == low:
            return True
        if not low < high <= low + 256:             # wrapped around, or too busy to chase
            return False
        for other in range(low + 1, high + 1):
            environ = read_file(f"/proc/{other}/environ")
            if not environ and not _ours(other) and mid_exec(str(other)):
                return False                        # caught mid-exec: the end-of-call sweep must look again
            if needle in environ.split(b"\0"):
                try:
                    os.write(procs, b"%d" % other)
                except ProcessLookupError:
                    pass                            # gone; what it forked has a later pid
                except OSError:
                    return False
        low = high
    return False


def returncode(info: os.waitid_result) -> int:
    """As Popen.returncode: the exit status, or minus the signal that ended it."""
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def start_peer(args: list[str], cwd: str | None = None) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """The server's side: a Python child (the helper) in a session of its own, given the other end
    of a fresh SOCK_SEQPACKET socketpair (its fd number is its last argument); our end is
    non-blocking. It lives as long as it reads that end, which ends (EOF) when we exit, however we do."""
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


class _Helper:
    """The helper's side: a loop over its socket and its children's pidfds, and WORKERS threads that
    spawn. Answers leave together after each pass of the loop (every exit it saw; spawns once no
    more are queued), so the server's loop wakes once for a burst of them rather than once each."""

    def __init__(self, sock: socket.socket) -> None:
        self.socket = sock
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ)
        self.wake_r, self.wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)    # see wake()
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        self.children: dict[int, subprocess.Popen[bytes]] = {}     # id -> leader, until reaped
        self.jobs: queue.SimpleQueue[tuple[list[Any], list[int]]] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.outgoing = [orjson.dumps([READY])]
        for _ in range(WORKERS):
            threading.Thread(target=self.work, daemon=True).start()

    def send(self, *message: Any) -> None:
        with self.lock:
            self.outgoing.append(orjson.dumps(message))

    def serve(self) -> None:
        while True:
            with self.lock:
                answers, self.outgoing = self.outgoing, []
            if answers:
                self.socket.send(b"[" + b",".join(answers) + b"]")
            for key, _ in self.selector.select():
                if key.fileobj is self.socket:
                    if not self.receive():
                        return                      # the server is gone
                elif key.fileobj == self.wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 4096)
                else:
                    self.exited(*key.data)

    def receive(self) -> bool:
        """Every request waiting, with the fds they carry (close-on-exec: socket.recv_fds drops its
        flags in 3.11); False at EOF."""
        while True:
            try:
                data, ancillary, _, _ = self.socket.recvmsg(
                    MESSAGE_MAX + 1024, socket.CMSG_SPACE(FDS_MAX * FDS.itemsize),
                    socket.MSG_CMSG_CLOEXEC | socket.MSG_DONTWAIT)
            except BlockingIOError:
                return True
            if not data:
                return False
            fds = array.array("i")
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
            passed = list(fds)
            for request in orjson.loads(data):
                if request[0] == PING:
                    self.send(PONG)
                elif request[0] == REAP:
                    leader = self.children.pop(request[1], None)
                    if leader is not None:
                        leader.wait()               # a zombie: at once
                else:
                    self.jobs.put((request, passed[:4]))
                    del passed[:4]

    def work(self) -> None:
        """Spawn what is queued. Anything unforeseen ends the helper (crash-only): at its EOF the
        server ends what it held through the cgroups, rather than wait for answers that never come."""
        try:
            while True:
                self.spawn(*self.jobs.get())
                if self.jobs.empty():
                    self.wake()
        except BaseException:
            traceback.print_exc()
            os._exit(70)

    def spawn(self, request: list[Any], fds: list[int]) -> None:
        """Start, move and watch one command (Popen: os.posix_spawn would hold the GIL while the child
        execs). What cannot start is answered FAILED; the server's in-process spawn then runs it,
        and reports the error as it always has."""
        _, call_id, executable, argv, cwd, env, needle = request
        stdin, stdout, stderr, procs = fds
        try:
            try:
                leader = subprocess.Popen(argv, executable=executable, stdin=stdin, stdout=stdout, stderr=stderr,
                                          cwd=cwd, env=env, start_new_session=True, close_fds=True)
            except (OSError, subprocess.SubprocessError) as exc:
                self.send(FAILED, call_id, getattr(exc, "errno", None) or 0, str(getattr(exc, "strerror", exc)))
                return
            for fd in (stdin, stdout, stderr):      # before the move: the command owns them now
                os.close(fd)
            stdin = stdout = stderr = -1
            try:
                os.write(procs, b"%d" % leader.pid)
                moved = True
            except OSError:
                moved = False
            sweep = not (moved and adopt_early_forks(leader.pid, needle.encode(), procs))
            self.children[call_id] = leader         # kept: a Popen dropped unreaped is reaped by the next
            self.send(SPAWNED, call_id, leader.pid, moved, sweep)
            try:
                pidfd = os.pidfd_open(leader.pid)
            except OSError:                         # out of fds: a thread waits for this exit instead
                threading.Thread(target=self.wait_for, args=(call_id, leader.pid), daemon=True).start()
            else:
                self.selector.register(pidfd, selectors.EVENT_READ, (call_id, pidfd, leader.pid))
        finally:
            for fd in (stdin, stdout, stderr, procs):
                if fd >= 0:
                    os.close(fd)

    def exited(self, call_id: int, pidfd: int, pid: int) -> None:
        """The leader's pidfd is readable."""
        self.selector.unregister(pidfd)
        os.close(pidfd)
        self.report(call_id, pid, os.WNOHANG)

    def wait_for(self, call_id: int, pid: int) -> None:
        """On a thread of its own, for a leader with no pidfd (out of fds)."""
        self.report(call_id, pid, 0)
        self.wake()

    def report(self, call_id: int, pid: int, flags: int) -> None:
        """Report the leader's exit; it stays a zombie (its pid taken) until the server's REAP."""
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | flags)
        assert info is not None                     # it has exited: its pidfd was readable, or the wait blocked
        self.send(EXITED, call_id, returncode(info), last_pid() == pid)

    def wake(self) -> None:
        """Answers are waiting: the loop sends them (one byte is enough, however many are written)."""
        with contextlib.suppress(BlockingIOError):
            os.write(self.wake_w, b".")


def main(argv: list[str]) -> None:
    sock = socket.socket(fileno=int(argv[0]))
    try:
        _Helper(sock).serve()
    except (BrokenPipeError, ConnectionResetError):
        pass                                        # the server is gone


if __name__ == "__main__":
    main(sys.argv[1:])
