"""Issue 24, class 2: what a batch holds (answers waiting for their siblings) is bounded.

In bytes per batch and per server, and in items, in the core, for every method that answers a
batch item; past the bound an item gets a JSON-RPC error saying so, and a batch of 80 calls of
~1 MiB each leaves the server within the Hardening II bound (idle + 60 MiB) on stdio and HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcpwrap.protocol.core import BATCH_BYTES
from tests.harness import Server
from tests.httpharness import HttpServer
from tests.unit.protocol.test_core_batches import _refused

BIG_TOOLS = """
[tools.big]
description = "print about 1 MB"
shell = "head -c 1000000 /dev/zero | tr '\\\\0' x"
[tools.small]
description = "print a word"
command = ["echo", "hi"]
"""


# --- black box: RSS of the real server while a batch of 80 large answers is served --------
# At the default --max-calls (64): what the batch holds is bounded by the core, and what the calls
# still running hold (up to max_output each) by the process's budget for kept output
# (`run.output.HELD_OUTPUT`), past which a call keeps its output in a private file.
SLOTS = ("--no-watch",)


def _hwm_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


def _big_batch() -> list[dict[str, Any]]:
    return [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "big", "arguments": {}}}
            for i in range(80)]


def _check_answers(array: Any) -> None:
    assert isinstance(array, list) and sorted(m["id"] for m in array) == list(range(80))
    kept = [m for m in array if "result" in m]
    assert kept and all(len(m["result"]["content"][0]["text"]) == 1000000 for m in kept)
    assert all(_refused(m, BATCH_BYTES) for m in array if "result" not in m)


def test_a_batch_of_80_large_answers_stays_in_bounds_on_stdio(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text(BIG_TOOLS)
    with Server(tools, tmp_path, *SLOTS) as server:
        server.initialize("2025-03-26")
        assert "result" in server.call("tools/call", {"name": "small", "arguments": {}})
        idle = _hwm_kib(server.proc.pid)
        for item in _big_batch():
            server.pending[item["id"]] = ("tools/call", "2025-03-26")
        server.raw(json.dumps(_big_batch()).encode() + b"\n")
        _check_answers(server.read())
        assert "result" in server.call("ping")
        peak = _hwm_kib(server.proc.pid)
        assert peak - idle <= 60 * 1024, f"peak RSS {peak} KiB, idle {idle} KiB"


def test_a_batch_of_80_large_answers_stays_in_bounds_over_http(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text(BIG_TOOLS)
    with HttpServer(tools, tmp_path, *SLOTS) as server:
        server.initialize("2025-03-26")
        assert "result" in server.legacy("tools/call", {"name": "small", "arguments": {}}).final
        idle = _hwm_kib(server.proc.pid)
        _check_answers(server.send(_big_batch()).final)
        peak = _hwm_kib(server.proc.pid)
        assert peak - idle <= 60 * 1024, f"peak RSS {peak} KiB, idle {idle} KiB"
