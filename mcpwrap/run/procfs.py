"""/proc readers shared by the runner, the limits and the task store, and the chase for a fresh
leader's early forks (what it forked before it was moved into its call's cgroup)."""

from __future__ import annotations

import os

RECENT_S = 10.0             # a process with no environment read that started this recently may be mid-exec
CHASE_PIDS = 256            # pids handed out after a leader, past which its forks are not looked for


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


# This process's calls' leaders not yet reaped (`ours`); a forked child has none of them.
leaders: set[int] = set()
os.register_at_fork(after_in_child=leaders.clear)


def _child(pid: int) -> bool:
    """A child of this process: one system call, no /proc read."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def ours(pid: int) -> bool:
    """Another call's leader, still a child of this process, so no leader's fork: those have the
    leader as parent, or once orphaned init or a subreaper, which leaves them out of `leaders`."""
    return pid in leaders and _child(pid)


def only_ours_after(pid: int) -> bool:
    """Whether every pid handed out after `pid` went to another call's leader (`ours`), so none to
    a fork of pid's process. Not looked for past CHASE_PIDS."""
    high = last_pid()
    return high == pid or (pid < high <= pid + CHASE_PIDS and all(map(ours, range(pid + 1, high + 1))))


def adopt_early_forks(pid: int, needle: bytes, procs: int) -> bool:
    """Move in what the leader forked before its own move; False when that is not certain.

    Pids are handed out in order, so such forks hold pids after the leader's, up to
    ns_last_pid read after the move (a fork still in progress then is born in the cgroup).
    Each pid up to it is looked at once: another call's leader (`ours`) without a /proc read;
    a live process without the tag is not the call's. A round ends the chase when it moved
    nothing and every pid it looked at was live: pids handed out meanwhile went to other
    processes' forks (a burst's other spawns). What it moved, or a pid gone or a zombie (it may
    have forked before it ended), may have forked before it was looked at, so another round
    looks at the pids handed out meanwhile. `needle` is the call's tag as it appears in an
    environment (NAME=value).
    """
    low = pid
    for _ in range(4):
        high = last_pid()
        if high == low:
            return True
        if not low < high <= low + CHASE_PIDS:      # wrapped around, or too busy to chase
            return False
        settled = True
        for other in range(low + 1, high + 1):
            if ours(other):                         # another call's leader: no fork of this one
                continue
            environ = read_file(f"/proc/{other}/environ")
            if not environ:
                if _child(other):                   # a child of ours between exec's steps
                    continue
                if mid_exec(str(other)):
                    return False                    # caught mid-exec: the end-of-call sweep must look again
                settled = False                     # gone, or a zombie
            elif needle in environ.split(b"\0"):
                settled = False
                try:
                    os.write(procs, b"%d" % other)
                except ProcessLookupError:
                    pass                            # gone; what it forked has a later pid
                except OSError:
                    return False
        if settled:
            return True
        low = high
    return False
