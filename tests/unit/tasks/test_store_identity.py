"""The task store binds every task to its creator's principal (issue 24, class 5): another
principal's task is not found, exactly as an unknown id, and is left out of its lists. The same
over a real `serve --http` with two tokens is tests/blackbox/http/test_identity_binding.py, which
quotes the spec's words.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.protocol.tasking import TaskLookupError
from mcpwrap.tasks import index as task_index
from mcpwrap.tasks import store as tasks
from mcpwrap.tasks.views import public_json
from tests.blackbox.http.test_identity_binding import UNKNOWN_TASK

TOKEN_A, TOKEN_B = "token-of-alice-0123456789", "token-of-bob-0123456789"


# --- the binding decision, through public names ----------------------------------------------
def test_the_store_binds_each_task_to_its_principal(tmp_path: Path) -> None:
    from mcpwrap.protocol import identity

    a, b = identity.bearer(TOKEN_A.encode()), identity.bearer(TOKEN_B.encode())
    assert a.principal != b.principal and a == identity.bearer(TOKEN_A.encode())
    assert TOKEN_A not in a.principal and a.identified
    assert identity.LOCAL_USER.principal == identity.LOCAL and not identity.ANONYMOUS.identified
    assert identity.visible(a.principal, a.principal) and not identity.visible(a.principal, b.principal)
    assert identity.visible(a.principal, None)           # the local user's CLI sees every task
    assert identity.visible(None, identity.LOCAL)         # a record written before principals is the local user's

    store = tasks.Store(tmp_path / "store")

    def create(who: identity.Identity) -> str:
        return store.create(tool="t", arguments={}, ttl_ms=60_000, poll_ms=100, tools_file=Path("/x/tools.toml"),
                            digest="0" * 64, snapshot=None, key=b"k" * 32, principal=who.principal).task_id

    made = [(who, create(who)) for _ in range(4) for who in (a, b)]
    record = store.read(made[0][1])
    assert record is not None and record.principal == a.principal and TOKEN_A not in json.dumps(
        public_json(record))
    assert tasks.record_mac(record, b"k" * 32) == record.mac
    assert tasks.record_mac(replace(record, principal=b.principal), b"k" * 32) != record.mac   # the MAC covers it
    for task_id in (made[0][1], UNKNOWN_TASK):
        with pytest.raises(TaskLookupError) as refused:
            store.get(task_id, b.principal)
        assert refused.value.reason == "Task not found"
    with pytest.raises(TaskLookupError):
        store.cancel(made[0][1], b.principal)
    assert store.get(made[0][1], a.principal).status == "working"
    assert store.get(made[0][1]).task_id == made[0][1]     # no principal: the local user's CLI
    for who in (a, b):
        shown, cursor = [], None
        while True:
            page, cursor = store.page(cursor, 3, who.principal)
            shown += [r.task_id for r in page]
            if cursor is None:
                break
        assert shown == [i for w, i in made if w == who]
    assert [r.task_id for r in store.page(None, 100)[0]] == [i for _, i in made]


def test_old_records_and_indexes_stay_readable(tmp_path: Path) -> None:
    """A store written before principals: its records are the local user's, its index is rebuilt."""
    from mcpwrap.protocol import identity

    store = tasks.Store(tmp_path / "store")
    record = store.create(tool="t", arguments={}, ttl_ms=60_000, poll_ms=100, tools_file=Path("/x/tools.toml"),
                          digest="0" * 64, snapshot=None, key=b"k" * 32)
    path = store.path(record.task_id)
    doc = json.loads(path.read_bytes())
    del doc["principal"]
    path.write_text(json.dumps(doc))
    (store.root / task_index.INDEX).unlink()
    assert [r.task_id for r in store.page(None, 10, identity.LOCAL)[0]] == [record.task_id]
    assert store.get(record.task_id, identity.LOCAL).principal is None


def test_a_page_of_ones_own_tasks_opens_no_one_elses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tasks/list still costs the page: another principal's entries are skipped by the index alone."""
    from mcpwrap.protocol import identity

    a, b = identity.bearer(TOKEN_A.encode()).principal, identity.bearer(TOKEN_B.encode()).principal
    store = tasks.Store(tmp_path / "store")
    made = {p: [store.create(tool="t", arguments={}, ttl_ms=60_000, poll_ms=100, tools_file=Path("/x/tools.toml"),
                             digest="0" * 64, snapshot=None, key=b"k" * 32, principal=p).task_id
                for _ in range(count)] for p, count in ((a, 40), (b, 2))}
    opened: list[str] = []
    read = store.read
    monkeypatch.setattr(store, "read", lambda task_id: (opened.append(task_id), read(task_id))[1])
    page, cursor = store.page(None, 10, b)
    assert [r.task_id for r in page] == made[b] and cursor is None
    assert opened == made[b]


def test_an_index_built_while_a_task_is_being_created_lists_it_once(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A store whose index is (re)built — first use after an upgrade, or a collection pass — while a
    creator is between writing its record and appending its entry: the task is listed once."""
    store = tasks.Store(tmp_path / "store")

    def create() -> str:
        return store.create(tool="t", arguments={}, ttl_ms=60_000, poll_ms=100, tools_file=Path("/x/tools.toml"),
                            digest="0" * 64, snapshot=None, key=b"k" * 32).task_id

    first = create()
    (store.root / task_index.INDEX).unlink()           # an index of the earlier format, or none yet
    append = store.index.append

    def raced(record: Any) -> None:
        tasks.Store(store.root).records()         # another process reads the store: it builds the index
        append(record)

    monkeypatch.setattr(store.index, "append", raced)
    second = create()
    assert [r.task_id for r in tasks.Store(store.root).records()] == [first, second]
