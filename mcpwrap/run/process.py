"""Running one tool call: its process, from spawn to end, and its result.

Argv and environment come from `argv`. `run` owns the child: its own session and process group,
stdin from /dev/null, an argument or its answers (`run.questions`; with `tty`, stdin and stdout
are a pseudo-terminal), stdout and stderr read as `output` says. On timeout,
cancellation or when the leader exits, the call's processes get SIGTERM, a grace period, then
SIGKILL, inside a shielded scope, wherever they went (`contain`); then the pipes get `FLUSH_S` to
deliver what is already written and are abandoned, so a call answers within timeout + grace +
~0.5 s whatever its descendants do. A sandbox or limits (`confine`) are entered at the spawn.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import signal
import subprocess
import termios
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import trio

from mcpwrap.config.model import Tool
from mcpwrap.protocol.argv import ArgumentError, build_argv, build_env
from mcpwrap.result import ResourceLink, ToolResult, error_result
from mcpwrap.run import confine, contain, limits
from mcpwrap.run.confine import Confinement
from mcpwrap.run.contain import CALL_ENV, FLUSH_S, POLL_CAP_S, containment, signal_group
from mcpwrap.run.output import Capture, OnLine, OnProgress, stderr_warning
from mcpwrap.run.procfs import leaders, only_ours_after
from mcpwrap.run.questions import OnQuestion, Prompts
from mcpwrap.run.worker import Worker

if TYPE_CHECKING:                   # annotations only: a call that keeps no output imports no spool
    from mcpwrap.run.spool import Spool

TASK_ENV = "MCPWRAP_TASK_ID"   # set by a task's supervisor; passed on whatever the env policy
BeforeSpawn = Callable[[list[str], str], Awaitable["str | None"]]   # (argv, cwd) -> a refusal, or None


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


@functools.cache
def _inherited_env() -> dict[str, str]:
    """The server's environment, copied once: it does not change while serving."""
    return dict(os.environ)


SPAWNERS = 8                # spawner threads: each waits for its child's exec with the GIL released, so
                            # a burst's rate is about SPAWNERS / one spawn's latency (bench/README.md)
_spawners: list[Worker] = []
_turns = itertools.count()


def _spawner() -> Worker:
    """The next of the threads calls are spawned and moved into their cgroups on, in turn: a spawn
    holds its thread until the child has exec'd, so one thread would allow one exec at a time. They
    are started one a spawn until there are SPAWNERS: a process with one call (`mcpwrap call`)
    starts one."""
    turn = next(_turns)
    if len(_spawners) < SPAWNERS:
        _spawners.append(Worker(f"mcpwrap-spawner-{len(_spawners)}"))
        return _spawners[-1]
    return _spawners[turn % SPAWNERS]


# A forked child has none of its parent's threads: its calls start spawners of their own.
os.register_at_fork(after_in_child=_spawners.clear)


class _TerminalOutput(trio.abc.ReceiveStream):
    """Our end of a command's pseudo-terminal, read as a pipe is: once no process holds the other end,
    the kernel says EIO, which is the end of the output."""

    def __init__(self, fd: int) -> None:
        self.stream = trio.lowlevel.FdStream(fd)

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        try:
            return await self.stream.receive_some(max_bytes)
        except trio.BrokenResourceError:
            return b""

    def close(self) -> None:
        self.stream.close()

    async def aclose(self) -> None:
        await self.stream.aclose()


class _Child:
    """A spawned command: trio streams on our ends of its pipes (or its terminal), and the Popen that reaps it."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: int | None, stdout: int, stderr: int,
                 terminal: bool = False) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.stdin = trio.lowlevel.FdStream(stdin) if stdin is not None else None
        self.stdout: trio.lowlevel.FdStream | _TerminalOutput = (
            _TerminalOutput(stdout) if terminal else trio.lowlevel.FdStream(stdout))
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


def _terminal(ours: contextlib.ExitStack, theirs: contextlib.ExitStack) -> tuple[int, int, int]:
    """A pseudo-terminal for the child's stdin and stdout: (our end to read, our end to write, the
    child's end). It does not echo, and passes output as written (no CR added before LF)."""
    primary, secondary = os.openpty()
    ours.callback(os.close, primary)
    theirs.callback(os.close, secondary)
    writer = os.dup(primary)
    ours.callback(os.close, writer)
    attrs = termios.tcgetattr(secondary)
    attrs[1] &= ~termios.OPOST
    attrs[3] &= ~(termios.ECHO | termios.ECHONL)
    termios.tcsetattr(secondary, termios.TCSANOW, attrs)
    return primary, writer, secondary


