"""Containment: finding and ending every process of a call, also those that left its process group.

Descendants that leave the process group (setsid, double fork) are still found. One `Containment`
is chosen per process (`current()`; `containment()` says which in words): where a writable cgroup
v2 tree with `cgroup.kill` exists, each call's leader is moved right after spawn into a cgroup of
its own under one directory for this process (fresh, or one an earlier call left empty), and ended
with `cgroup.kill`. Every child also inherits a per-call `MCPWRAP_CALL` tag: what the leader forked
before its move is found by it (among the pids allocated since) and moved in too; a sweep of
/proc/*/environ SIGKILLs what carries it when there is no cgroup, or when that chase could not be sure.
`MCPWRAP_CONTAINMENT=tag` forces the tag sweep.

A process killed outright (SIGKILL, the OOM killer) runs none of that, and its
calls' processes would live on as orphans: so the first call of each process
starts a watchdog, a shell reading a pipe only that process holds. A process
that leaves with every call ended writes one line, `ended`, as it exits; at EOF
(the process is gone, however) without it, the watchdog becomes a Python that
kills its cgroups and every process whose call tag carries the process's prefix.
Nothing is written per call (a line per call start and end cost the loop a
write, and the shell a wake-up and a read per byte, each).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import secrets
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol

import trio

from mcpwrap.run.limits import rmdir_cgroup as _rmdir, subdirs as _subdirs, write_file as _write
from mcpwrap.run.output import stderr_warning
from mcpwrap.run.procfs import adopt_early_forks, leaders, mid_exec, proc_stat, read_file as _read

FLUSH_S = 0.25              # after the call's processes are ended, the pipes get this long to drain
POLL_CAP_S = 0.05           # the backing-off wait for a group to empty polls at least this often
EXEC_RETRIES = 5            # passes of a tag sweep over processes caught mid-exec
KEPT_CGROUPS = 64           # emptied cgroups of ended calls kept for later calls (--max-calls by default)
CALL_ENV = "MCPWRAP_CALL"
CONTAINMENT_ENV = "MCPWRAP_CONTAINMENT"


async def poll(done: Callable[[], bool], limit_s: float) -> bool:
    """Until done() or limit_s, whether done: checks back off from 2 ms to POLL_CAP_S, so many waits
    stay cheap, and one done at once costs no cancel scope (the common case, once per call end)."""
    if done():
        return True
    delay = 0.002
    with trio.move_on_after(limit_s):
        while not done():
            await trio.sleep(delay)
            delay = min(2 * delay, POLL_CAP_S)
        return True
    return False


def signal_group(pgid: int, sig: int) -> bool:
    """Send sig to the group; False when no member is left."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_has_live_member(pgid: int) -> bool:
    """kill(0) counts zombies, and an orphaned zombie may wait long for a reaper that is not us."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    return any(stat is not None and int(stat[2]) == pgid and stat[0] != b"Z"
               for stat in map(proc_stat, filter(str.isdigit, entries)))


def kill_tagged(name: str, values: Collection[str], prefix: bool = False) -> None:
    """SIGKILL every other process whose environment holds name=value for one of values
    (with `prefix`, a value that starts with one of them).

    A match is signalled through a pidfd opened before its environment is read
    again, so a pid reused meanwhile is never hit. A process caught mid-exec (its
    environment reads empty for a moment) is looked at again, a few times.
    """
    needles = {f"{name}={value}".encode() for value in values}

    def tagged(pid: str, environ: bytes | None = None) -> bool:
        entries = (_read(f"/proc/{pid}/environ") if environ is None else environ).split(b"\0")
        if prefix:
            return any(entry.startswith(needle) for entry in entries for needle in needles)
        return not needles.isdisjoint(entries)

    def kill(pid: str) -> None:
        try:
            pidfd = os.pidfd_open(int(pid))
        except OSError:
            return                                      # gone already
        try:
            if tagged(pid):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(pidfd)

    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit() and e != str(os.getpid())]
    except OSError:
        return
    for _ in range(EXEC_RETRIES):
        unsure = []
        for entry in entries:
            environ = _read(f"/proc/{entry}/environ")
            if tagged(entry, environ):
                kill(entry)
            elif not environ and mid_exec(entry):
                unsure.append(entry)
        if not unsure:
            return
        entries = unsure
        time.sleep(0.01)


@dataclass
class _SweepBatch:
    tags: set[str] = field(default_factory=set)
    started: bool = False
    done: trio.Event = field(default_factory=trio.Event)


_NEXT_SWEEP: trio.lowlevel.RunVar[_SweepBatch] = trio.lowlevel.RunVar("_NEXT_SWEEP")


async def _sweep(tag: str) -> None:
    """kill_tagged for this call, in a thread; calls that end together share one pass over /proc.

    A call joins the batch not yet started, so its pass always begins after the call asked.
    """
    batch = _NEXT_SWEEP.get(_SweepBatch(started=True))
    if not batch.started:
        batch.tags.add(tag)
        await batch.done.wait()
        return
    batch = _SweepBatch({tag})
    _NEXT_SWEEP.set(batch)
    await trio.sleep(0)                                 # calls ending in this same tick join
    batch.started = True
    try:
        await trio.to_thread.run_sync(kill_tagged, CALL_ENV, batch.tags)
    finally:
        batch.done.set()

# --- one call's share: its tag, and its cgroup where it has one -----------------------------------
class Leader(Protocol):
    """The call's first process, the leader of its process group."""
    pid: int

    def poll(self) -> int | None: ...


