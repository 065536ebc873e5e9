"""The runner's containment, in process (`run.process.run` on a trio loop): nothing a call starts
outlives it, ending many calls at once is quick, a move into a cgroup never holds the loop.

Each test runs in both modes: the cgroup (skipped where this machine has no writable cgroup v2
tree) and the environment tag sweep (MCPWRAP_CONTAINMENT=tag). Every process a test starts carries
a unique MARK in its environment; the test finds only those and kills any that survive. The same
promises through a real server are in tests/blackbox/sandbox/test_containment.py.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
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
from mcpwrap.run import contain
from mcpwrap.run import output as run_output
from mcpwrap.run import process as runner
from tests import procs
from tests.harness import HANG_S, until


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
    """No file of a call's cgroup stays open; what is left of the calls' cgroups is empty, kept
    for later calls (at most KEPT_CGROUPS), and removed when the process exits."""
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
    trio.run(main)
    left = call_cgroups()
    assert open_cgroup_files() == [] and 1 <= len(left) <= contain.KEPT_CGROUPS
    assert all(b"populated 0" in Path(path, "cgroup.events").read_bytes() for path in left)


def own_cgroup(result: Any) -> str:
    """The cgroup v2 path a `cgroup_printer` call printed."""
    return next(line[3:] for line in result.text.splitlines() if line.startswith("0::"))


def cgroup_printer(mark: str, extra: str = "") -> config.Tool:
    """A call that prints its cgroup once it has left ours (its move follows its exec). It forks
    nothing: a leader forking on and on can leave the chase for early forks unsure, and then its
    cgroup is swept and removed, not kept."""
    ours = next(line for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
    script = (f"while (text := open('/proc/self/cgroup').read()) and {ours!r} in text.splitlines(): pass\n"
              "print(text, end='')")
    return tool(mark, f"command = {json.dumps([sys.executable, '-c', script])}\ntimeout = \"10s\"\n{extra}")


def test_an_ended_calls_cgroup_is_the_next_calls_unless_limits_were_written_to_it(mode: str, mark: str) -> None:
    if mode == "tag":
        pytest.skip("cgroups only")
    plain = cgroup_printer(mark)
    limited = cgroup_printer(mark, "limits = { processes = 64 }\n")
    first = own_cgroup(guarded_run(plain))
    assert own_cgroup(guarded_run(plain)) == first
    inside_limits = own_cgroup(guarded_run(limited))
    assert own_cgroup(guarded_run(plain)) != inside_limits
    assert own_cgroup(guarded_run(plain)) != inside_limits


def test_a_cgroup_a_daemon_was_left_in_is_never_handed_on(mode: str, mark: str) -> None:
    """A call that leaves a daemon (setsid, its leader gone) takes the one kept cgroup; the daemon is
    ended with it, and the cgroup is removed, not kept: the next call gets a fresh one."""
    if mode == "tag":
        pytest.skip("cgroups only")
    plain = cgroup_printer(mark)
    kept = own_cgroup(guarded_run(plain))
    guarded_run(tool(mark, 'shell = "setsid sleep 1033 </dev/null >/dev/null 2>&1 & exit 0"\nkill_grace = "0.5s"\n'))
    until(lambda: gone(mark), "the daemon to be ended with its call")
    assert own_cgroup(guarded_run(plain)) != kept


def test_a_forked_child_never_takes_its_parents_kept_cgroups(mode: str, mark: str) -> None:
    """A task's supervisor is a fork of the server: were it to take a cgroup the server keeps, both
    could hand it to a call at once, and one call's end would kill the other's processes."""
    if mode == "tag":
        pytest.skip("cgroups only")
    plain = cgroup_printer(mark)
    kept = own_cgroup(guarded_run(plain))
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:                                     # pragma: no cover - the child reports on the pipe
        try:
            os.write(write_end, own_cgroup(guarded_run(plain)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    if not select.select([read_end], [], [], 2 * HANG_S)[0]:    # a child that hangs fails the test, not the run
        os.kill(child, signal.SIGKILL)
    with os.fdopen(read_end, "rb") as pipe:
        in_child = pipe.read().decode()
    os.waitpid(child, 0)
    assert in_child and in_child != kept
    assert own_cgroup(guarded_run(plain)) == kept


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
    assert seen == [(2.0, 3.0)] and warnings == [] and tracker.pattern is not None and not tracker.pattern.dropped


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
    text = (Path(__file__).parents[3] / path).read_text()
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


def test_only_an_exit_with_every_call_ended_says_ended() -> None:
    """A call still counted running at exit (its end never came) leaves the watchdog its sweep."""
    theirs, ours = os.pipe2(os.O_NONBLOCK)
    try:
        for running, said in ((1, b""), (0, b"ended\n")):
            watched = contain.Watchdog("0" * 12, ours)
            watched.running = running
            watched.exiting()
            try:
                assert os.read(theirs, 64) == said
            except BlockingIOError:
                assert said == b""
    finally:
        os.close(theirs)
        os.close(ours)
