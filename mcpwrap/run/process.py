"""Running one tool call: the child process and its result.

Argv and environment come from `argv`. `run` owns the child: its own
session and process group, stdin from /dev/null or an argument, stdout kept
up to `max_output` while the rest is drained and counted (and, given a
`spool`, kept whole on disk with stderr and linked from the result), stderr
delivered line by line. On timeout, cancellation or when the leader exits, the call's
processes get SIGTERM, a grace period, then SIGKILL, inside a shielded scope;
then the pipes get `FLUSH_S` to deliver what is already written and are
abandoned, so a call answers within timeout + grace + ~0.5 s whatever its
descendants do.

Containment (`containment()` says which is in force): descendants that leave
the process group (setsid, double fork) are still found. Where a writable
cgroup v2 tree with `cgroup.kill` exists, each call's leader is moved right
after spawn into a cgroup of its own under one directory for this process,
and ended with `cgroup.kill`. Every child also inherits a per-call
`MCPWRAP_CALL` tag: what the leader forked before its move is found by it
(among the pids allocated since) and moved in too; a sweep of /proc/*/environ
SIGKILLs what carries it when there is no cgroup, or when that chase could not
be sure. `MCPWRAP_CONTAINMENT=tag` forces the tag sweep.

A process killed outright (SIGKILL, the OOM killer) runs none of that, and its
calls' processes would live on as orphans: so the first call of each process
starts a watchdog, a shell reading a pipe only that process holds. A process
that leaves with every call ended writes one line, `ended`, as it exits; at EOF
(the process is gone, however) without it, the watchdog becomes a Python that
kills its cgroups and every process whose call tag carries the process's prefix.
Nothing is written per call (a line per call start and end cost the loop a
write, and the shell a wake-up and a read per byte, each).

Progress patterns see the first `PROGRESS_WINDOW` characters of a line and,
on the main thread, each match is stopped by SIGALRM after `MATCH_LIMIT_S`;
a match stopped while it was merely preempted is tried again, and once
stopped matches have spent that much CPU (thread time) the pattern is
reported once and dropped for the call. JSON from
`output = "json"`/`"mcp"` nested deeper than `OUTPUT_DEPTH` is an error result.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import functools
import itertools
import math
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import trio

from mcpwrap.config.model import Limits, Sandbox, Tool
from mcpwrap.protocol import jsonrpc
from mcpwrap.result import (Media, MalformedOutput, Resource, ResourceLink, Text, ToolResult, error_result,
                            parse_mcp_output)
from mcpwrap.run import landlock, limits
from mcpwrap.run.arguments import resolve_paths
from mcpwrap.run.argv import ArgumentError, build_argv, build_env, with_defaults
from mcpwrap.run.limits import rmdir_cgroup as _rmdir, subdirs as _subdirs, write_file as _write
from mcpwrap.run.procfs import adopt_early_forks, last_pid, mid_exec, proc_stat, read_file as _read
from mcpwrap.state.durable import UnsafePathError, make_private_dir

if TYPE_CHECKING:                   # annotations only: a call that keeps no output imports no spool
    from mcpwrap.run.spool import Sink, Spool

STDERR_TAIL = 8192          # bytes of stderr kept for an error result
LINE_CAP = 8192             # a longer stderr/stdout line is cut for logs and progress
READ_CHUNK = 256 * 1024
FLUSH_S = 0.25              # after the call's processes are ended, the pipes get this long to drain
POLL_CAP_S = 0.05           # the backing-off wait for a group to empty polls at least this often
PROGRESS_WINDOW = 1024      # characters of a line a progress pattern sees
MATCH_LIMIT_S = 0.002       # one progress match may hold the loop this long
EXEC_RETRIES = 5            # passes of a tag sweep over processes caught mid-exec
MATCH_TRIES = 5             # a match stopped while barely running (preempted) is tried again, this often
OUTPUT_DEPTH = 64           # nesting allowed in a command's JSON (it is written back a few levels down)
CALL_ENV = "MCPWRAP_CALL"
TASK_ENV = "MCPWRAP_TASK_ID"   # set by a task's supervisor; passed on whatever the env policy
CONTAINMENT_ENV = "MCPWRAP_CONTAINMENT"

OnLine = Callable[[str], None]
OnProgress = Callable[[float, float | None, str | None], None]


@dataclass
class _Capture:
    """What the readers collected; bounded whatever the child writes."""
    stdout: bytearray
    dropped: int = 0
    stderr_tail: bytes = b""


class _LineSplitter:
    def __init__(self, on_line: OnLine) -> None:
        self.on_line = on_line
        self.pending = b""

    def feed(self, chunk: bytes | bytearray) -> None:
        data = self.pending + chunk
        *lines, self.pending = data.split(b"\n")
        if len(self.pending) > LINE_CAP:
            lines.append(self.pending)
            self.pending = b""
        for line in lines:
            self.on_line(line[:LINE_CAP].decode("utf-8", "replace").rstrip("\r"))

    def close(self) -> None:
        if self.pending:
            self.feed(b"\n")


class MatchTimeout(Exception):
    """A regular expression ran past its time limit."""


def _raise_match_timeout(signum: int, frame: Any) -> None:
    raise MatchTimeout


def bounded_search(pattern: re.Pattern[str], text: str, limit_s: float) -> re.Match[str] | None:
    """pattern.search(text), raising MatchTimeout after limit_s.

    `re` checks for signals every few thousand steps, so a SIGALRM whose handler
    raises stops a runaway match. Signals are the main thread's, and an ITIMER_REAL
    or a SIGALRM handler set outside Python is not ours to take: elsewhere the search
    runs unguarded.
    """
    if (threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_REAL)[0]
            or signal.getsignal(signal.SIGALRM) is None):
        return pattern.search(text)
    previous = signal.signal(signal.SIGALRM, _raise_match_timeout)
    try:
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        try:
            return pattern.search(text)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)     # a late alarm now meets the old handler


class _ProgressTracker:
    """Finds progress in output lines and reports only strictly increasing values."""

    def __init__(self, tool: Tool, on_progress: OnProgress | None, on_warning: OnLine) -> None:
        self.pattern, self.on_progress, self.last = tool.progress, on_progress, -math.inf
        self.tool_name, self.on_warning = tool.name, on_warning
        self.overrun_cpu = 0.0            # CPU time spent in matches the alarm stopped

    def line(self, text: str) -> None:
        if self.pattern is None or self.on_progress is None:
            return
        window = text[:PROGRESS_WINDOW]
        for _ in range(MATCH_TRIES):
            cpu = time.thread_time()
            try:
                match = bounded_search(self.pattern, window, MATCH_LIMIT_S)
                break
            except MatchTimeout:
                # The alarm is wall-clock: on a busy machine it also stops a match that was merely
                # preempted, which is tried again. The pattern goes once stopped matches add up to
                # MATCH_LIMIT_S of CPU, which a fast pattern never reaches.
                self.overrun_cpu += time.thread_time() - cpu
                if self.overrun_cpu >= MATCH_LIMIT_S:
                    self.pattern = None
                    self.on_warning(f"{self.tool_name}: the progress pattern ran over {MATCH_LIMIT_S * 1000:g} ms "
                                    "of CPU; progress is off for the rest of this call")
                    return
        else:
            return                        # preempted every time: this line gives no progress
        if not match:
            return
        groups = match.groupdict()
        try:
            progress = float(groups["progress"] if "progress" in groups else match[1])
            total_text = groups.get("total") if "total" in groups else (
                match[2] if (match.re.groups >= 2 and not groups) else None)
            total = float(total_text) if total_text else None
        except (TypeError, ValueError):
            return
        if progress > self.last:
            self.last = progress
            self.on_progress(progress, total, text)


def _stderr_warning(text: str) -> None:
    print(f"mcpwrap: {text}", file=sys.stderr)


# --- containment: the process group, a cgroup where one is writable, the environment tag ------
def _signal_group(pgid: int, sig: int) -> bool:
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


@functools.cache
def _server_cgroup() -> str | None:
    """One cgroup directory for this process's calls, or None where the tag sweep must do."""
    if os.environ.get(CONTAINMENT_ENV) == "tag" or (base := _own_cgroup2()) is None:
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
_SWEEP = "import sys; sys.path.insert(0, sys.argv[1]); from mcpwrap.run.process import orphaned; orphaned(*sys.argv[2:])"
_watched: tuple[str, int] | None = None        # (this process's call tag prefix, our end of the pipe or -1)
_running = 0                                    # calls started and not yet ended with all their processes
_call_numbers = itertools.count()