@dataclass
class Tagged:
    """A call found by its environment tag alone: its group is signalled, the rest swept from /proc."""
    tag: str
    sweep: bool = True              # False once nothing can have escaped (the cgroup, or no descendant)

    def members(self) -> list[int]:
        """The call's processes that may have left its process group, where they can be listed."""
        return []

    def emptied(self, leader: Leader) -> bool:
        """Whether every process of the call is gone (the tag's stragglers aside: the sweep finds them)."""
        return leader.poll() is not None and (
            not signal_group(leader.pid, 0) or not _group_has_live_member(leader.pid))

    def kill(self) -> None:
        """SIGKILL what the group signal cannot reach, where that is possible at once."""

    def released(self) -> bool:
        """Once the leader is reaped: what the call held removed at once, when nothing is left to sweep
        or wait for (the common case); else False, and `release` must be awaited."""
        return not self.sweep

    async def release(self) -> None:
        """Once the leader is reaped: remove what the call held and sweep what carries its tag."""
        if self.sweep:
            await _sweep(self.tag)


@dataclass
class InCgroup(Tagged):
    """A call in a cgroup of its own: listed, emptied and killed through it, then removed, or, once
    proved empty at its end, kept in `kept` for a later call (None: removed, as limits were written to it)."""
    cgroup: str = field(kw_only=True)
    kept: list[str] | None = field(default=None, kw_only=True)

    def members(self) -> list[int]:
        if _emptied_cgroup(self.cgroup):
            return []
        return [int(pid) for pid in _read(os.path.join(self.cgroup, "cgroup.procs")).split()]

    def emptied(self, leader: Leader) -> bool:
        return _emptied_cgroup(self.cgroup)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            _write(os.path.join(self.cgroup, "cgroup.kill"), "1")

    def released(self) -> bool:
        if self.sweep:
            return False
        if self.kept is not None and len(self.kept) < KEPT_CGROUPS:    # what proved there is nothing
            self.kept.append(self.cgroup)                             # to sweep proved it empty too
            return True
        return _rmdir(self.cgroup)

    async def release(self) -> None:
        path = self.cgroup                              # SIGKILLed members leave at once; else exit cleans up
        await poll(lambda: _rmdir(path), FLUSH_S)
        await super().release()


def _emptied_cgroup(path: str) -> bool:
    return b"populated 0" in _read(os.path.join(path, "cgroup.events"))


