"""mcpwrap.run.limits on real children: each limit stops a command that overruns it, and is named.

Children start the way the runner starts them (preexec_fn=child_setup, a session of their own).
Every command is bounded by itself (it stops after 10 s of CPU, 256 MiB, 64 processes, ...), so
where child_setup did nothing each test fails on its assertion, not by a runaway. A test of a
cgroup mechanism skips, saying why, where this machine has none. Teardown SIGKILLs each child's
process group and polls remove(), which kills what is left in the call's cgroups and removes
them: no test leaves a process or a directory behind.
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.run import limits
from mcpwrap.run.limits import CallLimits, Limits
from tests import procs
from tests.harness import HANG_S, until

MiB = 1024 * 1024
# Each process forks in up to six rounds (64 processes at most), then holds its slot until killed.
FORK_BOMB = "import os\nfor _ in range(6):\n    try:\n        os.fork()\n    except OSError:\n        break\nos.read(0, 1)\n"
MEMORY_HOG = "chunks = []\nfor _ in range(26):\n    chunks.append(b'\\1' * (10 << 20))\nprint('survived')\n"
BUSY = "import time\nwhile time.process_time() < 10:\n    pass\n"


class Calls:
    """The test's calls and children, ended and removed at teardown whatever happened."""

    def __init__(self) -> None:
        self.calls: list[CallLimits] = []
        self.children: list[subprocess.Popen[str]] = []

    def create(self, wanted: Limits, v2_dir: str | None = None) -> CallLimits:
        call = CallLimits.create(wanted, f"test-{secrets.token_hex(6)}", v2_dir)
        self.calls.append(call)
        return call

    def spawn(self, call: CallLimits, argv: list[str], **options: Any) -> subprocess.Popen[str]:
        options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True} | options
        child = subprocess.Popen(argv, preexec_fn=call.child_setup, start_new_session=True, **options)
        self.children.append(child)
        return child

    def run(self, call: CallLimits, code: str) -> tuple[int, str, str]:
        child = self.spawn(call, [sys.executable, "-c", code])
        out, err = child.communicate(timeout=HANG_S)
        return child.returncode, out, err

    def end(self) -> None:
        for child in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        for call in self.calls:
            until(call.remove, "the call's cgroups to empty and go")
        for child in self.children:
            child.communicate(timeout=HANG_S)


@pytest.fixture
def calls() -> Iterator[Calls]:
    made = Calls()
    try:
        yield made
    finally:
        made.end()


def group(call: CallLimits, limit: str) -> limits.Cgroup:
    """The call's cgroup for limit; the test is skipped where this machine has none."""
    found = next((g for g in call.cgroups if g.limit == limit), None)
    if found is None:
        pytest.skip(f"no cgroup enforces {limit} here: {limits.available()[limit]}")
    return found


def members(path: str) -> set[int]:
    return {int(pid) for pid in Path(path, "cgroup.procs").read_text().split()}


def test_fork_bomb_is_held_at_processes_and_named(calls: Calls) -> None:
    call = calls.create(Limits(processes=16))
    pids = group(call, "processes")
    bomb = calls.spawn(call, [sys.executable, "-c", FORK_BOMB], stdin=subprocess.PIPE)
    assert until(call.exceeded, "the fork bomb to reach pids.max") == "exceeded processes limit 16"
    assert bomb.pid in members(pids.path)
    assert len(members(pids.path)) <= 16 and int(Path(pids.path, "pids.current").read_text()) <= 16
    assert bomb.poll() is None                  # it does not stop by itself: the runner ends the call