def _call_tag() -> str:
    """A fresh call tag under this process's prefix, the call counted as running (the first starts the watchdog)."""
    global _watched, _running
    if _watched is None:                                  # a forked child (a task's supervisor) is watched anew
        prefix = secrets.token_hex(6)
        _watched = (prefix, _start_watchdog(prefix))
    _running += 1
    return f"{_watched[0]}{next(_call_numbers):016x}"     # unique; a child can read its own tag anyway


def _call_ended() -> None:
    """The call's processes are all gone: one fewer for the watchdog to sweep if we died now."""
    global _running
    _running -= 1


def _exiting() -> None:
    """At a normal exit with every call ended, tell the watchdog it has nothing to do."""
    if _watched is not None and _watched[1] >= 0 and _running == 0:
        with contextlib.suppress(OSError):             # a watchdog that died has nothing to be told
            os.write(_watched[1], b"ended\n")


def _start_watchdog(prefix: str) -> int:
    theirs, ours = os.pipe2(os.O_CLOEXEC)                # no call inherits our end: only our death closes it
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # mcpwrap's parent
    try:
        # Its own session (a terminal's ^C is ours to handle) and an empty environment (no call tag
        # an outer mcpwrap's sweep would match: it must outlive us to do its work).
        subprocess.Popen(["/bin/sh", "-c", _WATCHDOG, sys.executable, _SWEEP, root, prefix, _server_cgroup() or ""],
                         stdin=theirs, stdout=subprocess.DEVNULL, env={}, start_new_session=True, close_fds=True)
    except OSError as exc:
        os.close(ours)
        _stderr_warning(f"no watchdog ({exc}): if this process is killed outright, its calls' processes survive it")
        return -1
    finally:
        os.close(theirs)
    atexit.unregister(_exiting)                        # a forked child inherits its parent's registration
    atexit.register(_exiting)
    return ours


