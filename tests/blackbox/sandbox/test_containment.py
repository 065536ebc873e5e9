"""Attacks on the runner's promises: a timeout bounds the call, nothing a call starts outlives it,
ending many calls at once is quick, progress patterns cannot stall the loop, deep JSON is refused.

Each containment test runs in both modes: the cgroup (skipped where this machine has no writable
cgroup v2 tree) and the environment tag sweep (forced with MCPWRAP_CONTAINMENT=tag), so machines
without cgroups run the same code path. Every process a test starts carries a unique MARK in its
environment; the test finds only those, and kills any that survive, at teardown.

The only wall-clock bound is the HANG_S guard (bench/ measures the rest): what a call must not wait for (an escaped
writer, a daemon) lasts 1000+ s, a zombie's grace 2 * HANG_S, so the old behaviour overruns HANG_S; and
costs are counted where they grow with the machine's processes (passes over /proc), and checked
as this process's CPU time where they do not (a quadratic match).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpwrap.config import load as config
from mcpwrap.run import contain, process as runner
from tests import procs
from tests.harness import HANG_S, until
from tests.unit.run.test_contain import gone, guarded_run, tool

PR_SET_CHILD_SUBREAPER = 36


# The leader double-forks a daemon in a session of its own, waits until it runs, prints its pid and
# exits 0. The daemon keeps stdout open (the call must still end) or closes every fd (nothing left to
# notice it by but containment).
DAEMON = """
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode())
        CLOSE
        time.sleep(1024)
    os._exit(0)
os.close(w)
print(os.read(r, 32).decode(), flush=True)
"""


def run_beside_another(spec: config.Tool, other: config.Tool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """One call while `other` runs: the lone first is spawned on the loop, the second on a spawner
    thread, and both are contained alike."""
    spawned_on: list[str] = []
    popen = runner._popen
    monkeypatch.setattr(runner, "_popen", lambda *a: spawned_on.append(threading.current_thread().name) or popen(*a))

    async def main() -> Any:
        with trio.fail_after(HANG_S):
            async with trio.open_nursery() as nursery:
                up = trio.Event()
                nursery.start_soon(functools.partial(runner.run, other, {}, on_stderr=lambda _: up.set()))
                await up.wait()
                result = await runner.run(spec, {})
                nursery.cancel_scope.cancel()
                return result
    result = trio.run(main)
    assert spawned_on[0] == threading.main_thread().name and spawned_on[1].startswith("mcpwrap-spawner-"), spawned_on
    return result


@pytest.mark.parametrize("beside", [False, True])
@pytest.mark.parametrize("close", ["pass", "os.closerange(0, 65536)"])
def test_leader_exiting_ends_the_call_and_its_daemon(mode: str, mark: str, close: str, beside: bool,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    code = DAEMON.replace("CLOSE", close)
    spec = tool(mark, f"command = [{sys.executable!r}, '-c', '''{code}''']\nkill_grace = \"0.5s\"\n")
    if beside:
        result = run_beside_another(spec, tool(mark, 'shell = "echo up >&2; sleep 1027"'), monkeypatch)
    else:
        result = guarded_run(spec)
    assert not result.is_error and int(result.text) > 0
    until(lambda: gone(mark), "the daemon to be killed")


def test_cgroup_catches_a_process_that_clears_its_environment(mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tag sweep's documented limit, which the cgroup does not have.

    The leader forks only once it is in its call's cgroup: a fork before the move (a window of
    a scheduling delay) leaves only the tag sweep as a backstop, which this daemon would escape.
    """
    monkeypatch.delenv(contain.CONTAINMENT_ENV, raising=False)
    contain.current.cache_clear()
    if not contain.containment().startswith("cgroup v2"):
        pytest.skip("no writable cgroup v2 tree with cgroup.kill here")
    server = contain.current().cgroup
    assert server is not None
    seconds = f"1025.{int(mark[:8], 16)}"            # the marker is in argv: the environment is gone
    code = DAEMON.replace("CLOSE", f"os.execve({shutil.which('sleep')!r}, ['sleep', {seconds!r}], dict())")
    code = code.replace("r, w = os.pipe()", "while 'mcpwrap-' not in open('/proc/self/cgroup').read():\n"
                                            "    time.sleep(0.001)\nr, w = os.pipe()")
    spec = tool(mark, f"command = [{sys.executable!r}, '-c', '''{code}''']\n")
    before = {entry.path for entry in os.scandir(server) if entry.is_dir()}
    try:
        result = guarded_run(spec)
        assert not result.is_error and int(result.text) > 0
        until(lambda: not procs.with_cmdline(seconds), "the environment-less daemon to be killed")
    finally:
        for pid in procs.with_cmdline(seconds):
            os.kill(pid, signal.SIGKILL)
    assert {entry.path for entry in os.scandir(server) if entry.is_dir()} == before   # the call's cgroup went


