"""Attacks on the durable task store (issue 11: class 3, the task half of 6, the id half of 9).

Each test plays the attacker against the code that must refuse: a store directory
another user can write, a record or lock file that is a symlink, a FIFO or someone
else's file, a record rewritten on disk between creation and the supervisor's claim,
task ids read as options, more running tasks than the ceiling allows. The tests run
as root, for whom permission bits do not bind, so they check what the code checks
(owner, mode, file type) rather than what the kernel would stop. No sleeps: every
wait is a bounded poll for an event (a process gone, a status reached).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcpwrap.config import load as config
from mcpwrap.run import process as runner
from mcpwrap.state import signing
from mcpwrap.tasks import store as tasks
from mcpwrap.tasks import supervisor
from mcpwrap.state.durable import UnsafePathError
from mcpwrap.protocol import tasking
from mcpwrap.protocol.tasking import TaskLookupError, TaskTerminalError
from tests import procs
from tests.blackbox.tasks.test_tasks import LEGACY, TIMEOUT, Env, legacy_create, unique_seconds, until

FOREIGN_UID = 65534                       # nobody: a file we did not create
WAITING = """
[tools.wait]
shell = 'while [ ! -e "$MCP_ARG_GO" ]; do sleep 0.05; done; echo ran > "$MCP_ARG_OUT"'
task = "optional"
args.go = { type = "string" }
args.out = { type = "string", minLength = 1 }

[tools.long]
shell = 'sleep 300'
task = "optional"
"""


class Setup:
    """A tools file, a secret file and the store of that tools file, all under one tmp dir."""

    def __init__(self, root: Path) -> None:
        self.root, self.tools, self.secret = root, root / "tools.toml", root / "secret"
        self.tools.write_text(WAITING)
        self.config = config.load(self.tools)
        self.keyring = signing.ensure_secret(self.secret, time.time())
        self.store = tasks.Store.for_tools_file(root / "state", self.tools)

    def fresh(self) -> tasks.Store:
        """Another process's view of the same store (checks are made once per Store)."""
        return tasks.Store(self.store.root)

    def record(self, **arguments: str) -> tasking.TaskRecord:
        """A signed record for the `wait` tool, as `mcpwrap serve` writes it; nobody supervises it yet."""
        return self.store.create(tool="wait", arguments=arguments, ttl_ms=60_000, poll_ms=100,
                                 tools_file=self.tools, digest=self.config.digest, snapshot=self.tools.read_text(),
                                 key=self.keyring.current)

    def supervise(self, task_id: str) -> tasking.TaskRecord:
        subprocess.run([sys.executable, "-m", "mcpwrap.tasks", str(self.store.root), task_id, str(self.secret)],
                       timeout=TIMEOUT, check=False, stdin=subprocess.DEVNULL)
        return self.fresh().get(task_id)

    def create(self, tool: str = "long", max_running: int = tasks.MAX_RUNNING) -> tasking.TaskRecord:
        """A task as `tools/call` creates one: a running slot, the record, a detached supervisor."""
        return supervisor.create_task(self.store, self.config, self.config.tool(tool), {}, 60_000,  # type: ignore[arg-type]
                                      self.keyring, self.secret, max_running)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    s = Setup(tmp_path)
    yield s
    store = s.fresh()
    with contextlib.suppress(UnsafePathError):
        for record in store.records():      # cancel what runs, then wait for every supervisor to go
            with contextlib.suppress(TaskTerminalError, TaskLookupError):
                store.cancel(record.task_id)
        ids = store.ids()
        until(lambda: not any(procs.with_env(runner.TASK_ENV, i) for i in ids), what="the tasks' processes to exit")


