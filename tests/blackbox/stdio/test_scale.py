"""Flat at scale (issue 16): no cliff in the number of waiting calls, the waiting room bounded by
bytes instead, large tools files checked once per distinct fragment, reloads off the loop.

Nothing here depends on speed: the figures live in bench/scale.py.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import trio

from mcpwrap.config import load as config
from mcpwrap.config import reader as config_reader
from mcpwrap.config import schema
from mcpwrap.serve import admission, common, driver as driver_module, outbox
from mcpwrap.protocol.core import Core
from tests.harness import HANG_S, Server, write_atomically

TOOLS = """
[tools.hold]
description = "waits until a go-file exists"
command = ["sh", "-c", "while [ ! -e \\"$GO\\" ]; do sleep 0.05; done; echo released"]
args.pad = { type = "string", default = "" }
"""


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS)
    return path


def _decided(server: Server, ids: list[int]) -> dict[int, dict]:
    """The answers already given to `ids` once a ping sent after them is answered (refusals are immediate)."""
    notes: list = []
    server.response(server.request("ping"), notes=notes)
    return {m["id"]: m for m in notes if isinstance(m, dict) and m.get("id") in ids}


def test_many_more_waiting_calls_than_slots_all_complete(tools: Path, tmp_path: Path) -> None:
    """With 2 slots, 130 held calls (34 was the old cliff: 16 waiting per slot) all wait and all complete."""
    go = tmp_path / "go"
    n = 2 * (1 + 64)
    assert admission.QUEUED_PER_SLOT >= 64
    with Server(tools, tmp_path, "--max-calls", "2", "--no-watch", env={"GO": str(go)}) as server:
        server.initialize()
        ids = [server.request("tools/call", {"name": "hold", "arguments": {}}) for _ in range(n)]
        assert _decided(server, ids) == {}, "a call was refused before any could end"
        go.touch()
        for answer in server.responses(ids):
            assert answer["result"]["content"][0]["text"] == "released\n"


def test_the_waiting_room_is_bounded_by_the_bytes_of_the_waiting_requests(tools: Path, tmp_path: Path) -> None:
    """Few calls, but big ones: past WAITING_BYTES of waiting requests the next is refused; the others run."""
    go = tmp_path / "go"
    pad = "x" * (3 * 1024 * 1024)
    fits = admission.WAITING_BYTES // (len(pad) + 200)
    assert fits + 2 < admission.QUEUED_PER_SLOT            # the count alone would admit them all
    with Server(tools, tmp_path, "--max-calls", "1", "--no-watch", env={"GO": str(go)}) as server:
        server.initialize()
        running = server.request("tools/call", {"name": "hold", "arguments": {}})
        ids = [server.request("tools/call", {"name": "hold", "arguments": {"pad": pad}}) for _ in range(fits + 2)]
        refused = _decided(server, ids)
        assert refused, "every big call was admitted"
        for answer in refused.values():
            assert answer["result"]["isError"] is True and "--max-calls" in answer["result"]["content"][0]["text"]
        go.touch()
        waited = [i for i in ids if i not in refused]
        assert len(waited) >= fits - 1
        for answer in server.responses([running, *waited]):
            assert answer["result"]["content"][0]["text"] == "released\n"


# --- large tools files: each distinct fragment checked once, positions scanned only for problems ---------
KEYWORDS = ["type", "description", "title", "default", "enum", "const", "minimum", "maximum", "minLength",
            "maxLength", "pattern", "items", "format", "multipleOf", "required", "properties", "anyOf"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True),
                    st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "", "^a+$", "(("]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(KEYWORDS), inner, max_size=3)),
                      max_leaves=6)
ANNOTATIONS = st.dictionaries(st.sampled_from(["description", "title"]), st.one_of(st.text(max_size=3), VALUES))
FRAGMENTS = st.tuples(ANNOTATIONS, st.dictionaries(st.sampled_from(KEYWORDS), VALUES, max_size=4)).map(
    lambda parts: {**parts[0], **parts[1]})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FRAGMENTS, st.lists(st.tuples(st.sampled_from(["description", "title"]), st.one_of(st.text(max_size=5), VALUES)),
                           max_size=3))
@example({"default": None, "enum": []}, [])     # two keys at one place once shared one told problem
def test_a_fragment_vouched_for_by_an_earlier_one_gets_the_verdict_a_fresh_check_gives(
        fragment: dict[str, Any], changes: list[tuple[str, Any]]) -> None:
    """The cache changes no verdict: a variant checked after the original (same reader) is told
    exactly what a fresh check tells it, whatever its description or title became."""
    variant = dict(fragment)
    for name, value in changes:
        variant[name] = value
    reader = config_reader.Reader(Path("t.toml"), "")
    reader.schemas.add(("a",), fragment)
    reader.check_schemas_now()
    before = len(reader.problems)
    reader.schemas.add(("b",), variant)
    reader.check_schemas_now()
    fresh = schema.schema_problem(("b",), variant)
    assert [p.message for p in reader.problems[before:]] == ([fresh[1]] if fresh else [])


def test_shared_fragments_are_checked_once_and_a_good_file_is_not_scanned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[Any] = []
    real = schema.schema_problem
    monkeypatch.setattr(schema, "schema_problem", lambda key, schema: checked.append(schema) or real(key, schema))
    monkeypatch.setattr(config_reader, "_Locator", None)            # calling it would fail: nothing needs a position
    text = "".join(f'[tools.t{i}]\ncommand = ["echo", "{{a}}"]\n'
                   f'args.a = {{ type = "string", description = "argument of tool {i}", maxLength = 9 }}\n'
                   f'args.b = {{ type = "integer", default = {i % 3} }}\n' for i in range(100))
    loaded = config.loads(text.encode(), tmp_path / "tools.toml")
    assert len(loaded.tools) == 100
    assert len(checked) == 1 + 3                              # one string fragment, three integer ones


def test_a_reload_swaps_in_the_new_tools_with_the_toolset_applied(tmp_path: Path) -> None:
    """The reload builds the whole new config in its thread (toolset, name index); the swap on the loop
    serves it at once: a new tool is callable, an excluded one stays hidden. (A guard for the move of
    that work off the loop; it passed before it too.)"""
    tools = tmp_path / "tools.toml"
    tools.write_text('[tools.a]\ncommand = ["echo", "a"]\n[tools.hidden]\ncommand = ["echo", "h"]\n')
    with Server(tools, tmp_path, "--exclude", "hidden") as server:
        server.initialize()
        write_atomically(tools, '[tools.a]\ncommand = ["echo", "a"]\n[tools.b]\ncommand = ["echo", "b"]\n'
                                '[tools.hidden]\ncommand = ["echo", "h2"]\n')
        assert server.read()["method"] == "notifications/tools/list_changed"
        assert [t["name"] for t in server.call("tools/list")["result"]["tools"]] == ["a", "b"]
        assert server.call("tools/call", {"name": "b", "arguments": {}})["result"]["content"][0]["text"] == "b\n"
        hidden = server.call("tools/call", {"name": "hidden", "arguments": {}})
        assert "h2" not in str(hidden) and ("error" in hidden or hidden["result"].get("isError"))


def test_a_reload_frees_the_config_it_replaces_though_it_froze_the_new_one(tmp_path: Path) -> None:
    """A reload freezes what its load made (no collection scans a million objects), and frees the
    replaced tools a slice at a time: only reference counts free them then, so no cycle may hold them."""
    tools = tmp_path / "tools.toml"
    tools.write_text("".join(f'[tools.t{i}]\ncommand = ["echo", "{i}"]\n' for i in range(1200)))
    first = config.load(tools)
    core = Core(first, lambda: None, lambda: 0.0)
    replaced = weakref.ref(first.tools[-1])
    del first

    async def scenario() -> None:
        with trio.fail_after(HANG_S):
            async with trio.open_nursery() as nursery:
                driver = driver_module.Driver(core, common.Options(tmp_path / "secret", tmp_path / "state"), nursery,
                                              outbox.Outbox())
                nursery.start_soon(driver.watch, tools, common.file_signature(tools))
                write_atomically(tools, '[tools.only]\ncommand = ["echo", "only"]\n')
                while replaced() is not None:
                    await trio.sleep(0.01)
                assert [tool.name for tool in core.config.tools] == ["only"]
                nursery.cancel_scope.cancel()
    trio.run(scenario)
