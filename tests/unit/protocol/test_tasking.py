"""protocol.tasking: task ids that never read as options, granted ttls, and opaque validated list cursors."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwrap.config.load import loads
from mcpwrap.protocol.tasking import (
    MIN_TTL_MS,
    decode_cursor,
    encode_cursor,
    new_id,
    requested_ttl_ms,
    valid_id,
)
from mcpwrap.protocol.tools import ProtocolError

TOOL = loads(b'[tools.t]\ncommand = ["true"]\ntask = "optional"\ntask_ttl = "1h"\n', Path("unit.toml")).tool("t")
assert TOOL is not None


def test_new_ids_are_valid_distinct_and_never_start_with_a_dash() -> None:
    ids = {new_id() for _ in range(500)}
    assert len(ids) == 500 and all(valid_id(i) and i[0] not in "-_" for i in ids)


@pytest.mark.parametrize("task_id", ["-" + "a" * 22, "a" * 21, "a" * 24, "a" * 22 + "=", None, 7, "../" + "a" * 19])
def test_anything_else_is_no_task_id(task_id: object) -> None:
    assert not valid_id(task_id)


@pytest.mark.parametrize("task, granted", [
    (None, 3_600_000), ({"ttl": 60_000}, 60_000), ({"ttl": 10**12}, 3_600_000), ({"ttl": 0}, MIN_TTL_MS),
    ({"ttl": True}, 3_600_000), ({"ttl": "5"}, 3_600_000),
])
def test_the_granted_ttl_is_the_asked_one_clamped_to_the_tools(task: object, granted: int) -> None:
    assert requested_ttl_ms({} if task is None else {"task": task}, TOOL) == granted


def test_a_cursor_round_trips_and_anything_else_is_invalid_params() -> None:
    task_id = new_id()
    assert decode_cursor(encode_cursor(41, 7, task_id)) == (41, 7, task_id)
    for bad in ("", "x", None, encode_cursor(41, 7, task_id)[:-2]):
        with pytest.raises(ProtocolError) as refused:
            decode_cursor(bad)
        assert refused.value.code == -32602
