"""The spawn helper (`mcpwrap.spawner`): calls started while another runs are spawned, and moved
into their cgroups, by a process of its own. Its promises, attacked: what it starts is contained,
answered and reaped as what the server starts itself; what it cannot start goes the in-process
way and gets the same answer; and a helper that dies or stops answering loses the calls it held
(each is answered, its processes are ended), never hangs them, and later calls are served.

Calls run in this process (as in test_containment) beside a `holder` call, so they are never the
only call running (that one is spawned on the loop). Every process carries the test's MARK.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pytest
import trio

from mcpwrap import config, runner, spawner
from mcpwrap.result import ToolResult
from tests import procs
from tests.harness import HANG_S, until

T = TypeVar("T")
PPID = 'shell = "echo $PPID"\n'
BURST = spawner.FDS_MAX // 4 + 6     # more spawns at once than one datagram carries fds for


@pytest.fixture(autouse=True)
def cgroups(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(runner.CONTAINMENT_ENV, raising=False)
    runner._server_cgroup.cache_clear()
    if not runner.containment().startswith("cgroup v2"):
        pytest.skip("the spawn helper serves cgroup containment only")
    yield
    runner.stop_spawn_helper()


@pytest.fixture
def mark() -> Iterator[str]:
    value = uuid.uuid4().hex
    yield value
    kill_marked(value)


def kill_marked(value: str) -> None:
    for pid in procs.with_env("MARK", value):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def tool(mark: str, body: str) -> config.Tool:
    return config.loads(f'[tools.t]\nenv = {{ MARK = "{mark}" }}\n{body}'.encode(), Path("tools.toml")).tool("t")


def gone(mark: str) -> bool:
    return not procs.with_env("MARK", mark)


def helper() -> runner._SpawnHelper:
    assert runner._helper is not None
    return runner._helper


async def helper_ready() -> None:
    with trio.fail_after(HANG_S):
        while runner._spawn_helper() is None:
            await trio.sleep(0.01)


def beside_a_holder(mark: str, calls: Callable[[], Awaitable[T]], ready: bool = True) -> T:
    """calls() while a holder call runs and (unless not `ready`) the helper is ready: every call it
    makes is the helper's."""
    holder = tool(mark, 'shell = "echo up >&2; sleep 1040"')

    async def main() -> T:
        with trio.fail_after(HANG_S):
            async with trio.open_nursery() as nursery:
                up = trio.Event()
                nursery.start_soon(functools.partial(runner.run, holder, {}, on_stderr=lambda _: up.set()))
                await up.wait()
                if ready:
                    await helper_ready()
                result = await calls()
                nursery.cancel_scope.cancel()
        return result
    return trio.run(main)


def run_all(specs: list[tuple[config.Tool, dict[str, Any]]]) -> Callable[[], Awaitable[list[ToolResult]]]:
    async def calls() -> list[ToolResult]:
        results: list[Any] = [None] * len(specs)

        async def one(i: int) -> None:
            results[i] = await runner.run(specs[i][0], specs[i][1])
        async with trio.open_nursery() as nursery:
            for i in range(len(specs)):
                nursery.start_soon(one, i)
        return results
    return calls


def zombies_of(pid: int) -> list[int]:
    """The pid's children (each thread's: the helper spawns on its workers) that exited and wait to be reaped."""
    kids = [k for task in Path(f"/proc/{pid}/task").iterdir() for k in (task / "children").read_text().split()]
    return [int(k) for k in kids if b") Z " in procs.Proc(int(k), 0, 0).read("stat")]


def test_concurrent_calls_are_the_helpers_and_it_reaps_them(mark: str) -> None:
    spec = tool(mark, PPID + "env_inherit = false\n")      # small requests: the fds bound a datagram first
    results = beside_a_holder(mark, run_all([(spec, {})] * BURST))
    pid = helper().process.pid
    assert [r.text.strip() for r in results] == [str(pid)] * BURST and not any(r.is_error for r in results)
    until(lambda: not zombies_of(pid), lambda: f"the helper to reap its leaders: zombies {zombies_of(pid)}")


def test_exit_statuses_and_signals_come_through_the_helper(mark: str) -> None:
    results = beside_a_holder(mark, run_all([(tool(mark, 'shell = "exit 3"'), {}),
                                            (tool(mark, 'shell = "kill -9 $$"'), {}),
                                            (tool(mark, 'shell = "echo fine"'), {})]))
    assert "exited with status 3" in results[0].text and results[0].exit_code == 3
    assert "killed by signal 9" in results[1].text and results[1].exit_code == -9
    assert results[2].text == "fine\n" and not results[2].is_error


