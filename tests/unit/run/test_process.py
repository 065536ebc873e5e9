"""The runner: no shell, bounded output, and no process outliving its call."""

from __future__ import annotations

import functools
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpwrap.config import load as config
from mcpwrap.run import contain, process as runner, worker as jobs
from mcpwrap.result import NO_STRUCTURED, Media, ResourceLink, Text
from tests import procs
from tests.harness import HANG_S, until

INJECTIONS = ["x; touch {marker}", "$(touch {marker})", "`touch {marker}`", "a\ntouch {marker}",
              "'; touch {marker}; '", "\"; touch {marker}; \"", "ünïcødé ✓ {marker}", "|| touch {marker}"]


def load(tmp_path: Path, text: str) -> config.Config:
    path = tmp_path / "tools.toml"
    path.write_text(text)
    return config.load(path)


def run(tool: config.Tool, args: dict[str, Any], **kwargs: Any) -> Any:
    return trio.run(lambda: runner.run(tool, args, **kwargs))


@pytest.mark.parametrize("attempt", INJECTIONS)
def test_no_injection_through_argv_or_env(tmp_path: Path, attempt: str) -> None:
    marker = tmp_path / "pwned"
    cfg = load(tmp_path, """
[tools.argv]
command = ["printf", "%s", "{value}"]
args.value = { type = "string" }
[tools.sh]
shell = 'printf "%s" "$MCP_ARG_VALUE"'
args.value = { type = "string" }
""")
    value = attempt.format(marker=marker)
    for name in ("argv", "sh"):
        result = run(cfg.tool(name), {"value": value})
        assert result.text == value and not result.is_error
    assert not marker.exists()


def test_values_never_split_or_become_options(tmp_path: Path) -> None:
    cfg = load(tmp_path, """
[tools.t]
command = ["prog", "{a}", "--name={a}", "--", "{a}"]
args.a = { type = "string" }
""")
    tool = cfg.tool("t")
    assert runner.build_argv(tool, {"a": "x y; z"}) == ["prog", "x y; z", "--name=x y; z", "--", "x y; z"]
    with pytest.raises(runner.ArgumentError, match="starts with '-'"):
        runner.build_argv(tool, {"a": "-rf"})
    with pytest.raises(runner.ArgumentError, match="NUL"):
        runner.build_argv(tool, {"a": "a\x00b"})