def test_zombie_left_in_the_group_does_not_cost_the_grace(mode: str, mark: str) -> None:
    """An orphan whose reaper is late keeps kill(pgid, 0) succeeding; the call must not wait for it.

    The leader lets its child exit unreaped, then exits itself; the zombie passes to this test
    process, made a subreaper for the call, which reaps it only afterwards.
    """
    code = ("import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\n"
            "os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)\nprint(pid)\n")
    spec = tool(mark, f"command = [{sys.executable!r}, '-c', '''{code}''']\nkill_grace = \"{2 * int(HANG_S)}s\"\n")
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        result = guarded_run(spec)                  # waiting out the grace overruns HANG_S
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    os.waitpid(int(result.text), 0)
    assert not result.is_error


CATASTROPHIC = """
import sys, trio
from pathlib import Path
from mcpwrap.config import load as config
from mcpwrap.run import process as runner
spec = config.loads('''[tools.t]
shell = "for i in $(seq 50); do echo {line} >&2; done; echo intact"
progress = '(a+)+b'
'''.encode(), Path("tools.toml")).tool("t")
warnings = []
result = trio.run(lambda: runner.run(spec, {{}}, on_progress=lambda *_: None, on_warning=warnings.append))
print(repr(result.text), len(warnings))
"""


def test_catastrophic_user_pattern_is_stopped(tmp_path: Path) -> None:
    # In a child process: an unguarded (a+)+b on 40 a's runs for hours and no trio timeout can stop it.
    done = subprocess.run([sys.executable, "-c", CATASTROPHIC.format(line="a" * 40)], check=False, capture_output=True,
                          text=True, timeout=HANG_S, cwd=Path(__file__).parents[3])
    assert done.stdout.split() == ["'intact\\n'", "1"], done.stdout + done.stderr


def test_server_cgroup_is_removed_at_exit_and_a_dead_servers_is_ended(mode: str, mark: str) -> None:
    """At exit the process's cgroup goes, with the emptied call cgroups it kept for later calls."""
    if mode == "tag":
        pytest.skip("cgroups only")
    base = contain._own_cgroup2()
    assert base is not None
    prefix = f"mcpwrap-{os.stat('/proc/self/ns/pid').st_ino}-"
    code = ("import os, trio\nfrom pathlib import Path\nfrom mcpwrap.config import load\n"
            "from mcpwrap.run import process as runner\n"
            "tool = load.loads(b'[tools.t]\\ncommand = [\"true\"]\\n', Path('tools.toml')).tool('t')\n"
            "for _ in range(3):\n    trio.run(runner.run, tool, {})\n"
            "server = runner.containment().split()[-1]\n"
            "print(server, len([e for e in os.scandir(server) if e.is_dir()]))\n")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=HANG_S,
                          cwd=Path(__file__).parents[3])
    server, kept = done.stdout.split()
    assert kept == "1", done.stdout               # the three calls ran one after another in one cgroup
    assert server.startswith(os.path.join(base, prefix)) and not os.path.exists(server), done.stderr
    # A server that died without its exit handler left a call's cgroup with a process in it.
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = os.path.join(base, f"{prefix}{gone.pid}")
    os.makedirs(os.path.join(stale, "call"))
    sleeper = subprocess.Popen(["sleep", "1027"], env={**os.environ, "MARK": mark})
    try:
        with open(os.path.join(stale, "call", "cgroup.procs"), "w") as f:
            f.write(str(sleeper.pid))
        contain.current.cache_clear()
        assert contain.containment().startswith("cgroup v2")
        assert sleeper.wait(HANG_S) == -signal.SIGKILL and not os.path.exists(stale)
    finally:
        sleeper.kill()
        sleeper.wait()
        contain._remove_server_cgroup(stale)