# --- the containment of this process's calls, chosen once -------------------------------------------
class Containment(ABC):
    """How this process's calls are contained: what a fresh leader enters, and the cgroup tree if any."""
    cgroup: str | None = None       # this process's directory for its calls' cgroups

    def __init__(self) -> None:
        # Emptied cgroups of ended calls, for the next calls: a mkdir and an rmdir less a call, both
        # waiting for the kernel's cgroup lock that every move takes. A forked child (a task's
        # supervisor) makes its own: two processes never share one.
        self.emptied: list[str] = []
        os.register_at_fork(after_in_child=self.emptied.clear)

    @abstractmethod
    def describe(self) -> str:
        """In words, for the CLI and docs."""

    @abstractmethod
    def new_cgroup(self, tag: str) -> str | None:
        """A fresh cgroup for a call (None where there is none): its limits, or its containment."""

    def enter(self, pid: int, tag: str, joined: str | None = None) -> Tagged:
        """Contain a fresh leader: a child that `joined` its cgroup itself (limits: before it could
        fork) is held by it; else it is moved into one of its own where possible. Only system calls:
        a spawner thread runs it. The leader counts among `procfs.leaders` until its call forgets it."""
        leaders.add(pid)
        if joined is not None:
            return InCgroup(tag, False, cgroup=joined)
        try:
            path: str | None = self.emptied.pop()       # atomic: spawner threads take, the loop gives
        except IndexError:
            path = self.new_cgroup(tag)
        if path is None:
            return Tagged(tag)
        try:
            procs = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            _rmdir(path)
            return Tagged(tag)
        try:
            os.write(procs, b"%d" % pid)
            chased = adopt_early_forks(pid, f"{CALL_ENV}={tag}".encode(), procs)
            return InCgroup(tag, not chased, cgroup=path, kept=self.emptied)
        except OSError:
            _rmdir(path)
            return Tagged(tag)
        finally:
            os.close(procs)


class TagContainment(Containment):
    """No cgroup: the process group, then a sweep of /proc for the call's tag."""

    def describe(self) -> str:
        return "environment tag sweep"

    def new_cgroup(self, tag: str) -> str | None:
        return None


class CgroupContainment(Containment):
    """A cgroup v2 directory for this process, one cgroup under it per call, the tag as a backstop."""

    cgroup: str

    def __init__(self, path: str) -> None:
        super().__init__()
        self.cgroup = path

    def describe(self) -> str:
        return f"cgroup v2 at {self.cgroup}"

    def new_cgroup(self, tag: str) -> str | None:
        try:
            os.mkdir(path := os.path.join(self.cgroup, tag))
        except OSError:
            return None
        return path


@functools.cache
def current() -> Containment:
    """This process's containment, chosen at its first use."""
    path = None if os.environ.get(CONTAINMENT_ENV) == "tag" else _server_cgroup()
    return TagContainment() if path is None else CgroupContainment(path)


def containment() -> str:
    """Which containment is in force, in words for the CLI and docs."""
    return current().describe()


def _own_cgroup2() -> str | None:
    """This process's cgroup v2 directory, from /proc/self/cgroup and /proc/self/mountinfo."""
    own = next((line[3:].strip() for line in _read("/proc/self/cgroup").decode().splitlines()
                if line.startswith("0::")), None)
    if own is None:
        return None
    for line in _read("/proc/self/mountinfo").decode().splitlines():
        fields = line.split()
        after = fields.index("-") if "-" in fields else -1
        if after < 0 or fields[after + 1] != "cgroup2":
            continue
        root, mount = fields[3], fields[4]
        if root == "/" or own == root or own.startswith(root + "/"):
            return os.path.join(mount, own[len(root):].lstrip("/"))
    return None


def _server_cgroup() -> str | None:
    """One cgroup directory for this process's calls, or None where the tag sweep must do."""
    if (base := _own_cgroup2()) is None:
        return None
    # Named by pid namespace and pid, so a directory whose owner is gone can be told apart.
    try:
        prefix = f"mcpwrap-{os.stat('/proc/self/ns/pid').st_ino}-"
        path = os.path.join(base, f"{prefix}{os.getpid()}")
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    if not os.path.exists(os.path.join(path, "cgroup.kill")):   # kernel < 5.14
        _rmdir(path)
        return None
    atexit.register(_remove_server_cgroup, path)
    for stale in _subdirs(base):        # an mcpwrap killed before its exit handler: end what it left
        owner = os.path.basename(stale).removeprefix(prefix)
        if stale != path and stale.startswith(os.path.join(base, prefix)) and not os.path.exists(f"/proc/{owner}"):
            _remove_server_cgroup(stale)
    return path