def rewrite(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """What a local attacker who can write the store does: rewrite a record's JSON in place."""
    doc = orjson.loads(path.read_bytes())
    change(doc)
    path.write_bytes(orjson.dumps(doc))


# --- the store's directories ----------------------------------------------------------------
def test_store_directories_are_created_0700_whatever_the_umask(setup: Setup) -> None:
    old = os.umask(0)
    try:
        record = setup.record(go="x", out="y")
        os.close(setup.store.reserve(tasking.new_id(), 1))
    finally:
        os.umask(old)
    root = setup.store.root
    for directory in (root.parent.parent, root.parent, root, root / "running"):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    assert setup.store.path(record.task_id).stat().st_mode & 0o777 == 0o600


def _loosen(path: Path) -> str:
    path.chmod(0o777)
    return f"{path} is writable by group or others (mode 0777); run: chmod 700 {path}"


def _group_writable(path: Path) -> str:
    path.chmod(0o720)
    return f"{path} is writable by group or others (mode 0720); run: chmod 700 {path}"


def _symlinked(path: Path) -> str:
    path.rename(path.with_name("elsewhere"))
    path.symlink_to(path.with_name("elsewhere"))
    return f"{path} is a symbolic link; remove it"


def _foreign(path: Path) -> str:
    os.chown(path, FOREIGN_UID, FOREIGN_UID)
    return f"{path} is owned by uid {FOREIGN_UID}, not by you (uid {os.getuid()}); remove it"


DIRECTORY_ATTACKS = {"state dir world-writable": (2, _loosen), "store dir world-writable": (0, _loosen),
                     "store dir group-writable": (0, _group_writable), "store dir a symlink": (0, _symlinked),
                     "digest dir someone else's": (1, _foreign), "state dir someone else's": (2, _foreign)}


@pytest.mark.parametrize("attack", DIRECTORY_ATTACKS)
def test_an_unsafe_store_directory_is_refused_with_the_fix(setup: Setup, attack: str) -> None:
    record = setup.record(go="x", out="y")
    up, spoil = DIRECTORY_ATTACKS[attack]
    expected = spoil(setup.store.root.parents[up - 1] if up else setup.store.root)
    for use in (lambda: setup.store.get(record.task_id), lambda: setup.store.records(),
                lambda: setup.store.cancel(record.task_id), lambda: setup.record(go="x", out="y")):
        setup.store = setup.fresh()
        with pytest.raises(UnsafePathError) as caught:
            use()
        assert str(caught.value).startswith(expected)


def _record_symlink(setup: Setup, path: Path) -> str:
    copy = path.with_name("copy.json")
    path.rename(copy)
    path.symlink_to(copy)
    return f"{path} is a symbolic link; remove it"


def _record_fifo(setup: Setup, path: Path) -> str:
    path.unlink()
    os.mkfifo(path, 0o600)                # a read would block forever: it must be refused, not read
    return f"{path} is not a regular file; remove it"


def _record_world_writable(setup: Setup, path: Path) -> str:
    path.chmod(0o646)
    return f"{path} is writable by group or others (mode 0646); run: chmod 600 {path}"


def _lock_symlink(setup: Setup, path: Path) -> str:
    lock = path.with_suffix(".lock")
    victim = setup.root / "victim"
    victim.write_text("")
    lock.symlink_to(victim)
    return f"{lock} is a symbolic link; remove it"


def _lock_foreign(setup: Setup, path: Path) -> str:
    lock = path.with_suffix(".lock")
    lock.touch(0o600)
    os.chown(lock, FOREIGN_UID, FOREIGN_UID)
    return f"{lock} is owned by uid {FOREIGN_UID}"


FILE_ATTACKS = {"record a symlink": _record_symlink, "record someone else's": lambda s, p: _foreign(p),
                "record a FIFO": _record_fifo, "record world-writable": _record_world_writable,
                "lock a symlink": _lock_symlink, "lock someone else's": _lock_foreign}


@pytest.mark.parametrize("attack", FILE_ATTACKS)
def test_an_unsafe_record_or_lock_file_is_refused(setup: Setup, attack: str) -> None:
    record = setup.record(go="x", out="y")
    expected = FILE_ATTACKS[attack](setup, setup.store.path(record.task_id))
    with pytest.raises(UnsafePathError) as caught:
        setup.fresh().cancel(record.task_id)     # reads the record, then takes its lock
    assert str(caught.value).startswith(expected)


def test_an_unsafe_store_is_a_task_store_error_on_the_wire(tmp_path: Path) -> None:
    env = Env(tmp_path)
    server = env.server(LEGACY)
    reply = server.request("tasks/list", {})
    assert reply["result"] == {"tasks": []}
    env.state.mkdir(exist_ok=True)
    env.state.chmod(0o777)
    reply = server.request("tasks/list", {})
    assert reply["error"]["code"] == -32603
    assert reply["error"]["message"] == (f"task store error: {env.state} is writable by group or others "
                                         f"(mode 0777); run: chmod 700 {env.state}")
    server.close()


def test_an_unsafe_store_is_one_sentence_in_the_cli(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.state.mkdir(mode=0o777)
    env.state.chmod(0o777)
    done = env.cli("list")
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"mcpwrap: {env.state} is writable by group or others (mode 0777); run: chmod 700 {env.state}"]


# --- a record rewritten between creation and the supervisor's claim ----------------------------
def _swap_snapshot(doc: dict[str, Any], marker: Path) -> None:
    doc["snapshot"] = f"[tools.wait]\nshell = 'echo pwned > {marker}'\n"
    doc["digest"] = config.digest_of(doc["snapshot"].encode())


def _swap_arguments(doc: dict[str, Any], marker: Path) -> None:
    doc["arguments"]["out"] = str(marker)


def _forge_mac(doc: dict[str, Any], marker: Path) -> None:
    _swap_snapshot(doc, marker)
    record = tasks._decode(orjson.dumps(doc))
    doc["mac"] = tasks.record_mac(record, b"a key the attacker chose, 32 bytes")


def _strip_mac(doc: dict[str, Any], marker: Path) -> None:
    _swap_snapshot(doc, marker)
    doc["mac"] = None


SWAPS = {"snapshot swapped": _swap_snapshot, "arguments swapped": _swap_arguments,
         "MAC forged with another key": _forge_mac, "MAC removed": _strip_mac}


@pytest.mark.parametrize("swap", SWAPS)
def test_a_record_swapped_on_disk_runs_nothing(setup: Setup, swap: str) -> None:
    go, out, marker = setup.root / "go", setup.root / "out", setup.root / "attacker-was-here"
    go.touch()                            # the real command would run at once
    record = setup.record(go=str(go), out=str(out))
    rewrite(setup.store.path(record.task_id), lambda doc: SWAPS[swap](doc, marker))
    finished = setup.supervise(record.task_id)
    assert finished.status == "failed" and finished.error is not None
    assert finished.error["message"] == (
        f"the task record {setup.store.path(record.task_id)} does not carry a valid MAC under the secret "
        f"{setup.secret} (it was changed or forged after creation); nothing ran")
    assert not marker.exists() and not out.exists()


def test_an_untouched_record_runs_also_after_the_secret_was_rotated(setup: Setup) -> None:
    go, out = setup.root / "go", setup.root / "out"
    go.touch()
    record = setup.record(go=str(go), out=str(out))
    signing.rotate_secret(setup.secret, time.time())    # the creation key is now a previous key
    assert setup.supervise(record.task_id).status == "completed"
    assert out.read_text() == "ran\n"


def test_a_supervisor_without_a_usable_secret_runs_nothing(setup: Setup) -> None:
    go, out = setup.root / "go", setup.root / "out"
    go.touch()
    record = setup.record(go=str(go), out=str(out))
    setup.secret.unlink()
    finished = setup.supervise(record.task_id)
    assert finished.status == "failed" and finished.error is not None
    assert finished.error["message"].startswith(f"secret file {setup.secret} does not exist")
    assert finished.error["message"].endswith("; nothing ran") and not out.exists()


# --- ids ------------------------------------------------------------------------------------
def test_task_ids_never_start_with_a_dash_and_old_ids_stay_valid() -> None:
    ids = [tasking.new_id() for _ in range(100_000)]    # ~1,500 token_urlsafe(16) ids would start with '-'
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 23 and i[0] != "-" and tasking.valid_id(i) for i in ids)
    assert all(tasking.valid_id(i) for i in ("-" + "A" * 21, "A" * 22, "_" * 22))   # from earlier versions