@pytest.mark.parametrize("mechanism", ["cgroup", "rlimit"])
def test_memory_hog_ends_and_is_named(calls: Calls, mechanism: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if mechanism == "rlimit":
        monkeypatch.setenv(limits.CGROUP_ENV, "none")
    call = calls.create(Limits(memory=64 * MiB))
    if mechanism == "cgroup":
        group(call, "memory")
        assert all(which != resource.RLIMIT_AS for which, _, _ in call.rlimits)   # the cgroup alone decides
    code, out, err = calls.run(call, MEMORY_HOG)
    assert "survived" not in out
    if mechanism == "cgroup":
        assert code == -signal.SIGKILL and call.exceeded() == "exceeded memory limit 64MiB"
    else:
        assert code == 1 and "MemoryError" in err
    assert call.explain(code, err) == "exceeded memory limit 64MiB"


def test_cpu_busy_loop_ends_by_sigxcpu_and_is_named(calls: Calls) -> None:
    call = calls.create(Limits(cpu_s=1))
    code, _, err = calls.run(call, BUSY)
    assert code == -signal.SIGXCPU
    assert call.explain(code, err) == "exceeded cpu limit 1s"


def test_cpu_hard_limit_kills_what_ignores_sigxcpu(calls: Calls) -> None:
    call = calls.create(Limits(cpu_s=1))
    child = calls.spawn(call, [sys.executable, "-c", f"import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n{BUSY}"])
    _, status, usage = os.wait4(child.pid, 0)       # the leader's own CPU time, as the runner can read it
    child.returncode = code = os.waitstatus_to_exitcode(status)
    assert code == -signal.SIGKILL
    assert call.explain(code, "", usage.ru_utime + usage.ru_stime) == "exceeded cpu limit 1s"
    assert call.explain(code, "", 0.1) is None and call.explain(code, "") is None   # some other SIGKILL


@pytest.mark.parametrize("writer", ["head", "python"])
def test_file_size_cap_is_named(calls: Calls, tmp_path: Path, writer: str) -> None:
    call = calls.create(Limits(file_size=1 * MiB))
    target = tmp_path / "out"
    if writer == "head":                                # SIGXFSZ at its default: the writer dies
        with target.open("wb") as sink:
            child = calls.spawn(call, ["head", "-c", str(2 * MiB), "/dev/zero"], stdout=sink)
            _, err = child.communicate(timeout=HANG_S)
        code = child.returncode
        assert code == -signal.SIGXFSZ
    else:                                               # Python ignores SIGXFSZ: the write fails, EFBIG
        code, _, err = calls.run(call, f"open({str(target)!r}, 'wb').write(bytes({2 * MiB}))")
        assert code == 1 and "File too large" in err
    assert target.stat().st_size == 1 * MiB
    assert call.explain(code, err) == "exceeded file_size limit 1MiB"


def test_open_files_cap_is_named(calls: Calls) -> None:
    call = calls.create(Limits(open_files=16))
    code, out, err = calls.run(call, "import os\nfiles = [open(os.devnull) for _ in range(100)]\nprint(len(files))")
    assert code == 1 and out == "" and "Too many open files" in err
    assert call.explain(code, err) == "exceeded open_files limit 16"


def test_remove_kills_what_is_left_and_leaves_no_directory(calls: Calls) -> None:
    call = calls.create(Limits(memory=64 * MiB, processes=16))
    paths = [group(call, "processes").path] + [g.path for g in call.cgroups if g.limit == "memory"]
    assert all(g.owned for g in call.cgroups)
    leader = calls.spawn(call, [sys.executable, "-c", "import os\nfor _ in range(3):\n    if not os.fork():\n"
                                "        break\nos.read(0, 1)\n"], stdin=subprocess.PIPE)
    inside = until(lambda: len(found := members(paths[0])) == 4 and found, "the leader and its three forks")
    assert all(members(path) == inside for path in paths) and leader.pid in inside
    until(call.remove, "remove() to kill the members and remove the directories")
    assert not any(os.path.exists(path) for path in paths)
    assert not {p.pid for p in procs.live()} & inside


def test_a_cgroup_that_cannot_be_made_fails_the_call_and_leaves_nothing() -> None:
    bases = {name: limits.v1_base(name) for name in ("memory", "pids")}
    if None in bases.values():
        pytest.skip(f"needs v1 memory and pids hierarchies: {limits.available()}")
    tag = f"test-{secrets.token_hex(6)}"
    taken = os.path.join(limits.v1_server_dir(bases["pids"]), tag)
    os.mkdir(taken)                                 # the pids directory cannot be made: the memory one goes too
    try:
        with pytest.raises(FileExistsError):
            CallLimits.create(Limits(memory=64 * MiB, processes=16), tag)
        assert not os.path.exists(os.path.join(limits.v1_server_dir(bases["memory"]), tag))
    finally:
        os.rmdir(taken)


def test_exit_handler_clears_the_per_process_directories(tmp_path: Path) -> None:
    script = ("import subprocess, sys\nfrom mcpwrap.run.limits import CallLimits, Limits\n"
              "call = CallLimits.create(Limits(memory=64 << 20, processes=16), 'left')\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'],"
              " preexec_fn=call.child_setup, start_new_session=True, stdout=subprocess.DEVNULL)\n"
              "print(child.pid, *(g.path for g in call.cgroups))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_S, check=True)
    pid, *paths = done.stdout.split()
    if not paths:
        pytest.skip(f"no v1 cgroup for limits here: {limits.available()}")
    # It exited without remove(): its exit handler killed the child and removed every directory.
    assert not any(os.path.exists(path) or os.path.exists(os.path.dirname(path)) for path in paths)
    assert int(pid) not in {p.pid for p in procs.live()}


def test_missing_names_what_this_machine_cannot_enforce(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.CGROUP_ENV, "none")
    problems = limits.missing(Limits(memory=1024 * MiB, processes=64, cpu_s=30))
    assert len(problems) == 2
    assert problems[0].startswith("processes = 64 cannot be enforced here")
    assert problems[1].startswith("memory = 1GiB is enforced per process only")
    assert limits.available()["processes"].startswith("not available")
    assert limits.missing(Limits(cpu_s=30, open_files=256, file_size=100 * MiB)) == []
    call = CallLimits.create(Limits(memory=1024 * MiB, processes=64), "unused")
    assert call.cgroups == () and call.procs == ()
    assert call.rlimits == ((resource.RLIMIT_AS, 1024 * MiB, 1024 * MiB),)


def fake_v2(root: Path, controllers: str) -> Path:
    """A call cgroup as a v2 kernel shows it, with its parent offering controllers (limit files start empty:
    a regular file is not truncated by a write as a cgroup file is replaced)."""
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("")
    call = root / "call"
    call.mkdir()
    for name, text in [("cgroup.procs", ""), ("memory.max", ""), ("memory.swap.max", ""), ("pids.max", ""),
                       ("memory.events", "oom 0\noom_kill 0\n"), ("pids.events", "max 0\n")]:
        (call / name).write_text(text)
    return call


def test_v2_controllers_are_used_in_the_runners_call_cgroup(tmp_path: Path, calls: Calls) -> None:
    v2_dir = fake_v2(tmp_path, "cpu io memory pids")
    assert limits.available(str(tmp_path))["processes"] == "cgroup v2 pids for the whole call"
    call = calls.create(Limits(memory=64 * MiB, processes=16, cpu_s=2), str(v2_dir))
    assert [(g.limit, g.v2, g.owned) for g in call.cgroups] == [("memory", True, False), ("processes", True, False)]
    assert call.procs == (f"{v2_dir}/cgroup.procs",)
    assert {name: (v2_dir / name).read_text() for name in ("memory.max", "memory.swap.max", "pids.max")} == {
        "memory.max": str(64 * MiB), "memory.swap.max": "0", "pids.max": "16"}
    assert [which for which, _, _ in call.rlimits] == [resource.RLIMIT_CPU]    # no RLIMIT_AS under a memory cgroup
    assert call.exceeded() is None
    (v2_dir / "memory.events").write_text("oom 0\noom_kill 1\n")         # a victim of some other OOM
    assert call.exceeded() is None and call.explain(-signal.SIGKILL, "MemoryError") is None
    (v2_dir / "memory.events").write_text("oom 1\noom_kill 1\n")
    assert call.explain(-signal.SIGKILL, "") == "exceeded memory limit 64MiB"
    (v2_dir / "memory.events").write_text("oom 0\noom_kill 0\n")
    (v2_dir / "pids.events").write_text("max 3\n")
    assert call.exceeded() == "exceeded processes limit 16"
    assert call.remove() and v2_dir.is_dir()                                   # the runner's to remove


@pytest.mark.parametrize("peak, named", [(32 * MiB, False), (64 * MiB, True)])
def test_a_v1_oom_kill_is_the_limit_only_once_usage_reached_it(tmp_path: Path, peak: int, named: bool) -> None:
    for name, text in [("oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"), ("failcnt", "0\n"),
                       ("limit_in_bytes", f"{64 * MiB}\n"), ("max_usage_in_bytes", f"{peak}\n")]:
        (tmp_path / f"memory.{name}").write_text(text)
    call = CallLimits(Limits(memory=64 * MiB), (limits.Cgroup("memory", str(tmp_path), v2=False, owned=False),))
    assert call.exceeded() == ("exceeded memory limit 64MiB" if named else None)


def test_a_v2_controller_the_parent_does_not_offer_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.CGROUP_ENV, "none")                            # and no v1 either
    v2_dir = fake_v2(tmp_path, "cpu io")
    assert limits.available(str(tmp_path))["memory"] == "RLIMIT_AS per process (address space)"
    call = CallLimits.create(Limits(memory=64 * MiB), "unused", str(v2_dir))
    assert call.cgroups == () and (v2_dir / "memory.max").read_text() == ""


HYBRID_CGROUP = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/\n"
HYBRID_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_own_cgroups_reads_hybrid_and_pure_v2_hosts() -> None:
    assert limits.own_cgroups(HYBRID_CGROUP, HYBRID_MOUNTS) == {
        "name=systemd": "/sys/fs/cgroup/systemd", "pids": "/sys/fs/cgroup/pids",
        "memory": "/sys/fs/cgroup/memory/process_api/abc", "cpu": "/sys/fs/cgroup/cpu,cpuacct",
        "cpuacct": "/sys/fs/cgroup/cpu,cpuacct", "": "/sys/fs/cgroup/unified"}
    # A container that sees only its own subtree, mounted at /sys/fs/cgroup.
    mounts = "29 22 0:26 /user.slice/app.scope /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"
    assert limits.own_cgroups("0::/user.slice/app.scope/inner\n", mounts) == {"": "/sys/fs/cgroup/inner"}
    assert limits.own_cgroups("0::/elsewhere\n", mounts) == {}


def test_explain_reads_shells_signals_and_stderr() -> None:
    call = CallLimits(Limits(cpu_s=30, file_size=100 * MiB, open_files=256))
    assert call.explain(128 + signal.SIGXCPU, "") == "exceeded cpu limit 30s"      # sh reports a child's signal
    assert call.explain(-signal.SIGXFSZ, "") == "exceeded file_size limit 100MiB"
    assert call.explain(1, "OSError: [Errno 24] Too many open files") == "exceeded open_files limit 256"
    assert call.explain(1, "MemoryError") is None                                  # no memory limit was set
    assert call.explain(1, "error: no such file") is None and call.explain(None, "") is None
    assert CallLimits(Limits(memory=MiB)).explain(1, "std::bad_alloc") == "exceeded memory limit 1MiB"


def test_format_size_uses_the_tools_file_units() -> None:
    assert [limits.format_size(n) for n in (1024**3, 100 * MiB, 1536 * MiB, 100 * 1000**2, 2048, 1000, 7)] == [
        "1GiB", "100MiB", "1536MiB", "100MB", "2KiB", "1KB", "7B"]