def _remove_server_cgroup(path: str) -> None:
    """At exit: kill what a call's own cleanup could not remove, then remove it all."""
    for call in _subdirs(path):
        with contextlib.suppress(OSError):
            _write(os.path.join(call, "cgroup.kill"), "1")
    deadline = time.monotonic() + 1.0
    while not (all(map(_rmdir, _subdirs(path))) and _rmdir(path)) and time.monotonic() < deadline:
        time.sleep(0.01)


# The watchdog is a shell (a megabyte, a millisecond to start) that reads its stdin to EOF; unless
# the last line was `ended`, the process died with calls running and it becomes a Python that sweeps.
_WATCHDOG = 'while read -r line; do said=$line; done; [ "$said" = ended ] || exec "$0" -c "$1" "$2" "$3" "$4"'
_SWEEP = "import sys; sys.path.insert(0, sys.argv[1]); from mcpwrap.run.contain import orphaned; orphaned(*sys.argv[2:])"
_call_numbers = itertools.count()


class Watchdog:
    """This process's calls as its watchdog knows them: the call tag prefix, our end of the pipe the
    watchdog reads (-1 when none could start), and how many calls are running. Told `ended` at a
    normal exit with none running; otherwise our death (the pipe's EOF) makes it sweep the prefix."""

    def __init__(self, prefix: str, fd: int) -> None:
        self.prefix, self.fd, self.running = prefix, fd, 0

    def exiting(self) -> None:
        """At a normal exit with every call ended, tell the watchdog it has nothing to do."""
        if self.fd >= 0 and self.running == 0:
            with contextlib.suppress(OSError):         # a watchdog that died has nothing to be told
                os.write(self.fd, b"ended\n")


watchdog: Watchdog | None = None                  # this process's, from its first call


def call_tag() -> str:
    """A fresh call tag under this process's prefix, the call counted as running (the first starts the watchdog)."""
    global watchdog
    if watchdog is None:                                  # a forked child (a task's supervisor) is watched anew
        prefix = secrets.token_hex(6)
        watchdog = Watchdog(prefix, _start_watchdog(prefix))
        atexit.unregister(_exiting)                       # a forked child inherits its parent's registration
        atexit.register(_exiting)
    watchdog.running += 1
    return f"{watchdog.prefix}{next(_call_numbers):016x}"   # unique; a child can read its own tag anyway


def running() -> int:
    """The calls of this process started (tagged) and not yet ended."""
    return watchdog.running if watchdog is not None else 0


def call_ended() -> None:
    """The call's processes are all gone: one fewer for the watchdog to sweep if we died now."""
    if watchdog is not None:
        watchdog.running -= 1


def _exiting() -> None:
    if watchdog is not None:
        watchdog.exiting()


def _start_watchdog(prefix: str) -> int:
    theirs, ours = os.pipe2(os.O_CLOEXEC)                # no call inherits our end: only our death closes it
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # mcpwrap's parent
    try:
        # Its own session (a terminal's ^C is ours to handle) and an empty environment (no call tag
        # an outer mcpwrap's sweep would match: it must outlive us to do its work).
        subprocess.Popen(["/bin/sh", "-c", _WATCHDOG, sys.executable, _SWEEP, root, prefix, current().cgroup or ""],
                         stdin=theirs, stdout=subprocess.DEVNULL, env={}, start_new_session=True, close_fds=True)
    except OSError as exc:
        os.close(ours)
        stderr_warning(f"no watchdog ({exc}): if this process is killed outright, its calls' processes survive it")
        return -1
    finally:
        os.close(theirs)
    return ours


def orphaned(prefix: str, cgroup: str) -> None:
    """The watchdog's work, once the process it watched died without ending its calls."""
    if cgroup:
        _remove_server_cgroup(cgroup)
    kill_tagged(CALL_ENV, [prefix], prefix=True)


def _after_fork() -> None:
    """A forked child must not hold its parent's watchdog pipe open (the watchdog would wait for the
    child to see the parent die); its calls get one of their own."""
    global watchdog
    if watchdog is not None and watchdog.fd >= 0:
        os.close(watchdog.fd)
    watchdog = None


os.register_at_fork(after_in_child=_after_fork)