def _start(argv: list[str], options: dict[str, Any], tag: str, joined: str | None
           ) -> tuple[subprocess.Popen[bytes], contain.Tagged]:
    """Popen, then the leader contained (`Containment.enter`)."""
    popen = _popen(argv, options)
    return popen, contain.current().enter(popen.pid, tag, joined)


async def _spawn(argv: list[str], stdin: str, cwd: str, env: dict[str, str],
                 confinement: Confinement | None, tag: str) -> _Call:
    """Start the command in a new session with fresh pipes, contained; OSError/SubprocessError when it cannot.

    The only call of the process is spawned on the loop and moved into its cgroup from a spawner
    thread; any other spawn and its move run on a spawner thread (`_spawner`): a cgroup.procs
    write may wait for an RCU grace period in the kernel, and Popen waits until the child has
    exec'd (a preexec_fn, for limits, runs in the child meanwhile). A sandbox without limits is
    entered by spawning from its policy's thread (Landlock binds a thread, so the child runs no
    code), and contained from a spawner thread, which may write cgroup files. The child's ends of
    the pipes are closed once it has started; ours only if it did not.
    """
    with contextlib.ExitStack() as ours, contextlib.ExitStack() as theirs:
        in_r: int | None
        in_w: int | None
        if stdin == "tty":
            out_r, in_w, out_w = _terminal(ours, theirs)
            in_r = out_w
        else:
            out_r, out_w = _pipe(ours, theirs)
            in_r, in_w = _pipe(ours, theirs, child_reads=True) if stdin == "pipe" else (None, None)
        err_r, err_w = _pipe(ours, theirs)
        options: dict[str, Any] = dict(stdin=_devnull() if in_r is None else in_r, stdout=out_w, stderr=err_w,
                                       cwd=cwd, env=env, start_new_session=True, close_fds=True,
                                       preexec_fn=confinement.preexec if confinement else None)
        sandboxed = confinement.sandboxed if confinement is not None and confinement.preexec is None else None
        if sandboxed is not None:
            popen = await sandboxed.worker.run(functools.partial(_popen, argv, options))
            held = await _spawner().run(functools.partial(contain.current().enter, popen.pid, tag))
        elif confinement is None and contain.running() == 1:
            # The only call: its Popen on the loop, which has nothing else to do meanwhile (a hop to a
            # spawner thread and back costs a lone call more than the fork and exec block the loop).
            popen = _popen(argv, options)
            held = await _spawner().run(functools.partial(contain.current().enter, popen.pid, tag))
        else:
            joined = confinement.cgroup if confinement is not None else None
            popen, held = await _spawner().run(functools.partial(_start, argv, options, tag, joined))
        ours.pop_all()
    return _Call(_Child(popen, in_w, out_r, err_r, terminal=stdin == "tty"), held)


