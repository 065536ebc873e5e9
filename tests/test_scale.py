"""Flat at scale (issue 16): no cliff in the number of waiting calls, the waiting room bounded by
bytes instead, large tools files checked once per distinct fragment, reloads off the loop.

Nothing here depends on speed: the figures live in bench/scale.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwrap import server as server_module
from tests.harness import Server

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
    assert server_module.QUEUED_PER_SLOT >= 64
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
    fits = server_module.WAITING_BYTES // (len(pad) + 200)
    assert fits + 2 < server_module.QUEUED_PER_SLOT            # the count alone would admit them all
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
