"""Per-call resource limits, and the sentence that names the one a call hit.

Contract with `runner`: `CallLimits.create` runs in the parent before the spawn and makes the
call's cgroups; `child_setup` is the spawn's preexec_fn (fork, not vfork: it runs Python) and
enters them and sets the rlimits before exec, so nothing the command runs starts outside them;
`exceeded` is polled while the call runs (a fork bomb held at its cap never ends by itself);
`explain` names the limit a failed call hit ("exceeded memory limit 1GiB"); `remove` takes the
call's own cgroups away once the runner has ended its processes.

Mechanisms, per limit:
- memory: a cgroup capping the call's whole tree where one is usable (v2 memory.max with
  memory.swap.max 0; v1 memory.limit_in_bytes with memsw), told by an OOM kill in it while at
  its limit; reaching the limit alone (failcnt, "max") is not it: page cache is reclaimed there
  with nothing failing.
  RLIMIT_AS only where no memory cgroup is usable: address space is not memory (a JVM, Go or
  a sanitizer reserves far more than it touches), and at the same size it would fire first, as
  a failed allocation that only stderr shows (`SIGNS`).
- cpu: RLIMIT_CPU, soft N (SIGXCPU), hard N+1 (SIGKILL for a command that ignores SIGXCPU).
- processes: a pids cgroup (pids.max, told by pids.events "max"). RLIMIT_NPROC is no
  substitute: it counts all of the user's processes and does not bind root.
- open_files: RLIMIT_NOFILE; the failure (EMFILE) shows only in stderr.
- file_size: RLIMIT_FSIZE; SIGXFSZ, or EFBIG where that is ignored (Python ignores it).

A controller comes from cgroup v2 when it is in the runner's call cgroup's parent's
cgroup.controllers and can be enabled in its subtree_control; else from the controller's v1
hierarchy (hybrid hosts), where calls get directories under one directory per process, removed
at exit like the runner's; else it is missing here (`missing`). MCPWRAP_LIMITS_CGROUP=none
uses no cgroup at all.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import math
import os
import resource
import signal
import time
from dataclasses import dataclass

from mcpwrap.config.model import Limits
from mcpwrap.run.procfs import read_file

CGROUP_ENV = "MCPWRAP_LIMITS_CGROUP"
REMOVE_S = 1.0                  # at exit, the per-process directories get this long to empty
# Lower-case stderr text that tells a limit enforced only by an rlimit failing a call.
SIGNS = {"memory": ("memoryerror", "cannot allocate memory", "out of memory", "bad_alloc"),
         "open_files": ("too many open files",),
         "file_size": ("file too large",)}
_SIZE_UNITS = (("GiB", 1024**3), ("GB", 1000**3), ("MiB", 1024**2), ("MB", 1000**2), ("KiB", 1024), ("KB", 1000))
_CONTROLLERS = {"memory": "memory", "processes": "pids"}     # limit -> cgroup controller


def sentence(limits: Limits, name: str) -> str:
    """'exceeded memory limit 1GiB': for the limit called name in the tools file."""
    value = getattr(limits, "cpu_s" if name == "cpu" else name)
    shown = f"{value:g}s" if name == "cpu" else format_size(value) if name in ("memory", "file_size") else value
    return f"exceeded {name} limit {shown}"


def format_size(size: int) -> str:
    """Bytes in the largest unit of the tools file that holds them exactly: 1GiB, 100MB, 1536MiB."""
    return next((f"{size // unit}{name}" for name, unit in _SIZE_UNITS if size % unit == 0), f"{size}B")


# --- finding the cgroups ---------------------------------------------------------------------
def own_cgroups(proc_cgroup: str, mountinfo: str) -> dict[str, str]:
    """This process's cgroup directory per v1 controller, and under "" its cgroup v2 one.

    From the text of /proc/self/cgroup and /proc/self/mountinfo: a hierarchy is found where it
    is mounted, at the path below the mount's root (a container may mount a subtree).
    """
    mounts = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" in fields and len(fields) > (dash := fields.index("-")) + 3:
            mounts.append((fields[3], fields[4], fields[dash + 1], set(fields[dash + 3].split(","))))
    found: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        names, _, path = rest.partition(":")
        wanted = names.split(",") if names else [""]
        for root, mount, fstype, options in mounts:
            if (fstype == ("cgroup2" if hierarchy == "0" else "cgroup") and (hierarchy == "0" or options >= set(wanted))
                    and (root == "/" or path == root or path.startswith(root + "/"))):
                found.update(dict.fromkeys(wanted, os.path.normpath(os.path.join(mount, path[len(root):].lstrip("/")))))
                break
    return found


@functools.cache
def _own() -> dict[str, str]:
    return own_cgroups(read_file("/proc/self/cgroup").decode(), read_file("/proc/self/mountinfo").decode())


def _v2_usable(parent: str, controller: str, enable: bool) -> bool:
    """The controller is offered to parent's children; with enable, also switched on for them."""
    if os.environ.get(CGROUP_ENV) == "none" or controller.encode() not in read_file(f"{parent}/cgroup.controllers").split():
        return False
    if enable and controller.encode() not in read_file(f"{parent}/cgroup.subtree_control").split():
        try:
            write_file(f"{parent}/cgroup.subtree_control", f"+{controller}")
        except OSError:
            return False
    return True


