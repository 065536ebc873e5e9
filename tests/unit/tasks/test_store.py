"""Durable tasks: the store, the detached supervisor, both protocol eras, and the CLI.

End-to-end tests spawn `mcpwrap serve` over real pipes and validate every
message it writes against the official schema of the revision in force (plus
the tasks extension schema for 2026-07-28 task results). No sleeps: every wait
is a bounded poll against a deadline.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.protocol import tasking
from mcpwrap.protocol.revisions import MODERN
from mcpwrap.protocol.tasking import TaskLookupError, TaskTerminalError
from mcpwrap.protocol.tools import ProtocolError
from mcpwrap.tasks import index as task_index
from mcpwrap.tasks import store as tasks
from tests.blackbox.tasks.test_tasks import TIMEOUT, new_record

BAD_IDS = ["", "..", "../../../../etc/passwd", "/etc/passwd", "a/b", "A" * 21, "A" * 24, "-" + "A" * 22,
           "AAAAAAAAAAAAAAAAAAAA..", "AAAAAAAAAAAAAAAAAAAA/x", "AAAAAAAAAAAAAAAAAAAAA\0",
           "AAAAAAAAAAAAAAAAAAAAA\n", "ÄAAAAAAAAAAAAAAAAAAAAA", 42]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_malformed_ids_never_touch_the_filesystem(tmp_path: Path, bad: Any) -> None:
    store = tasks.Store(tmp_path / "store")
    for attempt in (store.get, store.cancel, lambda i: store.path(i)):
        with pytest.raises(TaskLookupError):
            attempt(bad)
    if isinstance(bad, str):
        with pytest.raises(TaskLookupError):
            store.update(bad, lambda r: r)
    assert not (tmp_path / "store").exists()


def test_ids_are_unguessable_and_records_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tasks.Store(tmp_path / "store")
    records = [new_record(store) for _ in range(20)]
    assert len({r.task_id for r in records}) == 20
    assert all(tasking.valid_id(r.task_id) for r in records)
    path = store.path(records[0].task_id)
    assert path.stat().st_mode & 0o777 == 0o600
    before = path.read_bytes()

    def crash(*args: Any) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(tasks.os, "replace", crash)  # the rename never happens: old record intact
    with pytest.raises(OSError):
        store.update(records[0].task_id, lambda r: replace(r, progress={"progress": 1}))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert not [p for p in store.root.iterdir() if p.name.endswith(".tmp")]

    stop = threading.Event()
    seen: list[Exception] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                store.read(records[1].task_id)
            except Exception as exc:  # noqa: BLE001 (a torn write shows up here, whatever its type)
                seen.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    for n in range(200):
        store.update(records[1].task_id, lambda r, n=n: replace(r, progress={"progress": n}))
    stop.set()
    thread.join(TIMEOUT)
    assert not seen
    assert store.read(records[1].task_id).progress == {"progress": 199}  # type: ignore[union-attr]


def test_cancel_racing_completion_ends_in_exactly_one_terminal_state(tmp_path: Path) -> None:
    store = tasks.Store(tmp_path / "store")
    outcome = {"content": [{"type": "text", "text": "ok"}], "isError": False}
    def cancel(task_id: str, gate: threading.Barrier, won: dict[str, bool]) -> None:
        gate.wait(TIMEOUT)
        try:
            store.cancel(task_id)
            won["cancel"] = True
        except TaskTerminalError:
            won["cancel"] = False

    def complete(task_id: str, gate: threading.Barrier, won: dict[str, bool]) -> None:
        gate.wait(TIMEOUT)
        record = store.finish(task_id, result=outcome)
        won["complete"] = record is not None and record.status == "completed"

    for _ in range(100):
        task_id = new_record(store).task_id
        gate, won = threading.Barrier(2), {}
        threads = [threading.Thread(target=f, args=(task_id, gate, won)) for f in (cancel, complete)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        final = store.read(task_id)
        assert final is not None and won["cancel"] != won["complete"]
        assert final.status == ("cancelled" if won["cancel"] else "completed")
        store.finish(task_id, error={"code": -32603, "message": "late"})
        assert store.read(task_id) == final             # terminal stays terminal, byte for byte
        with pytest.raises(TaskTerminalError):
            store.cancel(task_id)


def test_ttl_garbage_collection(tmp_path: Path) -> None:
    now = [time.time()]
    store = tasks.Store(tmp_path / "store", clock=lambda: now[0])
    short = [new_record(store, ttl_ms=1_000).task_id for _ in range(3)]
    kept = new_record(store, ttl_ms=600_000).task_id
    now[0] += 2
    with pytest.raises(TaskLookupError, match="expired"):
        store.get(short[0])
    assert not store.path(short[0]).exists() and not store.path(short[0], ".lock").exists()
    assert store.gc() == 2
    assert store.ids() == [kept] and [r.task_id for r in store.records()] == [kept]


def test_dead_supervisor_or_one_that_never_started_is_failed(tmp_path: Path) -> None:
    now = [time.time()]
    store = tasks.Store(tmp_path / "store", clock=lambda: now[0])
    unclaimed = new_record(store, claim=False)
    assert store.get(unclaimed.task_id).status == "working"        # still within the start grace
    now[0] += tasks.START_GRACE_S + 1
    record = store.get(unclaimed.task_id)
    assert record.status == "failed" and "did not start" in (record.status_message or "")
    ghost = new_record(store, claim=False)
    store.claim(ghost.task_id, os.getpid(), 1)                      # our pid, but not our start time
    record = store.get(ghost.task_id)
    assert record.status == "failed"
    assert record.status_message == f"the task's supervisor (pid {os.getpid()}) died without recording a result"


def test_list_pages_with_opaque_validated_cursors(tmp_path: Path) -> None:
    store = tasks.Store(tmp_path / "store")
    records = [new_record(store) for _ in range(5)]
    seen, cursor = [], None
    while True:
        chosen, cursor = store.page(cursor, 2)
        seen += [r.task_id for r in chosen]
        if cursor is None:
            break
    assert sorted(seen) == sorted(r.task_id for r in records) and len(seen) == 5
    for bad in ("", "nope", "MTpmb286YmFy", "x" * 200):
        with pytest.raises(Exception, match="Invalid cursor"):
            store.page(bad, 2)


def test_a_page_opens_only_the_records_it_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tasks.Store(tmp_path / "store")
    records = [new_record(store) for _ in range(60)]
    opened: list[str] = []
    read = tasks.Store.read
    monkeypatch.setattr(tasks.Store, "read", lambda self, task_id: opened.append(task_id) or read(self, task_id))
    seen: list[str] = []
    cursor = None
    while True:
        opened.clear()
        chosen, cursor = store.page(cursor, 10)
        assert len(set(opened)) <= 11         # the page, and the task that proves there is a next one
        seen += [r.task_id for r in chosen]
        if cursor is None:
            break
    assert seen == [r.task_id for r in records]             # creation order, each task once


def test_a_cursor_resumes_after_its_task_across_collection_and_new_tasks(tmp_path: Path) -> None:
    now = [time.time()]
    store = tasks.Store(tmp_path / "store", clock=lambda: now[0])
    records = [new_record(store, ttl_ms=1_000 if i % 2 == 0 else 600_000) for i in range(10)]
    first, cursor = store.page(None, 3)
    assert [r.task_id for r in first] == [r.task_id for r in records[:3]] and cursor is not None
    now[0] += 2                           # the even ones expire and go: every later entry moves up
    assert store.gc() == 5
    late = new_record(store)
    rest: list[str] = []
    while cursor is not None:
        chosen, cursor = store.page(cursor, 3)
        rest += [r.task_id for r in chosen]
    assert rest == [r.task_id for r in records[3::2]] + [late.task_id]
    forged = base64.urlsafe_b64encode(b"2:1:0:../../../etc/passwd").decode()
    for bad in (forged, tasking.encode_cursor(1, 0, "x")[:-2], "2:1:0:" + late.task_id):
        with pytest.raises(ProtocolError, match="Invalid cursor"):
            store.page(bad, 3)


def test_creation_never_collects_and_a_pass_collects_within_its_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [time.time()]
    store = tasks.Store(tmp_path / "store", clock=lambda: now[0])
    expired = [new_record(store, ttl_ms=1_000).task_id for _ in range(5)]
    now[0] += 2
    marker = store.root / ".gc"
    marker.touch()
    os.utime(marker, (0, 0))              # collection is due...
    kept = new_record(store).task_id      # ...yet creation leaves it
    assert all(store.path(i).exists() for i in expired)
    monkeypatch.setattr(tasks, "GC_BUDGET", 2)
    assert marker.name == tasks.GC_MARKER
    for left in (3, 1, 0):
        assert store.maybe_gc() == (2 if left else 1)
        assert sum(store.path(i).exists() for i in expired) == left
        assert store.maybe_gc() == 0                        # not due again within GC_INTERVAL_S
        os.utime(marker, (0, 0))
    indexed = (store.root / task_index.INDEX).read_bytes()
    assert len(indexed) == task_index.ENTRY and kept.encode() in indexed
    assert [r.task_id for r in store.records()] == [kept]


def test_the_index_follows_the_records(tmp_path: Path) -> None:
    store = tasks.Store(tmp_path / "store")
    ids = [new_record(store).task_id for _ in range(5)]
    index = store.root / task_index.INDEX
    index.unlink()                        # a store written before the index existed
    assert [r.task_id for r in tasks.Store(store.root).records()] == ids
    with index.open("ab") as f:
        f.write(b"00000")                 # a crash in the middle of an append
    ids.append(new_record(store).task_id)
    assert [r.task_id for r in store.records()] == ids
    orphan = new_record(store).task_id    # its creator was killed between the record and its entry
    index.write_bytes(index.read_bytes()[:-task_index.ENTRY])
    assert [r.task_id for r in store.records()] == ids
    store.gc()
    assert [r.task_id for r in store.records()] == ids   # a fresh record may still get its entry
    old = time.time() - tasks.STALE_ENTRY_S - 1
    os.utime(store.path(orphan), (old, old))
    store.gc()
    assert [r.task_id for r in store.records()] == ids + [orphan]
    store.path(ids[0]).unlink()           # a record gone by hand: its entry goes once it is old
    store.gc()
    assert index.read_bytes().count(b"\n") == len(ids) + 1
    assert [r.task_id for r in store.records()] == ids[1:] + [orphan]


def test_the_first_answer_to_a_parked_question_is_kept_and_the_task_works_again(tmp_path: Path) -> None:
    store = tasks.Store(tmp_path / "store")
    task_id = new_record(store).task_id
    question = {"method": "elicitation/create", "params": {"message": "Apply?"}}
    store.update(task_id, lambda r: replace(r, status="input_required", input_requests={"ask-1": question}))
    assert tasking.modern_detailed(store.get(task_id), MODERN)["inputRequests"] \
        == {"ask-1": question}
    yes, no = ({"action": "accept", "content": {"answer": v}} for v in (True, False))
    answered = store.answer(task_id, {"ask-1": yes, "ask-9": yes})
    assert answered.status == "working" and answered.input_responses == {"ask-1": yes}
    assert tasking.outstanding(answered) == frozenset() and "inputRequests" not in tasking.modern_detailed(
        answered, MODERN)
    assert store.answer(task_id, {"ask-1": no}).input_responses == {"ask-1": yes}    # a second answer: ignored
