"""Issue 24, class 2: what a batch holds (answers waiting for their siblings) is bounded.

In bytes per batch and per server, and in items, in the core, for every method that answers a
batch item; past the bound an item gets a JSON-RPC error saying so, and a batch of 80 calls of
~1 MiB each leaves the server within the Hardening II bound (idle + 60 MiB) on stdio and HTTP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from mcpwrap.config import load as config
from mcpwrap.protocol.actions import ReadResource, StartCall
from mcpwrap.protocol.core import BATCH_BYTES, BATCH_ITEMS, BatchBudget, Core
from mcpwrap.result import Resource, Text, ToolResult
from tests.unit.protocol.test_core import KEYRING, feed, init, make_core, request, sent

MiB = 1024 * 1024


def _calls(core: Core, ids: list[int]) -> list[StartCall]:
    batch = [request(i, "tools/call", {"name": "echo", "arguments": {"msg": "m"}}) for i in ids]
    return [a for a in feed(core, orjson.dumps(batch)) if isinstance(a, StartCall)]


def _array(actions: list[Any]) -> list[dict[str, Any]]:
    arrays = [m for m in sent(actions) if isinstance(m, list)]
    assert len(arrays) == 1, sent(actions)
    return arrays[0]


def _refused(item: dict[str, Any], bound: int) -> bool:
    error = item.get("error")
    return (error is not None and error["code"] == -32603 and f"exceed {bound} bytes" in error["message"]
            and "separately" in error["message"])


def test_a_batch_holds_at_most_its_bytes_and_says_so_for_the_rest() -> None:
    core = make_core(budget=BatchBudget(per_batch=3000, total=10 * MiB))
    init(core, "2025-03-26")
    starts = _calls(core, [1, 2, 3, 4])
    actions: list[Any] = []
    for start in starts:
        actions = core.call_done(start.ctx, ToolResult((Text("x" * 1000),)))
    array = _array(actions)
    assert sorted(m["id"] for m in array) == [1, 2, 3, 4]
    assert [_refused(m, 3000) for m in array] == [False, False, True, True]
    assert len(orjson.dumps(array)) <= 3000 + 2 * 300        # what was kept, and two short errors
    assert core.budget.held == 0                              # given back once sent


def test_every_kind_of_batch_answer_is_measured(tmp_path: Path) -> None:
    """A resource read's answer counts like a call's: the bound is where every answer passes."""
    tools = tmp_path / "tools.toml"
    tools.write_text('[tools.echo]\ncommand = ["echo", "{msg}"]\nargs.msg = { type = "string" }\n'
                     '[resources.status]\nuri = "svc://status"\ncommand = ["echo", "ok"]\n')
    core = Core(config.load(tools), lambda: KEYRING, lambda: 1000.0,
                budget=BatchBudget(per_batch=1500, total=10 * MiB))
    init(core, "2025-03-26")
    batch = [request(1, "tools/call", {"name": "echo", "arguments": {"msg": "m"}}),
             request(2, "resources/read", {"uri": "svc://status"})]
    actions = feed(core, orjson.dumps(batch))
    start = next(a for a in actions if isinstance(a, StartCall))
    read = next(a for a in actions if isinstance(a, ReadResource))
    assert sent(core.call_done(start.ctx, ToolResult((Text("y" * 1400),)))) == []
    array = _array(core.resource_read(read.ctx, read.target, [Resource("svc://status", text="z" * 1400)]))
    assert _refused(next(m for m in array if m["id"] == 2), 1500)
    assert "result" in next(m for m in array if m["id"] == 1)


def test_the_server_wide_bound_is_shared_by_every_core_and_given_back() -> None:
    budget = BatchBudget(per_batch=MiB, total=2500)
    first, second = make_core(budget=budget), make_core(budget=budget)
    init(first, "2025-03-26")
    init(second, "2025-03-26")
    a = _calls(first, [1, 2])
    b = _calls(second, [1, 2])
    assert sent(first.call_done(a[0].ctx, ToolResult((Text("a" * 2000),)))) == []
    array = _array(second.call_done(b[0].ctx, ToolResult((Text("b" * 2000),))) +
                   second.call_done(b[1].ctx, ToolResult((Text("b"),))))
    assert _refused(next(m for m in array if m["id"] == 1), 2500)     # the first core holds the room
    first.end()                                                         # its session is over
    assert budget.held == 0
    c = _calls(second, [3, 4])
    array = _array(second.call_done(c[0].ctx, ToolResult((Text("c" * 2000),))) +
                   second.call_done(c[1].ctx, ToolResult((Text("c"),))))
    assert not any("error" in m for m in array)


def test_a_batch_past_its_item_bound_is_refused_whole_and_runs_nothing() -> None:
    core = make_core()
    init(core, "2025-03-26")
    too_many = [request(i, "tools/call", {"name": "echo", "arguments": {"msg": "m"}}) for i in range(BATCH_ITEMS + 1)]
    actions = feed(core, orjson.dumps(too_many))
    assert not any(isinstance(a, StartCall) for a in actions)
    (answer,) = sent(actions)
    assert isinstance(answer, dict) and answer["error"]["code"] == -32600
    assert f"at most {BATCH_ITEMS}" in answer["error"]["message"] and "separately" in answer["error"]["message"]
    assert not core.inflight and not core.batches
    pings = [request(i, "ping") for i in range(BATCH_ITEMS)]
    assert len(_array(feed(core, orjson.dumps(pings)))) == BATCH_ITEMS


def test_an_answer_that_cannot_be_encoded_is_an_error_inside_its_batch() -> None:
    core = make_core()
    init(core, "2025-03-26")
    (start,) = _calls(core, [1])
    array = _array(core.call_done(start.ctx, ToolResult((Text("lone surrogate \ud800"),))))
    assert array[0]["id"] == 1 and array[0]["error"]["code"] == -32603


def test_the_default_bounds_fit_the_memory_promise() -> None:
    assert BATCH_BYTES <= 8 * MiB and BatchBudget().total <= 16 * MiB and BATCH_ITEMS >= 80