def v1_base(controller: str) -> str | None:
    """Our directory in the controller's v1 hierarchy when we may make cgroups in it."""
    base = _own().get(controller)
    return base if os.environ.get(CGROUP_ENV) != "none" and base and os.access(base, os.W_OK) else None


@functools.cache
def v1_server_dir(base: str) -> str:
    """One directory for this process's calls under base, our cgroup in a v1 hierarchy; removed at exit.

    Named like the runner's v2 one, by pid namespace and pid, so one whose owner is gone (killed
    before its exit handler) is told apart and cleared here. OSError when it cannot be made.
    """
    prefix = f"mcpwrap-{os.stat('/proc/self/ns/pid').st_ino}-"
    path = os.path.join(base, f"{prefix}{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    atexit.register(_remove_server_dir, path)
    for stale in subdirs(base):
        name = os.path.basename(stale)
        if stale != path and name.startswith(prefix) and not os.path.exists(f"/proc/{name.removeprefix(prefix)}"):
            _remove_server_dir(stale)
    return path


def _mechanism(name: str, v2_parent: str | None) -> str | None:
    """The cgroup that would enforce the limit called name, in words; None when there is none."""
    controller = _CONTROLLERS[name]
    if v2_parent is not None and _v2_usable(v2_parent, controller, enable=False):
        return f"cgroup v2 {controller}"
    return f"cgroup v1 {controller}" if v1_base(controller) else None


def available(v2_parent: str | None = None) -> dict[str, str]:
    """Per limit, how this machine enforces it, for `mcpwrap check`.

    v2_parent is the directory the runner makes its call cgroups in (None where it has none).
    """
    memory, pids = _mechanism("memory", v2_parent), _mechanism("processes", v2_parent)
    return {"memory": f"{memory} for the whole call" if memory else "RLIMIT_AS per process (address space)",
            "cpu": "RLIMIT_CPU per process",
            "processes": f"{pids} for the whole call" if pids else "not available (no usable pids cgroup)",
            "open_files": "RLIMIT_NOFILE per process",
            "file_size": "RLIMIT_FSIZE per process"}


def missing(limits: Limits, v2_parent: str | None = None) -> list[str]:
    """What of limits this machine cannot enforce as asked, one sentence each."""
    problems = []
    if limits.processes is not None and not _mechanism("processes", v2_parent):
        problems.append(f"processes = {limits.processes} cannot be enforced here: no pids cgroup is usable "
                        "(RLIMIT_NPROC counts all of the user's processes and does not bind root)")
    if limits.memory is not None and not _mechanism("memory", v2_parent):
        problems.append(f"memory = {format_size(limits.memory)} is enforced per process only (RLIMIT_AS, address "
                        "space): no memory cgroup is usable to cap the call as a whole")
    return problems


# --- one call --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cgroup:
    """One cgroup that enforces one of a call's limits (`CallLimits.cgroups`)."""

    limit: str          # "memory" or "processes"
    path: str
    v2: bool
    owned: bool         # ours to remove (a v2 call cgroup is the runner's)

    def settings(self, value: int) -> list[tuple[str, int, bool]]:
        """(file, value, required): what to write; an optional file is absent without swap accounting."""
        if self.limit == "processes":
            return [("pids.max", value, True)]
        if self.v2:
            return [("memory.max", value, True), ("memory.swap.max", 0, False)]
        return [("memory.limit_in_bytes", value, True), ("memory.memsw.limit_in_bytes", value, False)]

    def hit(self) -> bool:
        """The limit stopped something: a fork failed at pids.max, or a member was OOM-killed at this limit.

        oom_kill counts victims in this cgroup whoever's limit ran out (a machine-wide OOM too),
        so this cgroup's own limit must also have been reached: v2 "oom"; v1 by the usage high
        mark (its failcnt stays 0 on recent kernels).
        """
        if self.limit == "processes":
            return _count(f"{self.path}/pids.events", "max") > 0
        if self.v2:
            return _count(f"{self.path}/memory.events", "oom_kill") > 0 and _count(f"{self.path}/memory.events", "oom") > 0
        peak, limit = (read_file(f"{self.path}/memory.{name}").strip() for name in ("max_usage_in_bytes", "limit_in_bytes"))
        return (_count(f"{self.path}/memory.oom_control", "oom_kill") > 0
                and peak.isdigit() and limit.isdigit() and int(peak) >= int(limit))


@dataclass(frozen=True)
class CallLimits:
    """One call's limits: its cgroups, and what the child does before exec."""
    limits: Limits
    cgroups: tuple[Cgroup, ...] = ()
    procs: tuple[str, ...] = ()                         # cgroup.procs files the child writes itself into
    rlimits: tuple[tuple[int, int, int], ...] = ()      # (resource, soft, hard)

    @classmethod
    def create(cls, limits: Limits, tag: str, v2_dir: str | None = None) -> CallLimits:
        """Make and configure the call's cgroups, before the spawn; tag names the v1 directories.

        v2_dir is the runner's call cgroup, already made, where a v2 controller is used when
        its parent can enable it. OSError when a cgroup that `available` offers could not be set
        up (none is left behind): the call must not run without a limit it was promised.
        """
        cgroups: list[Cgroup] = []
        try:
            for name, controller in _CONTROLLERS.items():
                if (value := getattr(limits, name)) is None:
                    continue
                if v2_dir is not None and _v2_usable(os.path.dirname(v2_dir), controller, enable=True) \
                        and os.path.exists(f"{v2_dir}/{controller}.max"):
                    group = Cgroup(name, v2_dir, v2=True, owned=False)
                elif (base := v1_base(controller)) is not None:
                    os.mkdir(path := os.path.join(v1_server_dir(base), tag))
                    group = Cgroup(name, path, v2=False, owned=True)
                else:
                    continue
                cgroups.append(group)
                for file, number, required in group.settings(value):
                    try:
                        write_file(f"{group.path}/{file}", str(number))
                    except FileNotFoundError:
                        if required:
                            raise
        except OSError:
            for group in cgroups:
                if group.owned:
                    rmdir_cgroup(group.path)
            raise
        memory_capped = any(group.limit == "memory" for group in cgroups)
        procs = tuple(dict.fromkeys(f"{group.path}/cgroup.procs" for group in cgroups))
        return cls(limits, tuple(cgroups), procs, _rlimits(limits, memory_capped))

    def child_setup(self) -> None:
        """The spawn's preexec_fn: join the call's cgroups, then set the rlimits.

        Only system calls on what create prepared; a failure raises, and the spawn fails rather
        than run the command unlimited.
        """
        for procs in self.procs:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")                      # "0" is the writer itself
            finally:
                os.close(fd)
        for which, soft, hard in self.rlimits:
            resource.setrlimit(which, (soft, hard))

    def exceeded(self) -> str | None:
        """The limit the running call hit by its cgroups' counters ("exceeded processes limit 64"), or None."""
        return next((sentence(self.limits, group.limit) for group in self.cgroups if group.hit()), None)

    def explain(self, exit_code: int | None, stderr_tail: str, cpu_s: float | None = None) -> str | None:
        """The limit a failed call hit, in words, or None when none shows.

        exit_code is the leader's (-N for signal N; a shell reports 128 + N). cpu_s, the leader's
        CPU time where the runner knows it, tells a SIGKILL at the hard RLIMIT_CPU from others.
        """
        if hit := self.exceeded():
            return hit
        code = exit_code or 0
        died = -code if code < 0 else code - 128 if code > 128 else None
        tail, limits = stderr_tail.lower(), self.limits
        if limits.cpu_s is not None and (died == signal.SIGXCPU or (
                died == signal.SIGKILL and cpu_s is not None and cpu_s >= _cpu_soft(limits.cpu_s))):
            return sentence(limits, "cpu")
        if limits.file_size is not None and died == signal.SIGXFSZ:
            return sentence(limits, "file_size")
        capped = {group.limit for group in self.cgroups}    # a memory cgroup OOM-kills; no allocation fails
        return next((sentence(limits, name) for name, signs in SIGNS.items() if getattr(limits, name) is not None
                     and name not in capped and any(sign in tail for sign in signs)), None)

    def remove(self) -> bool:
        """One pass: SIGKILL what is left in the call's own cgroups and remove them; True once all are gone.

        It does not wait, so the runner can poll it: a killed process leaves its cgroup only
        once it has exited. v1 has no cgroup.kill, hence the kill by pid.
        """
        return all([_kill_members(group.path) and rmdir_cgroup(group.path) for group in self.cgroups if group.owned])


def _cpu_soft(cpu_s: float) -> int:
    return max(1, math.ceil(cpu_s))                     # RLIMIT_CPU counts whole seconds


def _rlimits(limits: Limits, memory_capped: bool) -> tuple[tuple[int, int, int], ...]:
    """(resource, soft, hard) for the child, never above the hard limit it inherits (only root may raise it)."""
    wanted: list[tuple[int, int, int]] = []
    if limits.cpu_s is not None:
        wanted.append((resource.RLIMIT_CPU, _cpu_soft(limits.cpu_s), _cpu_soft(limits.cpu_s) + 1))
    for which, value in ((resource.RLIMIT_AS, None if memory_capped else limits.memory),
                         (resource.RLIMIT_NOFILE, limits.open_files), (resource.RLIMIT_FSIZE, limits.file_size)):
        if value is not None:
            wanted.append((which, value, value))
    capped = []
    for which, soft, hard in wanted:
        inherited = resource.getrlimit(which)[1]
        if inherited != resource.RLIM_INFINITY:
            soft, hard = min(soft, inherited), min(hard, inherited)
        capped.append((which, soft, hard))
    return tuple(capped)


# --- cgroup files ----------------------------------------------------------------------------
def write_file(path: str, data: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def _count(path: str, key: str) -> int:
    """N from the line 'key N' of an events file (0 when absent)."""
    for line in read_file(path).decode().splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _members(path: str) -> set[int]:
    return {int(pid) for pid in read_file(f"{path}/cgroup.procs").split()}


def _kill_members(path: str) -> bool:
    """SIGKILL every process in the cgroup; True when there was none.

    Each is signalled through a pidfd opened before the membership is read again, so a pid
    reused meanwhile by a process outside the cgroup is never hit.
    """
    pidfds: dict[int, int] = {}
    for pid in _members(path):
        with contextlib.suppress(OSError):
            pidfds[pid] = os.pidfd_open(pid)
    try:
        still = _members(path)
        for pid, pidfd in pidfds.items():
            if pid in still:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        for pidfd in pidfds.values():
            os.close(pidfd)
    return not pidfds


def subdirs(path: str) -> list[str]:
    try:
        return [entry.path for entry in os.scandir(path) if entry.is_dir()]
    except OSError:
        return []


def rmdir_cgroup(path: str) -> bool:
    """Remove an empty cgroup; True once it is gone (it refuses while a process is in it)."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _remove_server_dir(path: str) -> None:
    """Kill what the calls' own removal left in a per-process v1 directory, then remove it all."""
    deadline = time.monotonic() + REMOVE_S
    while not (all([_kill_members(call) and rmdir_cgroup(call) for call in subdirs(path)]) and rmdir_cgroup(path)) \
            and time.monotonic() < deadline:
        time.sleep(0.01)


__all__ = ["CGROUP_ENV", "SIGNS", "CallLimits", "Limits", "available", "format_size", "missing", "own_cgroups",
           "read_file", "rmdir_cgroup", "sentence", "subdirs", "write_file"]