def orphaned(prefix: str, cgroup: str) -> None:
    """The watchdog's work, once the process it watched died without ending its calls."""
    if cgroup:
        _remove_server_cgroup(cgroup)
    kill_tagged(CALL_ENV, [prefix], prefix=True)


def containment() -> str:
    """Which containment is in force, in words for the CLI and docs."""
    path = _server_cgroup()
    return f"cgroup v2 at {path}" if path else "environment tag sweep"


@functools.cache
def _devnull() -> int:
    """Kept open for every call's stdin (DEVNULL opens and closes it each spawn)."""
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


HASHED_COMMANDS = 256       # remembered command paths (a PATH set per call could make them many)
_hashed: dict[tuple[str, str | None], str] = {}           # (command, PATH) -> its path


def _command_path(command: str, env: Mapping[str, str] | None) -> str | None:
    """The command's path as last found on the PATH `env` gives, remembered as a shell's hash table
    does: the child makes one execve instead of one per PATH entry before the command's. None for
    a command not found (yet), or found relative to the call's cwd."""
    if "/" in command:
        return command
    key = (command, (os.environ if env is None else env).get("PATH"))
    path = _hashed.get(key)
    if path is None:
        found = shutil.which(command, path=os.pathsep.join(os.get_exec_path(env)))      # the PATH Popen searches
        if found is not None and os.path.isabs(found):
            if len(_hashed) >= HASHED_COMMANDS:
                _hashed.clear()
            path = _hashed[key] = found
    return path