def test_a_timed_out_call_of_the_helpers_is_ended_with_all_it_started(mark: str) -> None:
    spec = tool(mark, 'shell = "trap \'\' TERM; setsid sleep 1043 & sleep 1042"\ntimeout = "1s"\nkill_grace = "0.3s"\n')
    [result] = beside_a_holder(mark, run_all([(spec, {})]))
    assert result.timed_out and "timed out after 1s" in result.text
    until(lambda: len(procs.with_env("MARK", mark)) == 0, "every process of the call and the holder to go")


def test_what_the_helper_cannot_start_gets_the_in_process_answer(mark: str, tmp_path: Path) -> None:
    missing = tool(mark, f'command = ["echo", "x"]\ncwd = "{tmp_path / "nowhere"}"\n')
    alone = trio.run(runner.run, missing, {})
    [beside] = beside_a_holder(mark, run_all([(missing, {})]))
    assert alone.is_error and "cannot start 'echo'" in alone.text
    assert beside.text == alone.text


def test_a_remembered_command_removed_is_found_further_on_path(mark: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper is sent the remembered path; when it is gone the in-process way searches PATH again."""
    first, second = tmp_path / "a", tmp_path / "b"
    for directory, word in ((first, "first"), (second, "second")):
        directory.mkdir()
        (directory / "which-one").write_text(f"#!/bin/sh\necho {word}\n")
        (directory / "which-one").chmod(0o755)
    monkeypatch.setenv("PATH", f"{first}:{second}:{os.environ['PATH']}")
    runner._inherited_env.cache_clear()
    spec = tool(mark, 'command = ["which-one"]\n')
    try:
        assert [r.text for r in beside_a_holder(mark, run_all([(spec, {})] * 2))] == ["first\n"] * 2
        (first / "which-one").unlink()
        assert [r.text for r in beside_a_holder(mark, run_all([(spec, {})] * 2))] == ["second\n"] * 2
    finally:
        runner._inherited_env.cache_clear()


def test_a_request_too_big_for_the_helper_goes_the_in_process_way(mark: str) -> None:
    spec = tool(mark, f"command = [{sys.executable!r}, '-c', 'import os, sys; print(os.getppid(), len(sys.argv[1]))', "
                      '"{text}"]\nargs.text = { type = "string" }\n')
    text = "x" * (spawner.MESSAGE_MAX + 1)
    [big, small] = beside_a_holder(mark, run_all([(spec, {"text": text}), (spec, {"text": "y"})]))
    assert big.text.split() == [str(os.getpid()), str(len(text))]
    assert small.text.split() == [str(helper().process.pid), "1"]


def test_the_helper_killed_loses_its_calls_not_their_answers(mark: str) -> None:
    victims = uuid.uuid4().hex
    spec = tool(victims, 'command = ["sleep", "1041"]\n')

    async def calls() -> list[ToolResult]:
        running = run_all([(spec, {})] * 3)
        results: list[ToolResult] = []

        async def run() -> None:
            results.extend(await running())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            while len(procs.with_env("MARK", victims)) < 3:
                await trio.sleep(0.01)
            helper().process.kill()
        return results

    try:
        results = beside_a_holder(mark, calls)
        assert len(results) == 3 and all(r.is_error and "spawn helper exited" in r.text for r in results), results
        until(lambda: gone(victims), "the lost calls' processes to be ended")
        later = beside_a_holder(mark, run_all([(tool(mark, PPID), {})] * 2))   # a new helper
        assert [r.text.strip() for r in later] == [str(helper().process.pid)] * 2
    finally:
        kill_marked(victims)


def test_a_helper_that_stops_answering_is_killed_not_waited_for(mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "HELPER_ANSWER_S", 0.5)
    stopped: list[subprocess.Popen[bytes]] = []

    async def calls() -> list[ToolResult]:
        stopped.append(helper().process)
        stopped[0].send_signal(signal.SIGSTOP)
        return await run_all([(tool(mark, 'command = ["echo", "x"]\n'), {})])()

    # Should it wait on (the wait is shielded: no fail_after ends it), the helper resumes after
    # HANG_S, the call is answered, and the assertion below fails instead of the run hanging.
    guard = threading.Timer(HANG_S, lambda: stopped[0].send_signal(signal.SIGCONT))
    guard.start()
    try:
        [result] = beside_a_holder(mark, calls)
    finally:
        guard.cancel()
    assert result.is_error and "spawn helper exited during the spawn" in result.text, result.text
    assert stopped[0].wait(HANG_S) == -signal.SIGKILL


def test_a_sibling_leader_caught_mid_exec_does_not_spoil_the_chase(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another leader the same process spawned just after ours, caught mid-exec (its environment
    reads empty), is not one of our leader's forks: the chase for early forks stays certain."""
    leader = subprocess.Popen(["sleep", "1044"])
    sibling = subprocess.Popen(["sleep", "1045"])
    try:
        real = spawner.read_file
        monkeypatch.setattr(spawner, "read_file",
                            lambda path: b"" if path == f"/proc/{sibling.pid}/environ" else real(path))
        assert spawner.mid_exec(str(sibling.pid))              # what the chase would otherwise give up on
        assert spawner.adopt_early_forks(leader.pid, b"MCPWRAP_CALL=none", -1)
    finally:
        for p in (leader, sibling):
            p.kill()
            p.wait()


# A process whose calls are the helper's: one alone (the loop's), then two beside it once the
# helper is ready; it prints the helper's pid and waits to be killed.
CALLER = """
import sys, trio
from pathlib import Path
from mcpwrap import config, runner
spec = config.loads(sys.argv[1].encode(), Path("tools.toml")).tool("t")
async def main():
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run, spec, {})
        while runner._spawn_helper() is None:
            await trio.sleep(0.01)
        for _ in range(2):
            nursery.start_soon(runner.run, spec, {})
        print(runner._helper.process.pid, flush=True)
        await trio.sleep_forever()
trio.run(main)
"""


def test_a_server_killed_outright_takes_the_helper_and_its_calls_with_it(mark: str) -> None:
    """SIGKILL runs no exit handler: the watchdog ends the calls (the helper's too), and the helper
    ends at the EOF of its socket."""
    caller = subprocess.Popen([sys.executable, "-c", CALLER, f'[tools.t]\nenv = {{ MARK = "{mark}" }}\n'
                               'command = ["sleep", "1046"]\n'], stdout=subprocess.PIPE,
                              cwd=Path(__file__).parent.parent)
    try:
        assert caller.stdout is not None
        helper_pid = int(caller.stdout.readline())
        sleepers = until(lambda: (found if len(found := procs.with_env("MARK", mark)) == 3 else None),
                         "the three calls to run")
        parents = sorted(procs.Proc(pid, 0, 0).read("stat").rsplit(b")", 1)[1].split()[1] for pid in sleepers)
        assert parents == sorted([str(caller.pid).encode()] + [str(helper_pid).encode()] * 2)
        caller.kill()
        assert caller.wait(HANG_S) == -signal.SIGKILL
        until(lambda: gone(mark), "the killed caller's calls to be ended by its watchdog")
        until(lambda: not os.path.exists(f"/proc/{helper_pid}") or
              b") Z " in procs.Proc(helper_pid, 0, 0).read("stat"), "the helper to exit")
    finally:
        caller.kill()
        caller.wait()


def test_an_environment_that_is_not_utf8_goes_the_in_process_way(mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """os.environ keeps undecodable bytes as surrogates, which the helper's JSON cannot carry."""
    monkeypatch.setenv("LATIN1", os.fsdecode(b"caf\xe9"))
    runner._inherited_env.cache_clear()
    spec = tool(mark, f"command = [{sys.executable!r}, '-c', 'import os; print(os.getppid(), os.environb[b\"LATIN1\"])']\n")
    try:
        [result] = beside_a_holder(mark, run_all([(spec, {})]))
    finally:
        runner._inherited_env.cache_clear()
    assert result.text.split() == [str(os.getpid()), "b'caf\\xe9'"], result.text


def test_requests_to_a_helper_that_died_unnoticed_go_the_in_process_way(mark: str) -> None:
    """Nothing was reading its socket when it died: the send fails, and what was not sent runs here."""
    async def calls() -> list[ToolResult]:
        dead = helper().process
        dead.kill()
        with trio.fail_after(HANG_S):
            while dead.poll() is None:
                await trio.sleep(0.01)
        return await run_all([(tool(mark, PPID), {})] * 2)()

    results = beside_a_holder(mark, calls)
    assert [r.text.strip() for r in results] == [str(os.getpid())] * 2, results


# A helper that is alive but slow: it holds every spawn until it is asked whether it lives, then
# answers that (PONG) and refuses what it held, which the server then runs itself.
SLOW_HELPER = """
import socket, sys, orjson
sock = socket.socket(fileno=int(sys.argv[2]))
sock.setblocking(True)
sock.send(orjson.dumps([[0]]))
held = []
while data := sock.recv(1 << 20):
    for request in orjson.loads(data):
        if request[0] == 0:
            held.append(request[1])
        elif request[0] == 2:
            sock.send(orjson.dumps([[4]] + [[2, call_id, 0, "held"] for call_id in held]))
            held.clear()
"""


def test_a_helper_late_with_an_answer_but_alive_is_not_killed(mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exec or an exit stuck in the kernel makes an answer late, not the helper dead: it is
    asked, it answers, and nothing is lost."""
    monkeypatch.setattr(runner, "_HELPER", SLOW_HELPER)
    # The PING goes out after one deadline and its PONG must come before the next: a generous one,
    # so a busy machine's scheduling cannot make the live helper look dead.
    monkeypatch.setattr(runner, "HELPER_ANSWER_S", 2.0)
    [result] = beside_a_holder(mark, run_all([(tool(mark, PPID), {})]))
    assert result.text.strip() == str(os.getpid()) and not result.is_error, result.text
    assert helper().process.poll() is None and helper().pongs == 1


@pytest.mark.parametrize("pidfds", [True, False])
def test_the_helpers_wire_spawn_exit_then_reap_on_request(monkeypatch: pytest.MonkeyPatch, pidfds: bool) -> None:
    """The helper's side alone, in this process: a spawn is answered, its exit reported with the
    status while the leader stays a zombie (its pid held), and reaped only on REAP. Without pidfds
    (out of fds) a thread waits for the exit instead."""
    if not pidfds:
        def no_pidfd(pid: int) -> int:
            raise OSError(24, "Too many open files")
        monkeypatch.setattr(spawner.os, "pidfd_open", no_pidfd)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.settimeout(HANG_S)
    server = threading.Thread(target=spawner._Helper(theirs).serve, daemon=True)
    server.start()
    answers: list[Any] = []

    def until_answer(kind: int) -> list[Any]:
        while not any(a[0] == kind for a in answers):
            answers.extend(orjson.loads(ours.recv(65536)))
        return next(a for a in answers if a[0] == kind)

    assert until_answer(spawner.READY) == [spawner.READY]
    out_r, out_w = os.pipe()
    procs_r, procs_w = os.pipe()                   # stands in for the call cgroup's cgroup.procs
    request = [spawner.SPAWN, 7, "/bin/sh", ["sh", "-c", "echo hi; exit 7"], "/", {"PATH": os.defpath},
               "MCPWRAP_CALL=wire"]
    try:
        socket.send_fds(ours, [orjson.dumps([request])], [out_w, out_w, out_w, procs_w])
        _, call_id, pid, moved, _ = until_answer(spawner.SPAWNED)
        assert call_id == 7 and moved and os.read(procs_r, 64) == str(pid).encode()
        assert until_answer(spawner.EXITED)[:3] == [spawner.EXITED, 7, 7]
        assert os.read(out_r, 64) == b"hi\n"
        assert b") Z " in procs.Proc(pid, 0, 0).read("stat")        # reported, not reaped
        ours.send(orjson.dumps([[spawner.REAP, 7]]))
        until(lambda: not os.path.exists(f"/proc/{pid}"), "the leader to be reaped on REAP")
    finally:
        ours.close()                                # EOF: the helper's loop returns
        server.join(HANG_S)
        for fd in (out_r, out_w, procs_r, procs_w):
            os.close(fd)
    assert not server.is_alive()


def test_a_helper_that_keeps_dying_is_given_up_and_calls_run_in_process(mark: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call beside another starts a helper while the last one died; after HELPER_STARTS the
    process stops trying, and every call is still answered (spawned here)."""
    monkeypatch.setattr(runner, "_HELPER", "raise SystemExit(3)")
    started: list[runner._SpawnHelper] = []
    real = runner._SpawnHelper

    def counted() -> runner._SpawnHelper:
        started.append(real())
        return started[-1]

    monkeypatch.setattr(runner, "_SpawnHelper", counted)

    rounds = 3 * runner.HELPER_STARTS                   # a death is noticed by one call, replaced by the next

    async def calls() -> list[ToolResult]:
        results: list[ToolResult] = []
        for _ in range(rounds):
            results += await run_all([(tool(mark, PPID), {})])()
            with trio.fail_after(HANG_S):
                while started[-1].process.poll() is None:     # it died: the next call may notice
                    await trio.sleep(0.01)
        return results

    results = beside_a_holder(mark, calls, ready=False)
    assert [r.text.strip() for r in results] == [str(os.getpid())] * rounds
    assert len(started) == runner.HELPER_STARTS
