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
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpwrap.config import load as config
from mcpwrap.protocol import jsonrpc
from mcpwrap.run import contain, output as run_output, process as runner
from tests import procs
from tests.harness import HANG_S, until

PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture(params=["cgroup", "tag"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "tag":
        monkeypatch.setenv(contain.CONTAINMENT_ENV, "tag")
    else:
        monkeypatch.delenv(contain.CONTAINMENT_ENV, raising=False)
    contain.current.cache_clear()
    if request.param == "cgroup" and not contain.containment().startswith("cgroup v2"):
        pytest.skip("no writable cgroup v2 tree with cgroup.kill here")
    yield request.param
    contain.current.cache_clear()


@pytest.fixture
def mark() -> Iterator[str]:
    """A value for MARK that only this test's processes carry; survivors are killed at teardown."""
    value = uuid.uuid4().hex
    yield value
    for pid in procs.with_env("MARK", value):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def tool(mark: str, body: str) -> config.Tool:
    text = f'[tools.t]\nenv = {{ MARK = "{mark}" }}\n{body}'
    return config.loads(text.encode(), Path("tools.toml")).tool("t")


def guarded_run(spec: config.Tool, **kwargs: Any) -> Any:
    """One call, which must end within HANG_S: one waiting for a 1000+ s process fails.

    The elapsed time is checked too, as a call's end is shielded from the fail_after.
    """
    async def main() -> Any:
        with trio.fail_after(HANG_S):
            return await runner.run(spec, {}, **kwargs)
    started = time.monotonic()
    result = trio.run(main)
    assert time.monotonic() - started < HANG_S
    return result


def gone(mark: str) -> bool:
    return not procs.with_env("MARK", mark)


def test_timeout_bounds_the_call_despite_an_escaped_writer(mode: str, mark: str) -> None:
    spec = tool(mark, 'shell = "setsid sleep 1021 & sleep 1022"\ntimeout = "1s"\nkill_grace = "0.5s"\n')
    result = guarded_run(spec)
    assert result.timed_out and "timed out after 1s" in result.text
    until(lambda: gone(mark), "the escaped sleeper to be killed")


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


def test_a_move_waiting_on_the_kernel_does_not_hold_the_loop(mode: str, mark: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A cgroup.procs write may wait ~10 ms for an RCU grace period (the first call after a quiet
    spell); on the loop that held every other request. Here the move waits until the loop has run."""
    moving, loop_ran = threading.Event(), threading.Event()
    waited: list[bool] = []
    containment = contain.current()
    enter = containment.enter

    def slow(pid: int, tag: str, joined: str | None = None) -> contain.Tagged:
        moving.set()
        waited.append(loop_ran.wait(HANG_S))
        return enter(pid, tag, joined)
    monkeypatch.setattr(containment, "enter", slow)

    async def main() -> None:
        with trio.fail_after(2 * HANG_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(runner.run, tool(mark, 'command = ["true"]'), {})
                await trio.to_thread.run_sync(moving.wait, HANG_S)
                loop_ran.set()
    trio.run(main)
    assert waited == [True]


def test_no_call_cgroup_or_its_files_outlive_the_calls(mode: str, mark: str) -> None:
    """Every call's cgroup is removed at its end, and no file of one stays open."""
    if mode == "tag":
        pytest.skip("cgroups only")
    server = contain.current().cgroup
    assert server is not None

    def open_cgroup_files() -> list[str]:
        links = (os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                 if os.path.exists(f"/proc/self/fd/{fd}"))
        return sorted(link for link in links if link.startswith(f"{server}/"))

    def call_cgroups() -> set[str]:
        return {entry.path for entry in os.scandir(server) if entry.is_dir()}

    async def main() -> None:
        with trio.fail_after(HANG_S):
            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(runner.run, tool(mark, 'command = ["true"]'), {})
    before = call_cgroups()
    trio.run(main)
    assert open_cgroup_files() == [] and call_cgroups() == before


def test_a_fork_among_other_calls_leaders_is_ended_with_its_call(mode: str, mark: str) -> None:
    """Other calls' leaders spawned between a leader and its fork are passed over as this process's
    children (`procfs.ours`), the fork is not: a daemon that left the group is still ended with its call."""
    forking = tool(mark, 'shell = "setsid sleep 1031 </dev/null >/dev/null 2>&1 & exit 0"\nkill_grace = "0.5s"\n')
    plain = tool(mark, 'command = ["true"]')

    async def main() -> None:
        with trio.fail_after(HANG_S):
            async with trio.open_nursery() as nursery:
                for n in range(24):
                    nursery.start_soon(runner.run, forking if n % 6 == 0 else plain, {})
    trio.run(main)
    until(lambda: gone(mark), "every call's daemon to be ended")


@pytest.mark.parametrize("calls", [200])
def test_many_term_ignoring_calls_cancelled_at_once(mode: str, mark: str, calls: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tool(mark, """shell = "trap '' TERM; echo ready >&2; sleep 1026"\nkill_grace = "1s"\n""")
    listings = []
    listdir = os.listdir

    def counted(path: Any = ".") -> list[str]:
        listings.append(path)
        return listdir(path)

    async def main() -> None:
        ready = 0
        all_ready = trio.Event()

        def line(text: str) -> None:
            nonlocal ready
            ready += text == "ready"
            if ready == calls:
                all_ready.set()
        with trio.fail_after(HANG_S):
            async with trio.open_nursery() as nursery:
                for _ in range(calls):
                    nursery.start_soon(lambda: runner.run(spec, {}, on_stderr=line))
                await all_ready.wait()
                monkeypatch.setattr(os, "listdir", counted)
                nursery.cancel_scope.cancel()      # only this ends the 1000+ s sleepers, within HANG_S
    trio.run(main)
    monkeypatch.undo()
    # Passes over /proc, what the end of a call costs in proportion to every process on the machine:
    # 3-6 here, where a scan per group every 10 ms made thousands (~0.9 s of CPU, 7 s behind a
    # server). Counted, not timed: CPU time grew 3x when another suite ran beside this one.
    assert listings.count("/proc") <= 50, listings.count("/proc")
    until(lambda: gone(mark), "every TERM-ignoring child to be killed")


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


# --- progress patterns -------------------------------------------------------------------------
def test_digit_lines_do_not_stall_the_loop(mark: str) -> None:
    """The old shipped pattern, quadratic on 8 KiB of digits (~0.25 s of CPU a line unbounded).

    Matches run on the loop's thread, so the loop is held as long as they spend CPU: this process's
    CPU time bounds the stall without depending on how busy the machine is.
    """
    digits = "7" * 8191
    spec = tool(mark, f"""shell = "for i in 1 2 3 4 5 6 7 8 9 10; do echo {digits} >&2; done; echo done"
progress = '(\\d+)/(\\d+)'
""")
    cpu = time.process_time()
    result = guarded_run(spec, on_progress=lambda *_: None)
    assert result.text == "done\n" and not result.is_error
    assert time.process_time() - cpu < 1.0          # CPU time, not wall time: the same on a busy machine


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
                          text=True, timeout=HANG_S, cwd=Path(__file__).parent.parent)
    assert done.stdout.split() == ["'intact\\n'", "1"], done.stdout + done.stderr


def test_a_match_stopped_while_preempted_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The alarm is wall-clock; a busy machine must not cost a fast pattern its progress lines."""
    real = run_output.bounded_search
    stops = iter([True, True])                 # the first two attempts are "preempted": stopped, no CPU spent

    def preempted_then_real(pattern: Any, text: str, limit: float) -> Any:
        if next(stops, False):
            raise run_output.MatchTimeout
        return real(pattern, text, limit)

    monkeypatch.setattr(run_output, "bounded_search", preempted_then_real)
    spec = config.loads(b"[tools.t]\ncommand = ['true']\nprogress = '(\\d+)/(\\d+)'\n", Path("t.toml")).tool("t")
    assert spec is not None
    seen: list[Any] = []
    warnings: list[str] = []
    tracker = run_output.ProgressTracker(spec, lambda p, t, m: seen.append((p, t)), warnings.append)
    tracker.line("step 2/3")
    assert seen == [(2.0, 3.0)] and warnings == [] and tracker.pattern is not None


def test_match_guard_stops_a_runaway_match_and_restores_signals() -> None:
    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(run_output.MatchTimeout):        # unguarded, this match runs for hours
        run_output.bounded_search(re.compile(r"(a+)+b"), "a" * 40, 0.05)
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    match = run_output.bounded_search(re.compile(r"(\d+)/(\d+)"), "step 2/3", 0.05)
    assert match is not None and match.groups() == ("2", "3")
    found: list[Any] = []                  # off the main thread there are no signals: unguarded
    thread = threading.Thread(target=lambda: found.append(run_output.bounded_search(re.compile("b"), "ab", 0.05)))
    thread.start()
    thread.join(HANG_S)
    assert found and found[0] is not None


@pytest.mark.parametrize("path", ["mcpwrap/config/starter.toml", "examples/deploy.toml", "tests/fixtures/basic.toml",
                                  "tests/fixtures/sdk.toml", "tests/fixtures/ts.toml"])
def test_shipped_progress_patterns_are_linear(path: str) -> None:
    """A line of digits with no slash: a backtracking pattern takes ~n^2 steps, a linear one ~n."""
    text = (Path(__file__).parent.parent / path).read_text()
    patterns = re.findall(r"^progress = '(.*)'$", text, re.MULTILINE)
    assert patterns
    for pattern in map(re.compile, patterns):
        started = time.process_time()
        assert pattern.search("7" * 8192) is None
        assert time.process_time() - started < 0.05, pattern.pattern
        assert pattern.search("copied 12/40 files")


# --- nesting ------------------------------------------------------------------------------------
@pytest.mark.parametrize("output, doc", [
    ("json", "[" * 300 + "]" * 300),
    ("mcp", '{"content": [], "structuredContent": {"a": ' + "[" * 300 + "]" * 300 + "}}"),
])
def test_deeply_nested_json_is_an_error_result(mark: str, output: str, doc: str) -> None:
    spec = tool(mark, f"command = ['printf', '%s', '{doc}']\noutput = '{output}'\n")
    result = guarded_run(spec)
    assert result.is_error and f"nested deeper than {run_output.OUTPUT_DEPTH} levels" in result.text


def test_depth_bound() -> None:
    def nested(depth: int) -> Any:
        value: Any = 1
        for n in range(depth):
            value = [value] if n % 2 else {"k": value}
        return value
    assert not jsonrpc.too_deep(nested(run_output.OUTPUT_DEPTH), run_output.OUTPUT_DEPTH)
    assert jsonrpc.too_deep(nested(run_output.OUTPUT_DEPTH + 1), run_output.OUTPUT_DEPTH)
    assert jsonrpc.too_deep(nested(100_000), run_output.OUTPUT_DEPTH)
    assert not jsonrpc.too_deep("x", 0)


def test_containment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contain.CONTAINMENT_ENV, "tag")
    contain.current.cache_clear()
    try:
        assert contain.containment() == "environment tag sweep"
    finally:
        contain.current.cache_clear()


def test_server_cgroup_is_removed_at_exit_and_a_dead_servers_is_ended(mode: str, mark: str) -> None:
    if mode == "tag":
        pytest.skip("cgroups only")
    base = contain._own_cgroup2()
    assert base is not None
    prefix = f"mcpwrap-{os.stat('/proc/self/ns/pid').st_ino}-"
    code = "from mcpwrap.run import process as runner\nprint(runner.containment().split()[-1])\n"
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=HANG_S,
                          cwd=Path(__file__).parent.parent)
    server = done.stdout.strip()
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
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=Path(__file__).parent.parent)
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
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=Path(__file__).parent.parent)
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


def test_only_an_exit_with_every_call_ended_says_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call still counted running at exit (its end never came) leaves the watchdog its sweep."""
    theirs, ours = os.pipe2(os.O_NONBLOCK)
    monkeypatch.setattr(contain, "_watched", ("0" * 12, ours))
    try:
        for running, said in ((1, b""), (0, b"ended\n")):
            monkeypatch.setattr(contain, "_running", running)
            contain._exiting()
            try:
                assert os.read(theirs, 64) == said
            except BlockingIOError:
                assert said == b""
    finally:
        os.close(theirs)
        os.close(ours)