def test_a_remembered_command_that_stops_starting_is_searched_for_again(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for directory in (first, second):
        directory.mkdir()
        script = directory / "which-one"
        script.write_text(f"#!/bin/sh\necho {directory.name}\n")
        script.chmod(0o755)
    cfg = load(tmp_path, f"""
[tools.t]
command = ["which-one"]
env = {{ PATH = "{first}:{second}" }}
[tools.argv0]
command = ["sh", "-c", 'echo "$0"']
""")
    assert run(cfg.tool("t"), {}).text == "first\n"
    (first / "which-one").unlink()                      # remembered, then gone: found further on PATH
    assert run(cfg.tool("t"), {}).text == "second\n"
    (second / "which-one").chmod(0o644)                 # not executable: no path is remembered for it
    assert "nothing ran" in run(cfg.tool("t"), {}).text
    assert run(cfg.tool("argv0"), {}).text == "sh\n"     # the command still sees its own name as written


def test_optional_flags_and_arrays(tmp_path: Path) -> None:
    cfg = load(tmp_path, """
[tools.t]
command = ["prog", "{verbose}", "--include={inc}", "{n}", "--", "{files}"]
args.verbose = { type = "boolean", flag = "-v", default = false }
args.inc = { type = "array", items = { type = "string" }, default = [] }
args.n = { type = "number", optional = true }
args.files = { type = "array", items = { type = "string" } }
""")
    tool = cfg.tool("t")
    assert runner.build_argv(tool, {"verbose": True, "inc": ["a", "b c"], "n": 2.0, "files": ["-x", "y"]}) == \
        ["prog", "-v", "--include=a", "--include=b c", "2", "--", "-x", "y"]
    assert runner.build_argv(tool, {"verbose": False, "inc": [], "files": []}) == ["prog", "--"]


def test_output_modes(tmp_path: Path) -> None:
    cfg = load(tmp_path, """
[tools.json]
command = ["echo", '{"a": [1, 2]}']
output = "json"
[tools.notjson]
command = ["echo", "nope"]
output = "json"
[tools.schema]
command = ["echo", '{"a": "x"}']
output = "json"
output_schema = { type = "object", properties = { a = { type = "integer" } } }
[tools.png]
command = ["printf", "\\\\211PNG"]
output = "image/png"
[tools.mcp]
command = ["echo", '{"content": [{"type": "text", "text": "t"}, {"type": "resource_link", "uri": "file:///x", "name": "x"}], "structuredContent": {"k": 1}}']
output = "mcp"
[tools.badmcp]
command = ["echo", '{"content": [{"type": "video"}]}']
output = "mcp"
[tools.codes]
command = ["sh", "-c", "echo partial; exit 1"]
success_codes = [0, 1]
[tools.crash]
command = ["sh", "-c", "exit 2"]
protocol_error_codes = [2]
[tools.stdin]
command = ["cat"]
stdin = "body"
args.body = { type = "string" }
[tools.nostdin]
command = ["cat"]
timeout = "60s"
""")
    assert run(cfg.tool("json"), {}).structured == {"a": [1, 2]}
    bad = run(cfg.tool("notjson"), {})
    assert bad.is_error and "not valid JSON" in bad.text
    mismatch = run(cfg.tool("schema"), {})
    assert mismatch.is_error and "output_schema" in mismatch.text
    png = run(cfg.tool("png"), {})
    assert png.content == (Media("image", "iVBORw==", "image/png"),)
    rich = run(cfg.tool("mcp"), {})
    assert rich.content == (Text("t"), ResourceLink("file:///x", "x")) and rich.structured == {"k": 1}
    malformed = run(cfg.tool("badmcp"), {})
    assert malformed.is_error and "content[0].type" in malformed.text
    assert not run(cfg.tool("codes"), {}).is_error and not run(cfg.tool("codes"), {}).protocol_error
    crash = run(cfg.tool("crash"), {})
    assert crash.is_error and crash.protocol_error and crash.exit_code == 2
    assert run(cfg.tool("stdin"), {"body": "fed\n"}).text == "fed\n"
    # The call's stdin is /dev/null, never the server's: give this process a stdin that never ends
    # (pytest's is /dev/null already), on which an inheriting cat would block until its timeout.
    never_ends, writer = os.pipe()
    saved = os.dup(0)
    os.dup2(never_ends, 0)
    try:
        empty = run(cfg.tool("nostdin"), {})
    finally:
        os.dup2(saved, 0)
        for fd in (never_ends, writer, saved):
            os.close(fd)
    assert not empty.timed_out and empty.text == ""


def unique(seconds: int) -> str:
    """A sleep length no concurrent run of this suite shares, so a marker finds only our processes."""
    return f"{seconds}.{uuid.uuid4().int % 10**9}"


def gone(marker: str) -> None:
    """Wait until no process has `marker` in its argv (the sleeper's or its `sh -c` parent's).

    A SIGKILLed process may take a moment to exit, so this waits instead of looking once.
    """
    until(lambda: procs.with_cmdline(marker) == [], f"{marker!r} processes to be gone")


def test_timeout_kills_grandchildren(tmp_path: Path) -> None:
    marker = unique(1007)
    cfg = load(tmp_path, f"""
[tools.t]
command = ["sh", "-c", "sleep {marker} & sleep {marker}"]
timeout = "1s"
kill_grace = "0.5s"
""")
    result = run(cfg.tool("t"), {})                       # the 1000+ s sleepers: only the timeout ends it
    assert result.is_error and result.timed_out and "timed out after 1s" in result.text
    gone(marker)


def test_sigterm_ignoring_child_is_killed(tmp_path: Path) -> None:
    marker = unique(1009)
    cfg = load(tmp_path, f"""
[tools.t]
command = ["sh", "-c", "trap '' TERM; sleep {marker}"]
timeout = "0.3s"
kill_grace = "0.3s"
""")
    result = run(cfg.tool("t"), {})
    assert result.timed_out
    gone(marker)


def test_child_closing_stdout_early(tmp_path: Path) -> None:
    marker = unique(1011)
    cfg = load(tmp_path, f"""
[tools.t]
command = ["sh", "-c", "echo early; exec >&-; sleep {marker}"]
timeout = "0.5s"
kill_grace = "0.2s"
""")
    result = run(cfg.tool("t"), {})
    assert result.timed_out and "early" in result.text
    gone(marker)


def test_background_grandchild_dies_with_a_finished_call(tmp_path: Path) -> None:
    marker = unique(1013)
    cfg = load(tmp_path, f"""
[tools.t]
command = ["sh", "-c", "sleep {marker} & echo started"]
kill_grace = "0.3s"
""")
    result = run(cfg.tool("t"), {})
    assert result.text == "started\n" and not result.is_error
    gone(marker)


def test_cancellation_kills_group(tmp_path: Path) -> None:
    marker = unique(1015)
    cfg = load(tmp_path, f'[tools.t]\ncommand = ["sh", "-c", "sleep {marker} & sleep {marker} & echo ready >&2; wait"]\n')

    async def main() -> None:
        ready = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(runner.run, cfg.tool("t"), {}, on_stderr=lambda _: ready.set()))
            with trio.fail_after(HANG_S):
                await ready.wait()
            # the leader and both sleepers (or their forks; one mid-exec has no cmdline for a moment)
            await trio.to_thread.run_sync(until, lambda: len(procs.with_cmdline(marker)) == 3, "3 processes")
            nursery.cancel_scope.cancel()                 # the call never ends by itself: only this does
    trio.run(main)
    gone(marker)