def _popen(argv: list[str], options: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Popen with the command's path remembered (`_command_path`). A remembered path that fails
    to start is forgotten and the command searched for again; as in a shell, a command newly
    installed earlier on PATH is found once the one remembered fails."""
    path = _command_path(argv[0], options.get("env"))
    if path is not None and path != argv[0]:
        try:
            return subprocess.Popen(argv, executable=path, **options)
        except OSError:
            _hashed.pop((argv[0], (options.get("env") or os.environ).get("PATH")), None)
    return subprocess.Popen(argv, **options)


async def _poll(done: Callable[[], bool], limit_s: float) -> bool:
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


def _emptied_cgroup(path: str) -> bool:
    return b"populated 0" in _read(os.path.join(path, "cgroup.events"))


def _contain(pid: int, tag: str) -> tuple[str | None, bool]:
    """Move a fresh leader into a cgroup of its own: (that cgroup or None, whether the end-of-call
    tag sweep is still needed). Only system calls: the spawner thread runs it (see `_spawn`)."""
    server = _server_cgroup()
    if server is None:
        return None, True
    try:
        os.mkdir(path := os.path.join(server, tag))
    except OSError:
        return None, True
    try:
        procs = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        _rmdir(path)
        return None, True
    try:
        os.write(procs, b"%d" % pid)
        return path, not adopt_early_forks(pid, f"{CALL_ENV}={tag}".encode(), procs)
    except OSError:
        _rmdir(path)
        return None, True
    finally:
        os.close(procs)


@dataclass
class _Call:
    """One call's processes: the leader's group, its cgroup if any, and the environment tag."""
    process: _Child
    tag: str
    cgroup: str | None = None
    sweep: bool = True              # False once nothing can have escaped the cgroup
    ended: bool = False

    def __post_init__(self) -> None:
        # Our own pidfd tells when the leader exits without reaping it (see _alone).
        self.pidfd: int | None = None
        with contextlib.suppress(OSError):
            self.pidfd = os.pidfd_open(self.process.pid)

    async def exited(self) -> None:
        """Until the leader exits; unlike Process.wait it does not reap it."""
        if self.pidfd is None:
            await self.process.wait()
        else:
            await trio.lowlevel.wait_readable(self.pidfd)

    def _alone(self) -> bool:
        """The leader has exited and no process was created after it, so it never had a descendant.

        Until it is reaped its pid stays taken: no later process can bring ns_last_pid back to it.
        """
        try:
            exited = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:                       # reaped already: its pid may be anyone's now
            return False
        return exited and last_pid() == self.process.pid

    def _cgroup_members(self) -> list[int]:
        """Who is in the call's cgroup (none to list once it reads emptied)."""
        if not self.cgroup or _emptied_cgroup(self.cgroup):
            return []
        return [int(pid) for pid in _read(os.path.join(self.cgroup, "cgroup.procs")).split()]

    def _emptied(self) -> bool:
        if self.cgroup:
            return _emptied_cgroup(self.cgroup)
        return self.process.poll() is not None and (
            not _signal_group(self.process.pid, 0) or not _group_has_live_member(self.process.pid))

    async def end(self, grace_s: float) -> None:
        """SIGTERM everything, wait up to grace_s for it to go, SIGKILL, then remove and sweep."""
        pgid = self.process.pid
        if self._alone():                               # the common case: a command that forked nothing
            self.sweep = False
        else:
            termed = _signal_group(pgid, signal.SIGTERM)
            for pid in self._cgroup_members():          # members that left the group (setsid)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
                    termed = True
            if termed:
                emptied = await _poll(self._emptied, grace_s)
                _signal_group(pgid, signal.SIGKILL)      # harmless when the group is empty
                if self.cgroup and not emptied:         # an empty cgroup stays so: no member is left to fork
                    with contextlib.suppress(OSError):
                        _write(os.path.join(self.cgroup, "cgroup.kill"), "1")
        await self.process.wait()
        if self.pidfd is not None:
            trio.lowlevel.notify_closing(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None
        if self.cgroup:                                 # SIGKILLed members leave at once; else exit cleans up
            path = self.cgroup
            await _poll(lambda: _rmdir(path), FLUSH_S)
        if self.sweep:
            await _sweep(self.tag)
        self.ended = True


@functools.cache
def _inherited_env() -> dict[str, str]:
    """The server's environment, copied once: it does not change while serving."""
    return dict(os.environ)


def confinement_gaps(tool: Tool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What this machine cannot enforce of the tool's sandbox and limits: (what refuses its calls,
    what its author let it run without: `required = false`)."""
    return _gaps(tool.sandbox, tool.limits)


@functools.cache
def _gaps(sandbox: Sandbox | None, call_limits: Limits | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    refused: list[str] = []
    tolerated: list[str] = []
    if sandbox is not None:
        (refused if sandbox.required else tolerated).extend(landlock.missing(_policy(sandbox), landlock.abi()))
    if call_limits is not None:
        (refused if call_limits.required else tolerated).extend(limits.missing(call_limits, _server_cgroup()))
    return tuple(refused), tuple(tolerated)


_warned: set[tuple[str, tuple[str, ...]]] = set()   # each tool's tolerated gaps are logged once


def _policy(sandbox: Sandbox, temp_root: str | None = None) -> landlock.Policy:
    extra = (temp_root,) if temp_root else ()
    return landlock.Policy(read=sandbox.read, write=sandbox.write + extra, network=sandbox.network)


@functools.cache
def _temp_root() -> str:
    """This process's directory for sandboxed calls' TMPDIRs, removed at exit."""
    path = tempfile.mkdtemp(prefix=f"mcpwrap-{os.getpid()}-")
    atexit.register(shutil.rmtree, path, True)
    return path


_Woken = tuple[trio.lowlevel.TrioToken, trio.lowlevel.Task]


class _Worker:
    """A thread that runs jobs for the loop, in order; cheaper per job than trio.to_thread (no
    limiter, no context copy: a queue put, and one wake-up back). `setup` runs first on the
    thread; when it fails every job fails with its error, so nothing runs without it.

    Jobs queued meanwhile run in a row and their tasks are woken by one `run_sync_soon`: woken
    one by one, each woke the loop and handed the GIL back and forth (bench/README.md)."""

    def __init__(self, name: str, setup: Callable[[], None] | None = None) -> None:
        self.jobs: queue.SimpleQueue[Callable[[BaseException | None], _Woken] | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, args=(setup,), name=name, daemon=True).start()

    def _serve(self, setup: Callable[[], None] | None) -> None:
        failure: BaseException | None = None
        try:
            if setup is not None:
                setup()
        except OSError as exc:
            failure = exc
        stopping = False
        while not stopping:
            jobs = [self.jobs.get()]
            while not self.jobs.empty():
                jobs.append(self.jobs.get())
            woken: dict[trio.lowlevel.TrioToken, list[trio.lowlevel.Task]] = {}
            for job in jobs:
                if job is None:
                    stopping = True
                else:
                    token, task = job(failure)
                    woken.setdefault(token, []).append(task)
            for token, tasks in woken.items():
                token.run_sync_soon(_reschedule_all, tasks)

    def stop(self) -> None:
        self.jobs.put(None)

    async def run(self, fn: Callable[[], Any]) -> Any:
        """fn() on the thread. Not cancellable once queued, so what fn did (a spawn) is never lost."""
        task, token = trio.lowlevel.current_task(), trio.lowlevel.current_trio_token()
        outcome: list[Any] = []

        def job(failure: BaseException | None) -> _Woken:
            try:
                if failure is not None:
                    raise failure
                outcome.append(fn())
            except BaseException as exc:                # delivered to the awaiting task
                outcome.append(exc)
            return token, task

        self.jobs.put(job)
        await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]


def _reschedule_all(tasks: list[trio.lowlevel.Task]) -> None:
    for task in tasks:
        trio.lowlevel.reschedule(task)


SPAWNERS = 4                # spawner threads: each waits for its child's exec with the GIL released


@functools.cache
def _spawners() -> Iterator[_Worker]:
    return itertools.cycle([_Worker(f"mcpwrap-spawner-{n}") for n in range(SPAWNERS)])


def _spawner() -> _Worker:
    """The next of the threads calls are spawned and moved into their cgroups on, in turn: a spawn
    holds its thread until the child has exec'd, so one thread would allow one exec at a time."""
    return next(_spawners())


def _after_fork() -> None:
    """A forked child has none of its parent's threads (its calls start a spawner of their own), and
    it must not hold its parent's watchdog pipe open (the watchdog would wait for the child to see the
    parent die; its calls get one of their own)."""
    global _watched, _running
    _spawners.cache_clear()
    if _watched is not None and _watched[1] >= 0:
        os.close(_watched[1])
    _watched, _running = None, 0


os.register_at_fork(after_in_child=_after_fork)


class _Sandboxed:
    """One sandbox policy, prepared once per process: its Landlock ruleset, the directory its
    calls' TMPDIRs live in (granted by the ruleset), and a spawner thread restricted by it.

    Landlock binds the thread that restricts itself, so commands this thread spawns (vfork, as
    unconfined calls are) start confined with no code run in the child; a child that needs
    code anyway (limits) enforces `ruleset` itself. Calls of one tool share the TMPDIR root:
    each gets its own directory in it, but they are not walled off from each other. A policy
    evicted from the cache (reloads change policies) stops only once no call holds it.
    """
    KEPT = 32                                           # policies kept at once (reloads change them)
    _cache: dict[Sandbox, _Sandboxed] = {}

    @classmethod
    def of(cls, sandbox: Sandbox) -> _Sandboxed:
        found = cls._cache.pop(sandbox, None) or cls(sandbox)
        cls._cache[sandbox] = found                     # most recently used last
        found.users += 1                                # the caller's: give it back with release()
        while len(cls._cache) > cls.KEPT:
            cls._cache.pop(next(iter(cls._cache))).retire()
        return found

    def __init__(self, sandbox: Sandbox) -> None:
        self.root = tempfile.mkdtemp(dir=_temp_root())
        self.ruleset = landlock.prepare(_policy(sandbox, self.root))
        self.users = 0
        self.retired = False
        # every spawn fails when the thread cannot restrict itself: nothing runs unconfined
        self.worker = _Worker("mcpwrap-sandboxed-spawner", functools.partial(landlock.enforce, self.ruleset.fd))

    def release(self) -> None:
        self.users -= 1
        if self.retired and not self.users:
            self._stop()

    def retire(self) -> None:
        self.retired = True
        if not self.users:
            self._stop()

    def _stop(self) -> None:
        self.worker.stop()
        self.ruleset.close()
        shutil.rmtree(self.root, ignore_errors=True)

    async def spawn(self, argv: list[str], options: dict[str, Any]) -> subprocess.Popen[bytes]:
        """Popen on the restricted thread."""
        return await self.worker.run(functools.partial(_popen, argv, options))


class _Confinement:
    """One call's sandbox, limits and private TMPDIR.

    A sandbox alone is entered by spawning from its policy's restricted thread. With limits the
    child runs code between fork and exec (`preexec`): it joins its cgroups first (Landlock
    would deny those writes), then takes its rlimits, then restricts itself. Either way a
    failing step fails the spawn, so nothing runs unconfined.
    """

    def __init__(self, tool: Tool, tag: str) -> None:
        self.tmpdir: str | None = None
        self.cgroup: str | None = None
        self.limits: limits.CallLimits | None = None
        self.sandboxed: _Sandboxed | None = None
        self._procs: str | None = None
        try:
            if tool.sandbox is not None and landlock.abi():
                self.sandboxed = _Sandboxed.of(tool.sandbox)
                make_private_dir(tmpdir := os.path.join(self.sandboxed.root, tag))
                self.tmpdir = tmpdir
            if tool.limits is not None:
                server = _server_cgroup()
                if server is not None:
                    with contextlib.suppress(OSError):
                        os.mkdir(path := os.path.join(server, tag))
                        self.cgroup, self._procs = path, os.path.join(path, "cgroup.procs")
                self.limits = limits.CallLimits.create(tool.limits, tag, self.cgroup)
        except BaseException:
            self.close()
            self.release()
            raise

    @property
    def preexec(self) -> Callable[[], None] | None:
        return self._child if self.limits is not None else None

    def _child(self) -> None:
        """Runs in the forked child (preexec_fn): no imports, no locks."""
        if self._procs is not None:
            fd = os.open(self._procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        if self.limits is not None:
            self.limits.child_setup()
        if self.sandboxed is not None:
            landlock.enforce(self.sandboxed.ruleset.fd)

    def close(self) -> None:
        """The limits' cgroups and the TMPDIR, once emptied (it may block briefly: a thread's job)."""
        if self.limits is not None:
            deadline = time.monotonic() + FLUSH_S
            while not self.limits.remove() and time.monotonic() < deadline:
                time.sleep(0.005)
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    @property
    def light(self) -> bool:
        """Nothing to wait for: an empty TMPDIR and no cgroups (the common case, done on the loop)."""
        if self.limits is not None or self.tmpdir is None:
            return self.limits is None
        try:
            os.rmdir(self.tmpdir)
        except OSError:
            return False
        self.tmpdir = None
        return True

    def release(self) -> None:
        """On the loop, once the call is over: its sandbox policy may stop if it was evicted."""
        if self.sandboxed is not None:
            self.sandboxed.release()
            self.sandboxed = None


class _Child:
    """A spawned command: trio streams on our ends of its pipes, and the Popen that reaps it."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: int | None, stdout: int, stderr: int) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.stdin = trio.lowlevel.FdStream(stdin) if stdin is not None else None
        self.stdout = trio.lowlevel.FdStream(stdout)
        self.stderr = trio.lowlevel.FdStream(stderr)

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        return self.popen.poll()

    async def wait(self) -> int:
        if self.popen.poll() is None:                  # not yet exited (it usually has: no pidfd then)
            pidfd = os.pidfd_open(self.pid)
            try:
                await trio.lowlevel.wait_readable(pidfd)
            finally:
                trio.lowlevel.notify_closing(pidfd)
                os.close(pidfd)
            self.popen.wait()
        return self.popen.returncode  # type: ignore[return-value]


def _pipe(ours: contextlib.ExitStack, theirs: contextlib.ExitStack, child_reads: bool = False) -> tuple[int, int]:
    """A pipe (read end, write end): the child's end is closed with `theirs`, ours with `ours`."""
    r, w = os.pipe2(os.O_CLOEXEC)
    ours.callback(os.close, w if child_reads else r)
    theirs.callback(os.close, r if child_reads else w)
    return r, w


def _start(argv: list[str], options: dict[str, Any], tag: str, joined: str | None
           ) -> tuple[subprocess.Popen[bytes], str | None, bool]:
    """Popen, then the move into the call's cgroup: (the leader, its cgroup, whether the sweep is
    still needed). A child that `joined` its cgroup itself (preexec) did so before it could fork."""
    popen = _popen(argv, options)
    return (popen, joined, False) if joined else (popen, *_contain(popen.pid, tag))


async def _spawn(argv: list[str], stdin_pipe: bool, cwd: str, env: dict[str, str],
                 confinement: _Confinement | None, tag: str) -> _Call:
    """Start the command in a new session with fresh pipes, contained; OSError/SubprocessError when it cannot.

    The spawn and the move into its cgroup run on a spawner thread (`_spawner`): a cgroup.procs
    write may wait for an RCU grace period in the kernel, which on the loop held every other
    request, and Popen waits there until the child has exec'd (a preexec_fn, for limits, runs in
    the child meanwhile). A sandbox without limits is entered by spawning from its policy's thread
    (Landlock binds a thread, so the child runs no code), and moved from a spawner thread, which
    may write cgroup files. The child's ends of the pipes are closed once it has started; ours
    only if it did not.
    """
    with contextlib.ExitStack() as ours, contextlib.ExitStack() as theirs:
        out_r, out_w = _pipe(ours, theirs)
        err_r, err_w = _pipe(ours, theirs)
        in_r, in_w = _pipe(ours, theirs, child_reads=True) if stdin_pipe else (None, None)
        options: dict[str, Any] = dict(stdin=_devnull() if in_r is None else in_r, stdout=out_w, stderr=err_w,
                                       cwd=cwd, env=env, start_new_session=True, close_fds=True,
                                       preexec_fn=confinement.preexec if confinement else None)
        sandboxed = confinement.sandboxed if confinement is not None and confinement.preexec is None else None
        if sandboxed is not None:
            popen = await sandboxed.spawn(argv, options)
            cgroup, sweep = await _spawner().run(functools.partial(_contain, popen.pid, tag))
        else:
            joined = confinement.cgroup if confinement is not None else None
            popen, cgroup, sweep = await _spawner().run(functools.partial(_start, argv, options, tag, joined))
        ours.pop_all()
    return _Call(_Child(popen, in_w, out_r, err_r), tag, cgroup, sweep)


async def _watch_limits(call_limits: limits.CallLimits, hit: list[str], scope: trio.CancelScope,
                        watching: trio.CancelScope) -> None:
    """A limit that does not end the call by itself (a fork bomb held at `processes`) ends it here,
    until `watching` is cancelled (the leader exited)."""
    delay = 0.002
    with watching:
        while (exceeded := call_limits.exceeded()) is None:
            await trio.sleep(delay)
            delay = min(2 * delay, POLL_CAP_S)
        hit.append(exceeded)
        scope.cancel()


class _Keeper:
    """A call's streams kept whole in the spool once they outgrow the cap (written off the event loop).

    stdout spills when it passes `max_output`; stderr is held in memory up to the same cap and spills
    past it, or at the end when stdout spilled, so a truncated call keeps both. A spool that fails
    (disk full, unsafe directory) costs the copy, never the call.
    """

    def __init__(self, spool: Spool | None, cap: int, on_warning: OnLine) -> None:
        self.spool = spool if spool is not None and spool.enabled else None
        self.cap, self.on_warning = cap, on_warning
        self.call = ""                                  # named once something spills (most calls: never)
        self.sinks: dict[str, Sink] = {}
        self.stderr_head = bytearray()

    def spilled(self, stream: str) -> bool:
        return stream in self.sinks

    async def write(self, stream: str, data: bytes | bytearray) -> None:
        if self.spool is None:
            return
        try:
            sink = self.sinks.get(stream)
            if sink is None:
                self.call = self.call or self.spool.new_call()     # both streams of a call share it
                sink = self.sinks[stream] = await trio.to_thread.run_sync(self.spool.open, self.call, stream)
            if sink.kept:
                await trio.to_thread.run_sync(sink.write, data)
        except (OSError, UnsafePathError) as exc:
            self.on_warning(f"cannot keep the output beyond max_output: {exc}")
            self.spool = None
            for kept in self.sinks.values():         # a stream kept in part is not linked: it goes
                await trio.to_thread.run_sync(kept.abandon)

    async def stderr(self, chunk: bytes | bytearray) -> None:
        if self.spilled("stderr"):
            await self.write("stderr", chunk)
        elif len(self.stderr_head) + len(chunk) > self.cap:
            await self.write("stderr", bytes(self.stderr_head) + chunk)
            self.stderr_head = bytearray()
        else:
            self.stderr_head += chunk

    async def finish(self, tool: Tool) -> tuple[ResourceLink, ...]:
        """Close the sinks; a link for each stream kept whole."""
        if not self.sinks:                              # nothing spilled: the common case
            return ()
        links = []
        with trio.CancelScope(shield=True):
            if self.spilled("stdout") and self.stderr_head:
                await self.write("stderr", bytes(self.stderr_head))
            for stream, sink in self.sinks.items():
                await trio.to_thread.run_sync(sink.close)
                if sink.kept:
                    links.append(ResourceLink(
                        sink.uri, f"{tool.name}-{stream}", "text/plain" if tool.output == "text" else None,
                        f"the whole {stream} of this call ({sink.size} bytes); read it in pages with "
                        f"{sink.uri}?offset=N&length=M", f"{tool.name} {stream} (full)"))
        return tuple(links)


async def _drain_stdout(stream: trio.abc.ReceiveStream, capture: _Capture, cap: int,
                        on_line: OnLine | None, keeper: _Keeper) -> None:
    splitter = _LineSplitter(on_line) if on_line else None
    while chunk := await stream.receive_some(READ_CHUNK):
        room = cap - len(capture.stdout)
        if keeper.spilled("stdout"):
            await keeper.write("stdout", chunk)
        elif len(chunk) > room:
            await keeper.write("stdout", bytes(capture.stdout) + chunk)
        if room > 0:
            capture.stdout += chunk[:room]
        capture.dropped += max(0, len(chunk) - max(room, 0))
        if splitter:
            splitter.feed(chunk)
    if splitter:
        splitter.close()


async def _drain_stderr(stream: trio.abc.ReceiveStream, capture: _Capture, on_line: OnLine,
                        keeper: _Keeper) -> None:
    splitter = _LineSplitter(on_line)
    while chunk := await stream.receive_some(READ_CHUNK):
        capture.stderr_tail = (capture.stderr_tail + chunk)[-STDERR_TAIL:]
        await keeper.stderr(chunk)
        splitter.feed(chunk)
    splitter.close()


async def run(tool: Tool, args: Mapping[str, Any], *, on_stderr: OnLine | None = None,
              on_progress: OnProgress | None = None, kill_grace_s: float | None = None,
              on_warning: OnLine = _stderr_warning, spool: Spool | None = None) -> ToolResult:
    """Run one validated call to completion; cancellation ends all of the call's processes.

    With a `spool`, a stream that outgrows `max_output` is kept whole there and linked from the result."""
    args, problems = resolve_paths(tool, with_defaults(tool, args))
    if problems:          # checked when the call was accepted; a file may have changed since
        raise ArgumentError("; ".join(problems))
    argv = build_argv(tool, args)
    if tool.sandbox or tool.limits:
        refused, tolerated = confinement_gaps(tool)
        if refused:
            return error_result(f"'{tool.name}' asks for confinement this machine cannot enforce: "
                                + "; ".join(refused) + " (set required = false to run it anyway); nothing ran")
        if tolerated and (tool.name, tolerated) not in _warned:
            _warned.add((tool.name, tolerated))
            on_warning(f"'{tool.name}' runs without what this machine cannot enforce "
                       f"(required = false): {'; '.join(tolerated)}")
    tag = _call_tag()
    env = build_env(tool, args, _inherited_env())         # a fresh dict: the tag goes in without another copy
    env[CALL_ENV] = tag
    if (task_id := os.environ.get(TASK_ENV)) is not None:   # set by the supervisor after any copy
        env[TASK_ENV] = task_id
    stdin_data: bytes | None = None
    if tool.stdin_arg is not None and tool.stdin_arg in args:
        value = args[tool.stdin_arg]
        stdin_data = (value if isinstance(value, str) else orjson.dumps(value).decode()).encode()
    grace = tool.kill_grace_s if kill_grace_s is None else kill_grace_s
    progress = _ProgressTracker(tool, on_progress, on_warning)

    def stderr_line(line: str) -> None:
        progress.line(line)
        if on_stderr:
            on_stderr(line)

    stdout_lines = progress.line if tool.output == "text" and tool.progress else None
    capture = _Capture(bytearray())
    started = time.monotonic()
    confinement = None
    try:
        if tool.sandbox is not None or tool.limits is not None:
            confinement = _Confinement(tool, tag)
            if confinement.tmpdir is not None:
                env["TMPDIR"] = confinement.tmpdir
        call = await _spawn(argv, stdin_data is not None, str(tool.cwd), env, confinement, tag)
    except (OSError, subprocess.SubprocessError) as exc:
        _call_ended()
        if confinement is not None:
            confinement.close()
            confinement.release()
        return error_result(f"cannot start {argv[0]!r}" + (" confined as its tools file asks" if confinement else "")
                            + f": {getattr(exc, 'strerror', None) or exc}; nothing ran")
    process = call.process
    keeper = _Keeper(spool, tool.max_output, on_warning)
    timed_out = False
    limit_hit: list[str] = []
    assert process.stdout is not None and process.stderr is not None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain_stdout, process.stdout, capture, tool.max_output, stdout_lines, keeper)
            nursery.start_soon(_drain_stderr, process.stderr, capture, stderr_line, keeper)
            if stdin_data is not None and process.stdin is not None:
                nursery.start_soon(_feed_stdin, process.stdin, stdin_data)
            with trio.move_on_after(tool.timeout_s) as deadline:
                if confinement is not None and confinement.limits is not None:
                    watching = trio.CancelScope()
                    nursery.start_soon(_watch_limits, confinement.limits, limit_hit, deadline, watching)
                    await call.exited()
                    watching.cancel()
                else:
                    await call.exited()
            timed_out = deadline.cancelled_caught and not limit_hit
            # The leader is gone (or overran): nothing of the call may outlive it.
            with trio.CancelScope(shield=True):
                await call.end(grace)
            # What is already in the pipes gets a moment; a writer that escaped everything does not.
            nursery.cancel_scope.deadline = trio.current_time() + FLUSH_S
    finally:
        with trio.CancelScope(shield=True):
            if not call.ended:                      # cancelled before the end above
                await call.end(min(grace, 0.5))
            _call_ended()
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:                # our ends too: a writer left over gets EPIPE
                    pipe.close()                    # no checkpoint each: a scheduler pass saved per pipe
            if confinement is not None:
                stderr_tail = capture.stderr_tail.decode("utf-8", "replace")
                if not limit_hit and confinement.limits is not None:
                    limit_hit += filter(None, [confinement.limits.explain(process.returncode, stderr_tail)])
                if not confinement.light:
                    await trio.to_thread.run_sync(confinement.close)
                confinement.release()
            links = await keeper.finish(tool)
    return make_result(tool, bytes(capture.stdout), capture.dropped, process.returncode,
                       timed_out, capture.stderr_tail.decode("utf-8", "replace"),
                       time.monotonic() - started, links, limit_hit[0] if limit_hit else None)


async def _feed_stdin(stream: trio.abc.SendStream, data: bytes) -> None:
    try:
        async with stream:
            await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass                                            # the child closed stdin early: its choice


def make_result(tool: Tool, stdout: bytes, dropped: int, exit_code: int | None, timed_out: bool,
                stderr_tail: str, duration_s: float, links: tuple[ResourceLink, ...] = (),
                limit_hit: str | None = None) -> ToolResult:
    """Turn what the child produced into a ToolResult according to tool.output.

    `links` name the streams kept whole in the spool: they follow the result's other blocks."""
    meta: dict[str, Any] = dict(exit_code=exit_code, duration_s=duration_s, truncated=dropped > 0,
                                timed_out=timed_out, stderr_tail=stderr_tail)
    kept = next((link.uri for link in links if link.uri.endswith("/stdout")), None)
    where = f"; the whole output is kept at {kept}" if kept else ""
    failed = timed_out or limit_hit is not None or exit_code not in tool.success_codes
    if failed:
        why = (f"stopped: {limit_hit}" if limit_hit
               else f"timed out after {tool.timeout_s:g}s; its process group was killed" if timed_out
               else f"exited with status {exit_code}" if exit_code is not None and exit_code >= 0
               else f"killed by signal {-(exit_code or 0)}")
        parts = [stdout.decode("utf-8", "replace") if tool.output in ("text", "json") else "",
                 stderr_tail.strip(), f"[{tool.name} {why}]"]
        return ToolResult(content=(Text("\n".join(p for p in parts if p)), *links), is_error=True, **meta)
    if tool.output == "text":
        text = stdout.decode("utf-8", "replace")
        if dropped:
            text += (f"\n[output truncated: {dropped} more bytes were discarded (max_output {tool.max_output})"
                     f"{where}]")
        return ToolResult(content=(Text(text), *links), **meta)
    if dropped:
        return ToolResult(content=(Text(f"output exceeded max_output ({tool.max_output} bytes) and was cut; "
                                        f"{tool.output} output cannot be used partially{where}"), *links),
                          is_error=True, **meta)
    if tool.output == "blob":                       # a resource's bytes (no tool can ask for this)
        return ToolResult(content=(Resource("", blob=base64.b64encode(stdout).decode()),), **meta)
    if tool.output.startswith(("image/", "audio/")):
        kind = tool.output.split("/")[0]
        return ToolResult(content=(Media(kind, base64.b64encode(stdout).decode(), tool.output),), **meta)
    try:
        doc = orjson.loads(stdout)
    except orjson.JSONDecodeError as exc:
        return error_result(f"the command's output is not valid JSON: {exc}", **meta)
    if jsonrpc.too_deep(doc, OUTPUT_DEPTH):
        return error_result(f"the command's JSON is nested deeper than {OUTPUT_DEPTH} levels", **meta)
    if tool.output == "json":
        if tool.output_schema is not None:
            from jsonschema import Draft202012Validator

            problem = next(Draft202012Validator(tool.output_schema).iter_errors(doc), None)
            if problem is not None:
                return error_result(f"the command's JSON does not match output_schema: {problem.message}", **meta)
        return ToolResult(content=(Text(stdout.decode()),), structured=doc, **meta)
    try:
        content, structured, is_error = parse_mcp_output(doc)
    except MalformedOutput as exc:
        return error_result(f"the command's output is not a valid mcp result: {exc}", **meta)
    return ToolResult(content=content, structured=structured, is_error=is_error, **meta)


__all__ = ["ArgumentError", "containment", "run"]