def test_a_store_id_is_no_option_even_when_the_random_token_starts_with_a_dash(
        setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("secrets.token_urlsafe", lambda n: "-" + "x" * 21)   # the worst draw, every time
    record = setup.record(go="x", out="y")
    assert not record.task_id.startswith("-")
    shown = subprocess.run([sys.executable, "-m", "mcpwrap", "tasks", "show", str(setup.tools), record.task_id,
                            "--state-dir", str(setup.root / "state"), "--json"],
                           capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert shown.returncode == 0, shown.stderr
    assert orjson.loads(shown.stdout)["taskId"] == record.task_id


# --- the ceiling on running tasks -----------------------------------------------------------
def _supervisor(setup: Setup, task_id: str) -> int:
    pid = until(lambda: (r := setup.store.read(task_id)) and r.supervisor_pid, what="the supervisor's claim")
    return int(pid)


def _created(setup: Setup) -> tasks.TaskRecord | None:
    try:
        return setup.create(max_running=2)
    except tasks.TooManyTasks:
        return None


def test_creation_past_the_ceiling_is_refused_before_any_record(setup: Setup) -> None:
    first, second = setup.create(max_running=2), setup.create(max_running=2)
    before = sorted(setup.store.ids())
    with pytest.raises(tasks.TooManyTasks) as caught:
        setup.create(max_running=2)
    assert str(caught.value) == ("2 tasks are already running (--max-tasks); "
                                 "wait for one to finish or raise the limit")
    assert sorted(setup.store.ids()) == before                  # refused before anything was written

    pid = _supervisor(setup, first.task_id)
    setup.store.cancel(first.task_id)                           # one finishes: its slot is free again
    until(lambda: tasks.process_start(pid) is None, what="the cancelled task's supervisor to exit")
    third = until(lambda: _created(setup), what="the finished task's slot to be free")

    pid = _supervisor(setup, second.task_id)
    os.kill(pid, signal.SIGKILL)                                # a dead supervisor's slot frees itself
    until(lambda: tasks.process_start(pid) is None, what="the killed supervisor to exit")
    # Its lock goes with the last copy of its fd, which a process forking at that moment may hold briefly.
    until(lambda: _created(setup), what="the dead supervisor's slot to free itself")
    with pytest.raises(tasks.TooManyTasks):
        setup.create(max_running=2)
    assert setup.store.get(second.task_id).status == "failed"   # and what it ran is killed
    assert setup.store.get(third.task_id).status == "working"
    assert str(tasks.TooManyTasks(1)).startswith("1 task is already running (--max-tasks)")


def test_the_ceiling_is_a_clear_error_on_the_wire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPWRAP_MAX_TASKS", "1")              # `serve --max-tasks 1`
    env = Env(tmp_path)
    server = env.server(LEGACY)
    first = legacy_create(server, "long", {"seconds": unique_seconds()})
    reply = server.request("tools/call", {"name": "long", "arguments": {"seconds": unique_seconds()},
                                          "task": {"ttl": 60_000}})
    assert reply["error"] == {"code": -32603, "message": "1 task is already running (--max-tasks); "
                                                         "wait for one to finish or raise the limit"}
    assert env.store.ids() == [first]
    pid = int(until(lambda: env.store.read(first).supervisor_pid, what="the supervisor"))  # type: ignore[union-attr]
    assert server.request("tasks/cancel", {"taskId": first})["result"]["status"] == "cancelled"
    until(lambda: tasks.process_start(pid) is None, what="the cancelled task's supervisor to exit")
    env.go.touch()                                            # the next task may finish at once
    done = legacy_create(server, "gated", env.gated)          # its slot is free again
    until(lambda: env.store.read(done).status == "completed", what="the gated task")  # type: ignore[union-attr]
    server.close()


# --- the supervisor's weight ----------------------------------------------------------------
SUPERVISOR_IMPORTS = """
import sys
from mcpwrap.tasks import supervisor
code = supervisor.main(sys.argv[1:])
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in ("jsonschema", "typer", "click", "platformdirs"))))
raise SystemExit(code)
"""


def test_the_supervisor_imports_neither_jsonschema_nor_the_cli(setup: Setup) -> None:
    go, out = setup.root / "go", setup.root / "out"
    go.touch()
    record = setup.record(go=str(go), out=str(out))              # `out` has a schema (minLength)
    done = subprocess.run([sys.executable, "-c", SUPERVISOR_IMPORTS, str(setup.store.root), record.task_id,
                           str(setup.secret)], capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
    assert setup.store.get(record.task_id).status == "completed" and out.read_text() == "ran\n"