def test_many_concurrent_calls(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[tools.t]\ncommand = ["echo", "{n}"]\nargs.n = { type = "integer" }\n')
    results: dict[int, str] = {}

    async def one(n: int) -> None:
        results[n] = (await runner.run(cfg.tool("t"), {"n": n})).text

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for n in range(100):
                nursery.start_soon(one, n)
    trio.run(main)
    assert results == {n: f"{n}\n" for n in range(100)}


def test_a_forked_process_spawns_on_a_thread_of_its_own(tmp_path: Path) -> None:
    """Calls are spawned on threads; a fork has none, so a process forked after a call must start its
    own rather than queue its spawns for a thread that is not there.
    Nor may it hold its parent's watchdog pipe open."""
    cfg = load(tmp_path, '[tools.t]\ncommand = ["echo", "ok"]\n')

    def call() -> str:
        return trio.run(runner.run, cfg.tool("t"), {}).text

    assert call() == "ok\n"                             # the spawner thread runs in this process now
    assert contain.watchdog is not None and contain.watchdog.fd >= 0
    parents_pipe = os.readlink(f"/proc/self/fd/{contain.watchdog.fd}")

    def pipes() -> set[str]:
        return {os.readlink(f"/proc/self/fd/{fd}") for fd in map(int, os.listdir("/proc/self/fd"))
                if os.path.exists(f"/proc/self/fd/{fd}")}

    child = os.fork()
    if child == 0:
        holds_parents_watchdog = parents_pipe in pipes()    # it would keep the parent's death from being seen
        os.environ[contain.CONTAINMENT_ENV] = "tag"      # it makes no cgroup in its parent's directory
        contain.current.cache_clear()
        ok = call() == "ok\n" and contain.watchdog is not None and contain.watchdog.fd >= 0   # one of its own
        os._exit(0 if ok and not holds_parents_watchdog else 1)

    def reaped() -> tuple[int, int] | None:
        pid, status = os.waitpid(child, os.WNOHANG)
        return (pid, status) if pid else None

    try:
        _, status = until(reaped, "the forked process's call")
    except AssertionError:
        os.kill(child, 9)                               # hung: its spawn waits for a thread it has not got
        os.waitpid(child, 0)
        raise
    assert os.waitstatus_to_exitcode(status) == 0


def test_stderr_lines_and_progress(tmp_path: Path) -> None:
    cfg = load(tmp_path, r"""
[tools.t]
command = ["sh", "-c", "echo 1/3 >&2; echo 1/3 >&2; echo 'step 2/3' >&2; echo 3/3 >&2; echo out"]
progress = '(?<!\d)(?P<progress>\d+)/(?P<total>\d+)'
""")
    lines: list[str] = []
    progress: list[tuple[float, float | None]] = []
    result = run(cfg.tool("t"), {}, on_stderr=lines.append, on_progress=lambda p, t, m: progress.append((p, t)))
    assert lines == ["1/3", "1/3", "step 2/3", "3/3"]
    assert progress == [(1, 3), (2, 3), (3, 3)]                 # strictly increasing only
    assert result.text == "out\n" and result.structured is NO_STRUCTURED


def test_a_worker_runs_a_burst_in_a_row_and_each_caller_gets_its_own_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs queued while the worker is busy run in a row and are woken together (one wake-up
    of the loop, not one each), and each awaiting task still gets its own value or error."""
    wake_ups: list[int] = []
    reschedule_all = jobs.reschedule_all
    monkeypatch.setattr(jobs, "reschedule_all", lambda tasks: (wake_ups.append(len(tasks)), reschedule_all(tasks)))
    worker = jobs.Worker("mcpwrap-test-worker")
    entered, gate = threading.Event(), threading.Event()

    def job(i: int) -> int:
        if i == 0:
            entered.set()
            gate.wait(HANG_S)
        if i % 3 == 2:
            raise ValueError(i)
        return i * i

    async def main() -> dict[int, Any]:
        got: dict[int, Any] = {}

        async def one(i: int) -> None:
            try:
                got[i] = await worker.run(functools.partial(job, i))
            except ValueError as exc:
                got[i] = exc

        with trio.fail_after(HANG_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(one, 0)
                await trio.to_thread.run_sync(entered.wait, HANG_S)   # the worker holds job 0 at the gate
                for i in range(1, 10):
                    nursery.start_soon(one, i)
                while worker.jobs.qsize() < 9:
                    await trio.sleep(0.001)
                gate.set()
        return got

    try:
        got = trio.run(main)
    finally:
        worker.stop()
    assert {i: (v if isinstance(v, int) else ("error", v.args[0])) for i, v in got.items()} == {
        i: ("error", i) if i % 3 == 2 else i * i for i in range(10)}
    assert wake_ups == [1, 9]


def test_kept_output_past_the_process_budget_goes_to_a_file_and_comes_back_whole(tmp_path: Path) -> None:
    """Calls together keep at most `HeldOutput.limit` bytes of stdout in memory; the rest of a call's
    kept output waits in a private file and its result is whole; the budget is given back at the end."""
    from mcpwrap.run import output

    cfg = load(tmp_path, '[tools.t]\ncommand = ["x"]\nmax_output = "64KiB"\n')
    tool = cfg.tools[0]

    class Chunks:
        def __init__(self, data: bytes) -> None:
            self.parts = [data[i:i + 5000] for i in range(0, len(data), 5000)]

        async def receive_some(self, _max: int) -> bytes:
            return self.parts.pop(0) if self.parts else b""

    async def main() -> list[Any]:
        held = output.HeldOutput(limit=50_000)
        first = output.Capture(tool, None, None, None, lambda _: None, held)
        second = output.Capture(tool, None, None, None, lambda _: None, held)
        await first.read_stdout(Chunks(b"a" * 40_000))
        await second.read_stdout(Chunks(b"b" * 40_000 + b"c" * 40_000))   # past max_output too
        in_memory = held.held
        spilled = second.overflow is not None and first.overflow is None
        await first.finish()
        await second.finish()
        texts = [c.result(0, False, 0.0, (), None).text for c in (first, second)]
        return [in_memory, spilled, held.held, texts]

    in_memory, spilled, left, (one, two) = trio.run(main)
    assert in_memory <= 50_000 and spilled and left == 0
    assert one == "a" * 40_000
    assert two.startswith("b" * 40_000 + "c" * (64 * 1024 - 40_000)) and "output truncated" in two