@dataclass
class _Call:
    """One call's processes: the leader's group, and what contains the rest (`contain.Tagged`)."""
    process: _Child
    held: contain.Tagged
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
        """The leader has exited and every process created after it is another call's leader, so it
        never had a descendant.

        Until it is reaped its pid stays taken: no later process can bring ns_last_pid back to it.
        """
        try:
            exited = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:                       # reaped already: its pid may be anyone's now
            return False
        return exited and only_ours_after(self.process.pid)

    def _forget(self) -> None:
        """Before the leader is reaped: no longer watched, nor one of `procfs.leaders`."""
        leaders.discard(self.process.pid)
        if self.pidfd is not None:
            trio.lowlevel.notify_closing(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None

    def end_at_once(self) -> bool:
        """`end` without a wait, when nothing of the call is left (the common case): the leader exited
        with no descendant, or its cgroup, which holds all of them, is empty. Whether it ended; when
        not, `end` must be awaited, and finishes what this began."""
        held = self.held
        if self._alone():
            held.sweep = False
        elif not held.sweep and held.emptied(self.process):
            # What left the empty cgroup for the group's sake (a cgroup.procs write of its own): `end`
            # would find the cgroup empty at once and SIGKILL the group after its SIGTERM as well.
            signal_group(self.process.pid, signal.SIGKILL)
        else:
            return False
        self._forget()
        self.process.poll()                             # reaps: it has exited
        self.ended = self.held.released()
        return self.ended

    async def end(self, grace_s: float) -> None:
        """SIGTERM everything, wait up to grace_s for it to go, SIGKILL, then remove and sweep."""
        held = self.held
        if self.process.returncode is None:             # not reaped by end_at_once
            if self._alone():                           # nothing to signal
                held.sweep = False
            else:
                await self._terminate(grace_s)
            self._forget()
            await self.process.wait()
        await held.release()
        self.ended = True

    async def _terminate(self, grace_s: float) -> None:
        """The group and what left it SIGTERMed; SIGKILLed if not gone within grace_s."""
        pgid, held = self.process.pid, self.held
        termed = signal_group(pgid, signal.SIGTERM)
        for pid in held.members():                      # members that left the group (setsid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
                termed = True
        if termed:
            emptied = await contain.poll(lambda: held.emptied(self.process), grace_s)
            signal_group(pgid, signal.SIGKILL)          # harmless when the group is empty
            if not emptied:                             # an empty cgroup stays so: no member is left to fork
                held.kill()


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


async def run(tool: Tool, args: Mapping[str, Any], *, on_stderr: OnLine | None = None,
              on_progress: OnProgress | None = None, kill_grace_s: float | None = None,
              on_warning: OnLine = stderr_warning, spool: Spool | None = None,
              before_spawn: BeforeSpawn | None = None, on_question: OnQuestion | None = None) -> ToolResult:
    """Run one validated call to completion; cancellation ends all of the call's processes.

    `args` are as placed: defaults filled in and path arguments resolved (`run.arguments.place`),
    which is what was checked. With a `spool`, a stream that outgrows `max_output` is kept whole
    there and linked from the result. `before_spawn(argv, cwd)` is awaited last before the spawn
    (the audit trail's `call.start`); a refusal it returns is the result, and nothing runs. A tool
    with `ask` rules gets a stdin pipe, and its questions go to `on_question` (`run.questions`)."""
    argv = build_argv(tool, args)
    if (refused := confine.refusal(tool, on_warning)) is not None:
        return error_result(refused)
    if before_spawn is not None and (refused := await before_spawn(argv, str(tool.cwd))) is not None:
        return error_result(refused)
    tag = contain.call_tag()
    env = _call_env(tool, args, tag)
    stdin_data = _stdin_data(tool, args)
    grace = tool.kill_grace_s if kill_grace_s is None else kill_grace_s
    started = time.monotonic()
    try:
        stdin = "tty" if tool.tty else "pipe" if stdin_data is not None or tool.ask else "null"
        call, confinement = await _start_call(tool, argv, env, stdin, tag)
    except _NotStarted as failure:
        contain.call_ended()
        return error_result(str(failure))
    prompts = Prompts(tool, on_question, on_warning) if tool.ask else None
    capture = Capture(tool, spool, on_stderr, on_progress, on_warning, on_output=prompts.feed if prompts else None)
    limit_hit: list[str] = []
    timed_out = False
    try:
        timed_out = await _supervise(call, capture, confinement, stdin_data, tool.timeout_s, grace, limit_hit, prompts)
    finally:
        with trio.CancelScope(shield=True):
            links = await _wrap_up(call, capture, confinement, grace, limit_hit)
    return capture.result(call.process.returncode, timed_out, time.monotonic() - started, links,
                          limit_hit[0] if limit_hit else None, prompts.prompts_at if prompts else ())


def _call_env(tool: Tool, args: Mapping[str, Any], tag: str) -> dict[str, str]:
    """The command's environment, with the call's tag and the task id of a task's supervisor."""
    env = build_env(tool, args, _inherited_env())         # a fresh dict: the tag goes in without another copy
    env[CALL_ENV] = tag
    if (task_id := os.environ.get(TASK_ENV)) is not None:   # set by the supervisor after any copy
        env[TASK_ENV] = task_id
    return env


def _stdin_data(tool: Tool, args: Mapping[str, Any]) -> bytes | None:
    """What the command reads on stdin: the `stdin_arg` argument, a string as is, else its JSON."""
    if tool.stdin_arg is None or tool.stdin_arg not in args:
        return None
    value = args[tool.stdin_arg]
    return (value if isinstance(value, str) else orjson.dumps(value).decode()).encode()


class _NotStarted(Exception):
    """The command could not be started; nothing ran (the message says why)."""


async def _start_call(tool: Tool, argv: list[str], env: dict[str, str], stdin: str, tag: str
                      ) -> tuple[_Call, Confinement | None]:
    """The call spawned under its confinement (its TMPDIR in `env`); _NotStarted when it cannot be."""
    confinement = None
    try:
        if tool.sandbox is not None or tool.limits is not None:
            confinement = Confinement(tool, tag)
            if confinement.tmpdir is not None:
                env["TMPDIR"] = confinement.tmpdir
        return await _spawn(argv, stdin, str(tool.cwd), env, confinement, tag), confinement
    except (OSError, subprocess.SubprocessError) as exc:
        if confinement is not None:
            confinement.close()
            confinement.release()
        if not tool.cwd.is_dir():                       # the kernel says ENOENT for the cwd as for the program
            raise _NotStarted(f"cannot start {argv[0]!r}: its cwd {tool.cwd} "
                              f"{'is not a directory' if tool.cwd.exists() else 'does not exist'}; nothing ran") from exc
        raise _NotStarted(f"cannot start {argv[0]!r}" + (" confined as its tools file asks" if confinement else "")
                          + f": {getattr(exc, 'strerror', None) or exc}; nothing ran") from exc


async def _supervise(call: _Call, capture: Capture, confinement: Confinement | None, stdin_data: bytes | None,
                     timeout_s: float, grace_s: float, limit_hit: list[str], prompts: Prompts | None = None) -> bool:
    """Read the call's output and feed its stdin (or answer its questions) until the leader exits, times
    out, hits a limit or asks what nobody answers (both said in `limit_hit`); then end the call's
    processes. Whether it timed out."""
    process = call.process
    assert process.stdout is not None and process.stderr is not None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(capture.read_stdout, process.stdout)
        nursery.start_soon(capture.read_stderr, process.stderr)
        if stdin_data is not None and process.stdin is not None:
            nursery.start_soon(_feed_stdin, process.stdin, stdin_data)
        with trio.move_on_after(timeout_s) as deadline:
            watching: list[trio.CancelScope] = []
            if confinement is not None and confinement.limits is not None:
                watching.append(trio.CancelScope())
                nursery.start_soon(_watch_limits, confinement.limits, limit_hit, deadline, watching[-1])
            if prompts is not None and process.stdin is not None:
                watching.append(trio.CancelScope())
                nursery.start_soon(prompts.converse, process.stdin, limit_hit, deadline, watching[-1])
            await call.exited()
            for scope in watching:
                scope.cancel()
        # The leader is gone (or overran): nothing of the call may outlive it.
        if not call.end_at_once():
            with trio.CancelScope(shield=True):
                await call.end(grace_s)
        # What is already in the pipes gets a moment; a writer that escaped everything does not.
        if nursery.child_tasks:
            nursery.cancel_scope.deadline = trio.current_time() + FLUSH_S
    return deadline.cancelled_caught and not limit_hit


async def _wrap_up(call: _Call, capture: Capture, confinement: Confinement | None, grace_s: float,
                   limit_hit: list[str]) -> tuple[ResourceLink, ...]:
    """In a shielded scope, whatever happened: the call's processes ended, its pipes closed, its
    confinement removed (a limit that killed it named), its kept output closed; the links to it."""
    process = call.process
    if not call.ended:                      # cancelled before the end above
        await call.end(min(grace_s, 0.5))
    contain.call_ended()
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:                # our ends too: a writer left over gets EPIPE
            pipe.close()                    # no checkpoint each: a scheduler pass saved per pipe
    if confinement is not None:
        if not limit_hit and confinement.limits is not None:
            limit_hit += filter(None, [confinement.limits.explain(process.returncode, capture.stderr_text)])
        if not confinement.light:
            await trio.to_thread.run_sync(confinement.close)
        confinement.release()
    return await capture.finish()


async def _feed_stdin(stream: trio.abc.SendStream, data: bytes) -> None:
    try:
        async with stream:
            await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass                                            # the child closed stdin early: its choice


__all__ = ["ArgumentError", "TASK_ENV", "containment", "run"]
