"""A call's confinement: the sandbox (Landlock) and limits (rlimits, cgroups) its tools file asks for.

`refusal` says whether this machine can enforce them; `Confinement` holds one call's share (its
private TMPDIR, its limits' cgroups) and `Sandboxed` one sandbox policy's, shared by its calls.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable

from mcpwrap.config.model import Limits, Sandbox, Tool
from mcpwrap.run import contain, landlock, limits
from mcpwrap.run.contain import FLUSH_S
from mcpwrap.run.worker import Worker
from mcpwrap.state.durable import make_private_dir


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
        (refused if call_limits.required else tolerated).extend(limits.missing(call_limits, contain.current().cgroup))
    return tuple(refused), tuple(tolerated)


_warned: set[tuple[str, tuple[str, ...]]] = set()   # each tool's tolerated gaps are logged once


def refusal(tool: Tool, on_warning: Callable[[str], None]) -> str | None:
    """Why the tool's calls cannot run here (confinement it requires that this machine cannot
    enforce), or None; what it tolerates going without is warned of once per tool."""
    if tool.sandbox is None and tool.limits is None:
        return None
    refused, tolerated = confinement_gaps(tool)
    if refused:
        return (f"'{tool.name}' asks for confinement this machine cannot enforce: " + "; ".join(refused)
                + " (set required = false to run it anyway); nothing ran")
    if tolerated and (tool.name, tolerated) not in _warned:
        _warned.add((tool.name, tolerated))
        on_warning(f"'{tool.name}' runs without what this machine cannot enforce "
                   f"(required = false): {'; '.join(tolerated)}")
    return None


def _policy(sandbox: Sandbox, temp_root: str | None = None) -> landlock.Policy:
    extra = (temp_root,) if temp_root else ()
    return landlock.Policy(read=sandbox.read, write=sandbox.write + extra, network=sandbox.network)


@functools.cache
def _temp_root() -> str:
    """This process's directory for sandboxed calls' TMPDIRs, removed at exit."""
    path = tempfile.mkdtemp(prefix=f"mcpwrap-{os.getpid()}-")
    atexit.register(shutil.rmtree, path, True)
    return path


class Sandboxed:
    """One sandbox policy, prepared once per process: its Landlock ruleset, the directory its
    calls' TMPDIRs live in (granted by the ruleset), and a spawner thread restricted by it.

    Landlock binds the thread that restricts itself, so commands this thread spawns (vfork, as
    unconfined calls are) start confined with no code run in the child; a child that needs
    code anyway (limits) enforces `ruleset` itself. Calls of one tool share the TMPDIR root:
    each gets its own directory in it, but they are not walled off from each other. A policy
    evicted from the cache (reloads change policies) stops only once no call holds it.
    """
    KEPT = 32                                           # policies kept at once (reloads change them)
    _cache: dict[Sandbox, Sandboxed] = {}

    @classmethod
    def of(cls, sandbox: Sandbox) -> Sandboxed:
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
        self.worker = Worker("mcpwrap-sandboxed-spawner", functools.partial(landlock.enforce, self.ruleset.fd))

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


class Confinement:
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
        self.sandboxed: Sandboxed | None = None
        self._procs: str | None = None
        try:
            if tool.sandbox is not None and landlock.abi():
                self.sandboxed = Sandboxed.of(tool.sandbox)
                make_private_dir(tmpdir := os.path.join(self.sandboxed.root, tag))
                self.tmpdir = tmpdir
            if tool.limits is not None:
                self.cgroup = contain.current().new_cgroup(tag)
                self._procs = os.path.join(self.cgroup, "cgroup.procs") if self.cgroup else None
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
