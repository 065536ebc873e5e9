"""Red-team attacks on what issue 24's review did not reach: the front's hand-over to trio, hot-reload
races, the task ceiling and the nonce ledger across crashes, and Landlock grants through links.

Each test attacks one promise of the README's security model; those that held on the code they were
written against stay as regression tests. Waits are for events (a message, a stderr line, a process
gone), never sleeps; every timeout is a hang guard.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import load as config
from tests.harness import HANG_S, Server, write_atomically

TOOLS = """
[tools.echo]
command = ["echo", "{msg}"]
args.msg = { type = "string" }
"""
NEXT = TOOLS + """
[tools.next]
command = ["echo", "next"]
"""
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tests", "version": "1"}}


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    return path


def echoes(server: Server, text: str) -> None:
    """The server is alive and still serves its last good tools."""
    answer = server.call("tools/call", {"name": "echo", "arguments": {"msg": text}})
    assert answer["result"]["content"][0]["text"] == text + "\n", answer


def tool_names(server: Server) -> set[str]:
    return {tool["name"] for tool in server.call("tools/list")["result"]["tools"]}


# --- 2. hot reload: whatever the tools file becomes, the last good tools stay ---------------------
MAX_TOOLS_FILE = config.MAX_FILE_BYTES


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _dev_zero(path: Path) -> None:
    link = path.with_name("zero")
    link.symlink_to("/dev/zero")
    link.replace(path)


def _huge(path: Path) -> None:
    """A valid tools file past the size bound (a log or a dump linked by mistake could as well be
    gigabytes): read whole, it was accepted."""
    huge = path.with_name("huge")
    huge.write_bytes(NEXT.encode() + b"# " + b"x" * (MAX_TOOLS_FILE - len(NEXT) - 2) + b"\n")
    huge.replace(path)


def _truncated(path: Path) -> None:
    with path.open("r+") as f:
        f.truncate(0)


def _deleted(path: Path) -> None:
    path.unlink()


def _nested(path: Path) -> None:
    """Valid UTF-8, and TOML that the standard parser reads by recursion: past Python's recursion
    limit it raises RecursionError, not a TOML error."""
    write_atomically(path, TOOLS + "\n[x]\ny = " + "[" * 100_000 + "]" * 100_000 + "\n")


HOSTILE = {"directory": (_directory, "not a regular file"), "dev-zero": (_dev_zero, "not a regular file"),
           "huge": (_huge, "larger than"), "truncated": (_truncated, "no tools defined"),
           "deleted": (_deleted, "is gone"), "nested": (_nested, "nested too deeply")}


@pytest.mark.parametrize("change", list(HOSTILE))
def test_a_hostile_tools_file_keeps_the_last_good_tools_and_the_next_good_one_is_taken(
        tools: Path, tmp_path: Path, change: str) -> None:
    make, reason = HOSTILE[change]
    with Server(tools, tmp_path) as server:
        server.initialize()
        make(tools)
        server.wait_stderr(reason)
        assert any("keeping the last good tools" in line for line in server.stderr), server.stderr
        echoes(server, "still here")
        assert tool_names(server) == {"echo"}
        if tools.is_dir():
            tools.rmdir()
        elif tools.exists() or tools.is_symlink():
            tools.unlink()
        write_atomically(tools, NEXT)
        server.wait_stderr("reloaded")
        assert tool_names(server) == {"echo", "next"}
        echoes(server, "after")
        assert server.close() == 0
        assert not any("Traceback" in line for line in server.stderr), server.stderr


# --- 1. the front's hand-over to trio: nothing lost, repeated or reordered ------------------------
# A tools/call is answered only once trio has taken over (the front decides calls, never runs one):
# reading its answer is the event that says the hand-over is done, with what was read and not yet
# decided (the LineReader's partial line included) carried over.
def _front_session(server: Server, *items: tuple[int | None, str, dict[str, Any] | None]) -> bytes:
    from tests.unit.serve.test_front import sent

    return sent(server, *items)


def _ids(got: list[Any]) -> list[Any]:
    return [item.get("id", item.get("method")) for message in got
            for item in (message if isinstance(message, list) else [message])]


def _answers(server: Server, count: int) -> list[Any]:
    """`count` answers (a batch's array counts as its items), notifications skipped."""
    out: list[Any] = []
    while len(_ids(out)) < count:
        message = server.read()
        if isinstance(message, list) or "method" not in message:
            out.append(message)
    return out


ECHO = {"name": "echo", "arguments": {"msg": "across"}}
START = ((1, "initialize", INIT), (None, "notifications/initialized", None))


def test_a_request_split_across_the_hand_over_is_answered_once(tmp_path: Path) -> None:
    """Half a line waits in the front's LineReader when trio takes over; the rest comes after."""
    from tests.unit.serve.test_front import FIXTURE

    with Server(FIXTURE, tmp_path) as server:
        ping = _front_session(server, (3, "ping", None))
        server.raw(_front_session(server, *START, (2, "tools/call", ECHO)) + ping[:9])
        assert sorted(_ids(_answers(server, 2))) == [1, 2]      # 2: trio has taken over
        server.raw(ping[9:])
        assert _ids(_answers(server, 1)) == [3]
        server.no_message()
        assert server.close() == 0


def _batch(server: Server, first: int) -> bytes:
    items = [(first, "tools/call", ECHO), (first + 1, "ping", None), (first + 2, "tools/call", ECHO),
             (first + 3, "tools/list", None)]
    _front_session(server, *items)            # registered for the schema checks
    return json.dumps([{"jsonrpc": "2.0", "id": i, "method": m, **({"params": p} if p else {})}
                       for i, m, p in items]).encode() + b"\n"


@pytest.mark.parametrize("cut", ["before", "across"])
def test_a_batch_in_flight_across_the_hand_over_is_answered_whole_once(tmp_path: Path, cut: str) -> None:
    """`before`: the whole batch is decided by the front and its calls performed by trio; `across`:
    half the batch line is in the front's LineReader when trio takes over."""
    from tests.unit.serve.test_front import FIXTURE

    with Server(FIXTURE, tmp_path) as server:
        server.rev = "2025-03-26"             # the revision with batches
        head = _front_session(server, (1, "initialize", {**INIT, "protocolVersion": server.rev}), *START[1:],
                              (2, "tools/call", ECHO))
        batch, ping = _batch(server, 3), _front_session(server, (7, "ping", None))
        at = len(batch) // 2 if cut == "across" else len(batch) + len(ping)
        server.raw(head + (batch + ping)[:at])
        got = _answers(server, 2 if cut == "across" else 7)
        if cut == "across":
            server.raw((batch + ping)[at:])
            got += _answers(server, 5)
        assert sorted(_ids(got)) == list(range(1, 8))
        [array] = [message for message in got if isinstance(message, list)]
        assert sorted(item["id"] for item in array) == [3, 4, 5, 6]
        assert all("result" in item for item in array), array
        server.no_message()
        assert server.close() == 0


def _status(pid: int, field: str) -> int:
    for entry in Path(f"/proc/{pid}/status").read_text().splitlines():
        if entry.startswith(field + ":"):
            return int(entry.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def test_a_thousand_requests_written_before_any_answer_is_read_are_each_answered_once(tmp_path: Path) -> None:
    """Written as the server starts, so they straddle the hand-over: every id answered exactly once,
    what needs no call answered in the order it was asked, and the peak memory bounded."""
    from tests.unit.serve.test_front import FIXTURE

    with Server(FIXTURE, tmp_path) as server:
        kinds = ("ping", "tools/list", "tools/call")
        items = [(i, kinds[i % 3], ECHO if i % 3 == 2 else None) for i in range(2, 1002)]
        server.raw(_front_session(server, *START, *items))
        got = _answers(server, 1001)
        ids = _ids(got)
        assert sorted(ids) == list(range(1, 1002)), "lost or repeated answers"
        in_order = [i for i in ids if i % 3 != 2]
        assert in_order == sorted(in_order), "answers that need no call were reordered"
        assert all("result" in message for message in got)
        server.no_message()
        peak, now = _status(server.proc.pid, "VmHWM"), _status(server.proc.pid, "VmRSS")
        assert peak - now <= 60 * 1024 * 1024, (peak, now)
        assert server.close() == 0


def test_stdin_closed_right_at_the_hand_over_ends_quietly(tmp_path: Path) -> None:
    """EOF with a call decided and a ping not yet decided: the ping is answered once, the call is
    ended as EOF ends calls, and the server exits 0 without a traceback."""
    from tests.unit.serve.test_front import FIXTURE

    with Server(FIXTURE, tmp_path) as server:
        server.raw(_front_session(server, *START, (2, "tools/call", ECHO), (3, "ping", None)))
        server.proc.stdin.close()   # type: ignore[union-attr]
        assert server.proc.wait(HANG_S) == 0
        got: list[Any] = []
        while (line := server.lines.get(timeout=HANG_S)) is not None:
            got.append(json.loads(line))
        ids = _ids([m for m in got if "method" not in m])
        assert ids.count(1) == 1 and ids.count(3) == 1 and ids.count(2) <= 1, ids
        assert not any("Traceback" in x for x in server.stderr), server.stderr


# --- 3. the task ceiling and the nonce ledger across processes that crash -------------------------
# A child process takes a step of the real code and stops at the worst moment (it says "held" and
# waits); the test SIGKILLs it there and checks what the next process finds.
CHILD = """
import os, sys, time
from pathlib import Path
from mcpwrap.state import signing
from mcpwrap.tasks import store as tasks
root, mode, task_id = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
store = tasks.Store(root)
def held():
    print("held", flush=True)
    sys.stdin.read()
if mode == "lock":                           # killed while holding the ceiling's lock
    store.ready(create=True)
    os.makedirs(store.running, mode=0o700, exist_ok=True)
    with store._flocked(store.running / ".lock"):
        held()
elif mode == "reserved":                     # killed after its record is durable, before any supervisor
    slot = store.reserve(task_id, 1)
    store.create(tool="t", arguments={}, ttl_ms=600_000, poll_ms=100, tools_file=root / "tools.toml",
                 digest="d", snapshot=None, key=b"k" * 32, task_id=task_id)
    held()
elif mode == "race":                         # one of many for the last slot: says whether it won
    try:
        store.reserve(task_id, 1)
        print("won", flush=True)
    except tasks.TooManyTasks:
        print("lost", flush=True)
    sys.stdin.read()
elif mode == "nonce":                        # killed between creating a ledger entry and dating it
    os.utime = lambda *args, **kwargs: held()
    signing.NonceLedger(root).consume(task_id, time.time() + 600, time.time())
"""


def _child(root: Path, mode: str, task_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(root), mode, task_id], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)


def _killed_at(child: subprocess.Popen[str], expected: str = "held") -> None:
    assert child.stdout is not None and child.stdout.readline().strip() == expected
    child.kill()
    child.wait(HANG_S)
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            stream.close()


def _store(tmp_path: Path) -> Any:
    from mcpwrap.tasks import store as tasks

    return tasks.Store(tmp_path / "state" / "digest" / "tasks")


def _reserved(store: Any, task_id: str, max_running: int) -> int:
    """`reserve` in a thread, so that a lock a dead process kept would fail the test, not hang it."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(store.reserve, task_id, max_running).result(HANG_S)


def test_a_process_killed_holding_the_ceilings_lock_blocks_nobody(tmp_path: Path) -> None:
    from mcpwrap.protocol.tasking import new_id

    store = _store(tmp_path)
    _killed_at(_child(store.root, "lock", new_id()))
    os.close(_reserved(store, new_id(), 1))


def test_a_creator_killed_before_its_supervisor_frees_its_slot_and_its_task_fails(tmp_path: Path) -> None:
    """The server is SIGKILLed after the record is durable and before a supervisor exists: the
    ceiling is not consumed for good, and the task is not `working` for ever."""
    from mcpwrap.tasks import store as tasks
    from mcpwrap.protocol.tasking import new_id

    store, task_id = _store(tmp_path), new_id()
    _killed_at(_child(store.root, "reserved", task_id))
    os.close(_reserved(store, new_id(), 1))                  # its slot (the last one) is free again
    assert store.get(task_id).status == "working"             # within the grace a supervisor may still claim it
    later = tasks.Store(store.root, clock=lambda: time.time() + tasks.START_GRACE_S + 1)
    record = later.get(task_id)
    assert record.status == "failed" and "did not start" in record.status_message


def test_of_many_processes_racing_for_the_last_slot_exactly_one_wins(tmp_path: Path) -> None:
    from mcpwrap.protocol.tasking import new_id

    store = _store(tmp_path)
    store.ready(create=True)
    children = [_child(store.root, "race", new_id()) for _ in range(8)]
    try:
        said = [child.stdout.readline().strip() for child in children]   # type: ignore[union-attr]
    finally:
        for child in children:
            _killed_at_end(child)
    assert sorted(said) == ["lost"] * 7 + ["won"], said
    os.close(_reserved(store, new_id(), 1))                  # and the winner's death freed it


def _killed_at_end(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.wait(HANG_S)
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            stream.close()


def test_a_nonce_whose_recording_was_killed_never_authorises_a_run(tmp_path: Path) -> None:
    """Killed between the exclusive create of the ledger entry and dating it: the consumer never said
    yes (nothing ran), and every later consumer is refused while the entry stands; the sweep that
    eventually forgets it reads nothing from it and does not fail on it."""
    from mcpwrap.state import signing

    nonce = "n" * 22
    _killed_at(_child(tmp_path / "state", "nonce", nonce))
    ledger = signing.NonceLedger(tmp_path / "state")
    now = time.time()
    assert not ledger.consume(nonce, now + 600, now)
    assert not signing.NonceLedger(tmp_path / "state").consume(nonce, now + 600, now)
    later = now + signing.CLOCK_SKEW_S + signing.SWEEP_INTERVAL_S + 1
    assert ledger.consume("m" * 22, later + 600, later)        # a sweep ran over the undated entry
    assert not ledger.consume("m" * 22, later + 600, later)


def test_a_torn_index_entry_from_a_killed_creator_crashes_no_reader(tmp_path: Path) -> None:
    """A creator killed mid-append leaves part of an index entry: listing skips it and the next
    creation realigns the index."""
    from mcpwrap.tasks import index as task_index
    from mcpwrap.tasks import store as tasks
    from mcpwrap.protocol.tasking import new_id

    store = _store(tmp_path)
    first = store.create(tool="t", arguments={}, ttl_ms=600_000, poll_ms=100, tools_file=tmp_path / "tools.toml",
                         digest="d", snapshot=None, key=b"k" * 32, task_id=new_id())
    with (store.root / task_index.INDEX).open("ab") as f:
        f.write(b"\xff" * (task_index.ENTRY // 2))
    assert [r.task_id for r in tasks.Store(store.root).records()] == [first.task_id]
    second = store.create(tool="t", arguments={}, ttl_ms=600_000, poll_ms=100, tools_file=tmp_path / "tools.toml",
                          digest="d", snapshot=None, key=b"k" * 32, task_id=new_id())
    assert [r.task_id for r in tasks.Store(store.root).records()] == [first.task_id, second.task_id]


# --- 4. Landlock grants through symbolic and hard links -------------------------------------------
def _landlock() -> Any:
    from mcpwrap.run import landlock

    if landlock.abi() == 0:
        pytest.skip("Landlock is not available on this kernel")
    return landlock


@pytest.fixture
def grants(tmp_path: Path) -> Path:
    """work/ (write-granted), data/ (read-granted), secret/ and other/ (granted nothing)."""
    for name in ("work", "data", "secret", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "file").write_text(f"{name}\n")
    return tmp_path


def _try(landlock: Any, read: tuple[str, ...], write: tuple[str, ...], statement: str) -> str:
    from tests.unit.run.test_landlock import RUNTIME, attempt

    return attempt(landlock.Policy(read=(*read, *RUNTIME), write=write, network=True), statement)


def test_a_tool_cannot_hard_link_an_outside_file_into_its_write_grant(grants: Path) -> None:
    """Linking needs the source's directory granted too (REFER, or no reparenting at all before
    ABI 2): a file outside the grants cannot be given a name inside them."""
    landlock = _landlock()
    link = f"os.link({str(grants / 'secret' / 'file')!r}, {str(grants / 'work' / 'link')!r})"
    assert _try(landlock, (), (str(grants / "work"),), link) in ("EXDEV", "EACCES", "EPERM")
    assert not (grants / "work" / "link").exists()
    assert _try(landlock, (str(grants / "secret"),), (str(grants / "work"),), link) in ("EXDEV", "EACCES", "EPERM")


def test_a_hard_link_already_in_a_write_grant_is_the_file_it_links(grants: Path) -> None:
    """What the README says: a granted path is granted whole. Landlock checks the path used, so a
    hard link put inside `write` by someone else writes the outside file it names."""
    landlock = _landlock()
    os.link(grants / "secret" / "file", grants / "work" / "link")
    write = f"open({str(grants / 'work' / 'link')!r}, 'a').write('changed')"
    assert _try(landlock, (), (str(grants / "work"),), write) == "ok"
    assert (grants / "secret" / "file").read_text() == "secret\nchanged"


def test_a_symlink_a_tool_plants_in_its_grant_leads_nowhere_outside_it(grants: Path) -> None:
    """The tool may make symlinks inside `write`, but what they point to is checked where it is."""
    landlock = _landlock()
    plant = (f"os.symlink({str(grants / 'secret')!r}, {str(grants / 'work' / 'out')!r}); "
             f"open({str(grants / 'work' / 'out' / 'file')!r}).read()")
    assert _try(landlock, (), (str(grants / "work"),), plant) == "EACCES"
    overwrite = f"open({str(grants / 'work' / 'out' / 'file')!r}, 'w')"
    assert _try(landlock, (), (str(grants / "work"),), overwrite) == "EACCES"
    assert (grants / "secret" / "file").read_text() == "secret\n"


def test_a_granted_symlink_grants_its_target_as_prepared_and_a_later_swap_grants_nothing(grants: Path) -> None:
    """`read = [link]` grants what the link names when the policy is prepared (its first use in a
    server); the grant is that inode, so pointing the link elsewhere afterwards reaches nothing new."""
    landlock = _landlock()
    from tests.unit.run.test_landlock import PYTHON, RUNTIME

    link = grants / "link"
    link.symlink_to(grants / "data")
    ruleset = landlock.prepare(landlock.Policy(read=(str(link), *RUNTIME), write=(), network=True))
    try:
        tmp = grants / "link.new"
        tmp.symlink_to(grants / "secret")
        tmp.replace(link)                                        # swapped after prepare, before the call

        def cat(path: Path) -> str:
            done = subprocess.run([PYTHON, "-I", "-S", "-c", f"print(open({str(path)!r}).read(), end='')"],
                                  preexec_fn=lambda: landlock.enforce(ruleset.fd), capture_output=True,
                                  text=True, timeout=HANG_S)
            return done.stdout if done.returncode == 0 else "denied"
        assert cat(grants / "data" / "file") == "data\n"        # what the link named at prepare
        assert cat(link / "file") == "denied"                   # the link now leads to secret/
        assert cat(grants / "secret" / "file") == "denied"
    finally:
        ruleset.close()


def test_a_within_argument_swapped_for_a_symlink_after_the_check_stays_inside_a_sandbox(
        grants: Path, tmp_path: Path) -> None:
    """`within` resolves the path before the call and passes the resolved path; a directory on it
    swapped for a symlink afterwards (a race no check can close) is bounded by the sandbox: the
    command meets the symlink's target under Landlock, where it is not granted."""
    landlock = _landlock()
    target = grants / "work" / "sub"
    target.mkdir()
    (target / "file").write_text("inside\n")
    os.rename(target, grants / "work" / "sub.orig")
    target.symlink_to(grants / "secret")                   # what a racing process makes of the checked path
    read = f"open({str(target / 'file')!r}).read()"
    assert _try(landlock, (), (str(grants / "work"),), read) == "EACCES"
