"""Faults: nothing is lost, nothing survives. Orphan census, bad files, a pipe full of noise."""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import time
import sys
from pathlib import Path
from typing import Any

from tests import procs
from tests.harness import Server, mcpwrap_cmd, modern_meta

FIXTURES = Path(__file__).parent / "fixtures"


def census(marker: str) -> list[int]:
    """Every live process whose environment carries the marker (all descendants inherit it)."""
    return procs.with_env("MCPWRAP_CENSUS", marker)


def test_orphan_census_200_calls(tmp_path: Path) -> None:
    marker = f"{os.getpid()}-{random.randrange(1 << 30)}"
    env = {"MCPWRAP_CENSUS": marker}
    rng = random.Random(7)
    servers = [Server(FIXTURES / "census.toml", tmp_path / f"s{i}", env=env) for i in range(4)]
    try:
        for index, s in enumerate(servers):
            s.initialize("2025-11-25")
            ids = []
            for n in range(50):
                tool = rng.choice(["quick", "slow", "overrun", "escape_attempt"])
                args = {"n": n} if tool == "quick" else {}
                modern = rng.random() < 0.5
                params = {"name": tool, "arguments": args, **({"_meta": modern_meta()} if modern else {})}
                ids.append((s.request("tools/call", params), tool))
            time.sleep(0.5)
            for rid, tool in ids:
                if tool in ("slow", "escape_attempt") and rng.random() < 0.6:
                    s.notify("notifications/cancelled", {"requestId": rid})
            if index % 2:
                time.sleep(0.5)      # let the overruns time out on half the servers; EOF on the rest
        assert census(marker), "the calls should be running before the servers go"
        for s in servers:
            assert s.close(timeout=10) == 0
        deadline = time.monotonic() + 3
        while census(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = census(marker)
        assert survivors == [], [open(f"/proc/{p}/cmdline", "rb").read() for p in survivors]
    finally:
        for s in servers:
            s.close()


def test_tools_file_deleted_while_serving(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text('[tools.a]\ncommand = ["echo", "a"]\n')
    with Server(tools, tmp_path) as s:
        s.initialize()
        tools.unlink()
        deadline = time.monotonic() + 5
        while not any("is gone" in line for line in s.stderr) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("is gone" in line for line in s.stderr)
        assert s.call("tools/call", {"name": "a", "arguments": {}})["result"]["content"][0]["text"] == "a\n"
        tools.write_text('[tools.b]\ncommand = ["echo", "b"]\n')
        assert s.read(timeout=5)["method"] == "notifications/tools/list_changed"
        assert [t["name"] for t in s.call("tools/list")["result"]["tools"]] == ["b"]


def test_bad_secret_files_refuse_start(tmp_path: Path) -> None:
    confirm = FIXTURES / "confirm.toml"
    directory = tmp_path / "dir-secret"
    directory.mkdir(mode=0o700)
    corrupt = tmp_path / "corrupt"
    corrupt.write_text("not a secret")
    corrupt.chmod(0o600)
    for secret in (directory, corrupt):
        done = subprocess.run(mcpwrap_cmd("serve", str(confirm), "--secret-file", str(secret)), input=b"",
                              capture_output=True, timeout=30)
        assert done.returncode != 0 and str(secret) in done.stderr.decode() and done.stdout == b""


def test_tools_file_problems_refuse_start(tmp_path: Path) -> None:
    done = subprocess.run(mcpwrap_cmd("serve", str(FIXTURES / "broken" / "misspelt_key.toml")), input=b"",
                          capture_output=True, timeout=30)
    assert done.returncode == 3 and b"misspelt_key.toml:2:1:" in done.stderr and done.stdout == b""
    missing = subprocess.run(mcpwrap_cmd("serve", str(tmp_path / "nope.toml")), input=b"", capture_output=True, timeout=30)
    assert missing.returncode == 3 and b"cannot read tools file" in missing.stderr


def test_noise_on_the_pipe_then_correct_answers(tmp_path: Path) -> None:
    rng = random.Random(11)
    shapes = [
        lambda: os.urandom(rng.randrange(1, 300)).replace(b"\n", b""),
        lambda: json.dumps(rng.choice([None, 1, "x", [], {}, [1, 2], {"jsonrpc": "2.0"}])).encode(),
        lambda: json.dumps({"jsonrpc": "2.0", "id": rng.choice([1, "a", None, True, 2.5, [1]]),
                            "method": rng.choice(["ping", "tools/list", "tools/call", "x/y", "initialize", 5]),
                            "params": rng.choice([{}, [], "p", {"name": "quick", "arguments": {"n": "x"}},
                                                  {"_meta": modern_meta()}, {"cursor": "zz"}])}).encode(),
        lambda: json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": rng.choice([1, "a", None, {}])}}).encode(),
        lambda: b"{" * rng.randrange(1, 5000),
    ]
    with Server(FIXTURES / "census.toml", tmp_path) as s:
        s.initialize("2025-11-25")
        deadline = time.monotonic() + 3
        sent = 0
        while time.monotonic() < deadline:
            s.raw(rng.choice(shapes)() + b"\n")
            sent += 1
        while True:                                   # drain what the noise produced, checking each message
            try:
                s.read(timeout=1)
            except queue.Empty:
                break
        assert sent > 100
        assert s.proc.poll() is None
        assert s.call("ping")["result"] == {}
        assert [t["name"] for t in s.call("tools/list")["result"]["tools"]][0] == "quick"
        assert s.call("tools/call", {"name": "quick", "arguments": {"n": 5}})["result"]["content"][0]["text"] == "5\n"


def _task_tools(tmp_path: Path) -> Path:
    tools = tmp_path / "tasks.toml"
    tools.write_text('[tools.job]\nshell = "echo done"\ntask = "optional"\n')
    return tools


def test_task_creation_with_an_unusable_state_dir(tmp_path: Path) -> None:
    blocked = tmp_path / "state-is-a-file"
    blocked.write_text("not a directory")
    with Server(_task_tools(tmp_path), tmp_path, state=blocked) as s:
        s.initialize("2025-11-25")
        answer = s.call("tools/call", {"name": "job", "arguments": {}, "task": {"ttl": 60000}})
        assert answer["error"]["code"] == -32603 and "task store" in answer["error"]["message"]
        assert s.call("ping")["result"] == {}
    assert blocked.read_text() == "not a directory"


def test_no_space_left_leaves_nothing_half_written(tmp_path: Path, monkeypatch: Any) -> None:
    import errno

    from mcpwrap import tasks

    store = tasks.Store(tmp_path / "store")
    real_fsync = os.fsync

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    try:
        store.create(tool="job", arguments={}, ttl_ms=60000, poll_ms=1000, tools_file=tmp_path / "t.toml",
                     digest="0" * 64, snapshot=None)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    else:
        raise AssertionError("the write should have failed")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert list((tmp_path / "store").iterdir()) == [] and store.records() == []


def test_killed_writer_never_leaves_a_readable_partial_record(tmp_path: Path) -> None:
    from mcpwrap import tasks

    root = tmp_path / "store"
    writer = ("import sys\nfrom pathlib import Path\nfrom mcpwrap import tasks\n"
              "store = tasks.Store(Path(sys.argv[1]))\n"
              "while True:\n"
              "    store.create(tool='job', arguments={'blob': 'x' * 200000}, ttl_ms=600000, poll_ms=1000,\n"
              "                 tools_file=Path('t.toml'), digest='0' * 64, snapshot=None)\n")
    rng = random.Random(3)
    for _ in range(15):
        proc = subprocess.Popen([sys.executable, "-c", writer, str(root)])
        time.sleep(rng.uniform(0.15, 0.4))
        proc.kill()
        proc.wait()
    store = tasks.Store(root)
    names = os.listdir(root)
    assert any(n.endswith(".json") for n in names)
    for task_id in store.ids():
        record = store.read(task_id)
        assert record is not None and record.arguments["blob"] == "x" * 200000