def test_forks_before_the_cgroup_move_are_moved_in_too(mode: str, mark: str) -> None:
    """The race between exec and the move, forced: the leader has forked before `contain` runs."""
    if mode == "tag":
        pytest.skip("cgroups only")
    code = "import os, time\nchild = os.fork()\nif child == 0:\n    time.sleep(1028)\nprint(child, flush=True)\ntime.sleep(1028)\n"

    async def main() -> None:
        tag = uuid.uuid4().hex
        process = await trio.lowlevel.open_process(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True,
            env={**os.environ, "MARK": mark, contain.CALL_ENV: tag})
        assert process.stdout is not None
        with trio.fail_after(HANG_S):
            child = int(await process.stdout.receive_some())       # the fork is done
        held = contain.current().enter(process.pid, tag)          # as a spawn does, right after it
        call = runner._Call(process, held)
        assert isinstance(held, contain.InCgroup)
        assert f"/{os.path.basename(held.cgroup)}\n" in Path(f"/proc/{child}/cgroup").read_text()   # found, moved in
        with trio.fail_after(HANG_S):
            await call.end(0.5)
        await process.stdout.aclose()
    trio.run(main)
    until(lambda: gone(mark), "the early fork to be killed")


def test_a_process_caught_mid_exec_is_looked_at_again(mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between exec's mm switch and its new stack a process's environment reads empty: the sweep must retry."""
    sleeper = subprocess.Popen(["sleep", "1031"], env={**os.environ, "MARK": mark, contain.CALL_ENV: mark})
    try:
        real = contain._read
        first = {f"/proc/{sleeper.pid}/environ"}

        def once_empty(path: str) -> bytes:
            if path in first:
                first.discard(path)
                return b""                          # the first look lands mid-exec
            return real(path)

        monkeypatch.setattr(contain, "_read", once_empty)
        contain.kill_tagged(contain.CALL_ENV, [mark])
        assert sleeper.wait(timeout=HANG_S) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


# A process that runs calls (a server, a supervisor, `mcpwrap call`), then either stops reading its
# stdin (SIGKILL reaches it with the call running) or exits normally after its call.
CALLER = """
import sys, trio
from pathlib import Path
from mcpwrap.config import load as config
from mcpwrap.run import process as runner
spec = config.loads(sys.argv[1].encode(), Path("tools.toml")).tool("t")
print(trio.run(runner.run, spec, {}).text, end="", flush=True)
sys.stdin.read()
"""


def watchdogs_of(pid: int) -> list[int]:
    return [p.pid for p in procs.live() if p.ppid == pid and p.read("cmdline").startswith(b"/bin/sh\0-c\0" + contain._WATCHDOG.encode())]


def test_a_process_killed_outright_takes_its_calls_with_it(mode: str, mark: str) -> None:
    """SIGKILL runs no exit handler: the watchdog its first call started ends what the call left."""
    body = 'shell = "setsid sleep 1031 & sleep 1032"\n'
    caller = subprocess.Popen([sys.executable, "-c", CALLER, f'[tools.t]\nenv = {{ MARK = "{mark}" }}\n{body}'],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=Path(__file__).parents[3])
    try:
        until(lambda: len(procs.with_env("MARK", mark)) >= 3, "the shell and both sleepers to run")
        watchdog = until(lambda: watchdogs_of(caller.pid), "the caller's watchdog")
        caller.kill()
        assert caller.wait(HANG_S) == -signal.SIGKILL
        until(lambda: gone(mark), "the killed caller's sleepers to be killed by its watchdog")
        until(lambda: not any(p.pid in watchdog for p in procs.live()), "the watchdog to finish")
    finally:
        caller.kill()
        caller.wait()


def test_a_process_that_ends_its_calls_tells_its_watchdog_so(mark: str) -> None:
    """A normal exit writes `ended`, so the watchdog leaves without a sweep. The watchdog is stopped
    while the caller exits and its pipe is read through /proc: without the line it would sweep,
    and leave all the same."""
    caller = subprocess.Popen([sys.executable, "-c", CALLER, f'[tools.t]\nenv = {{ MARK = "{mark}" }}\nshell = "echo ran"\n'],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=Path(__file__).parents[3])
    try:
        assert caller.stdout is not None and caller.stdout.read(4) == b"ran\n"
        [watchdog] = until(lambda: watchdogs_of(caller.pid), "the caller's watchdog")
        os.kill(watchdog, signal.SIGSTOP)
        try:
            until(lambda: (contain.proc_stat(watchdog) or [b""])[0] == b"T", "the watchdog to stop")
            pipe = os.open(f"/proc/{watchdog}/fd/0", os.O_RDONLY | os.O_NONBLOCK)
            caller.communicate(timeout=HANG_S)                # EOF on its stdin: a normal exit
            assert caller.returncode == 0
            try:
                said = os.read(pipe, 4096)
            finally:
                os.close(pipe)
            assert said == b"ended\n"
        finally:
            os.kill(watchdog, signal.SIGCONT)
        until(lambda: watchdog not in [p.pid for p in procs.live()], "the watchdog to leave with its process")
    finally:
        caller.kill()
        caller.wait()
