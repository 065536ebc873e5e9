"""Faults: nothing is lost, nothing survives. Orphan census, bad files, a pipe full of noise."""

from __future__ import annotations

import json
import os
import shutil
import random
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests import procs
from tests.harness import Server, mcpwrap_cmd, modern_meta, until, write_atomically

FIXTURES = Path(__file__).parents[2] / "fixtures"


def census(marker: str) -> list[int]:
    """Every live process whose environment carries the marker (all descendants inherit it)."""
    return procs.with_env("CENSUS_OF_MCPWRAP", marker)


def test_orphan_census_200_calls(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    env = {"CENSUS_OF_MCPWRAP": marker}
    rng = random.Random(7)
    servers = [Server(FIXTURES / "census.toml", tmp_path / f"s{i}", env=env) for i in range(4)]
    try:
        for index, s in enumerate(servers):
            s.initialize("2025-11-25")
            calls = []
            for n in range(50):
                tool = rng.choice(["quick", "slow", "overrun", "escape_attempt"])
                args = {"n": n} if tool == "quick" else {}
                modern = rng.random() < 0.5
                params = {"name": tool, "arguments": args, **({"_meta": modern_meta()} if modern else {})}
                calls.append((s.request("tools/call", params), tool))
            for rid, tool in calls:
                if tool in ("slow", "escape_attempt") and rng.random() < 0.6:
                    s.notify("notifications/cancelled", {"requestId": rid})
            if index % 2:                # half the servers see their overruns time out; the rest get EOF first
                overruns = s.responses([rid for rid, tool in calls if tool == "overrun"])
                assert all(answer["result"]["isError"] for answer in overruns)
        until(lambda: census(marker), "the calls to be running before the servers go")
        for s in servers:
            assert s.close() == 0
        until(lambda: not census(marker), lambda: "every call's processes to go; alive: "
              + repr([procs.Proc(pid, 0, 0).read("cmdline") for pid in census(marker)]))
    finally:
        for s in servers:
            s.close()


def test_tools_file_deleted_while_serving(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text('[tools.a]\ncommand = ["echo", "a"]\n')
    with Server(tools, tmp_path) as s:
        s.initialize()
        tools.unlink()
        s.wait_stderr("is gone")
        assert s.call("tools/call", {"name": "a", "arguments": {}})["result"]["content"][0]["text"] == "a\n"
        write_atomically(tools, '[tools.b]\ncommand = ["echo", "b"]\n')
        assert s.read()["method"] == "notifications/tools/list_changed"
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
        s.raw(b"".join(rng.choice(shapes)() + b"\n" for _ in range(1000)))
        # The ping's answer comes after every answer to the noise (none of it calls a tool that runs),
        # and `response` schema-checks each message on the way.
        assert s.call("ping")["result"] == {}
        assert s.proc.poll() is None
        assert [t["name"] for t in s.call("tools/list")["result"]["tools"]][0] == "quick"
        assert s.call("tools/call", {"name": "quick", "arguments": {"n": 5}})["result"]["content"][0]["text"] == "5\n"


def _task_tools(tmp_path: Path) -> Path:
    tools = tmp_path / "tasks.toml"
    tools.write_text('[tools.job]\nshell = "echo done"\ntask = "optional"\n')
    return tools


def test_task_creation_with_an_unusable_state_dir(tmp_path: Path) -> None:
    """A state directory that cannot be made is refused at start (test_cli_flags.py); one that stops
    being usable while the server runs costs the request, not the server."""
    blocked = tmp_path / "state-is-a-file"
    with Server(_task_tools(tmp_path), tmp_path, state=blocked) as s:
        s.initialize("2025-11-25")
        shutil.rmtree(blocked, ignore_errors=True)     # made at start: swapped for a file under the server
        blocked.write_text("not a directory")
        answer = s.call("tools/call", {"name": "job", "arguments": {}, "task": {"ttl": 60000}})
        assert answer["error"]["code"] == -32603 and "task store" in answer["error"]["message"]
        assert s.call("ping")["result"] == {}
    assert blocked.read_text() == "not a directory"


def test_no_space_left_leaves_nothing_half_written(tmp_path: Path, monkeypatch: Any) -> None:
    import errno

    from mcpwrap.tasks import store as tasks

    store = tasks.Store(tmp_path / "store")
    real_fsync = os.fsync

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    try:
        store.create(tool="job", arguments={}, ttl_ms=60000, poll_ms=1000, tools_file=tmp_path / "t.toml",
                     digest="0" * 64, snapshot=None, key=b"k" * 32)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    else:
        raise AssertionError("the write should have failed")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert list((tmp_path / "store").iterdir()) == [] and store.records() == []


def test_killed_writer_never_leaves_a_readable_partial_record(tmp_path: Path) -> None:
    from mcpwrap.tasks import store as tasks

    root = tmp_path / "store"
    # The writer reports each record it finished; it is killed right after the report the test waits
    # for, so mid-way through its next write, wherever that is, however fast the machine.
    writer = ("import sys\nfrom pathlib import Path\nfrom mcpwrap.tasks import store as tasks\n"
              "store = tasks.Store(Path(sys.argv[1]))\n"
              "while True:\n"
              "    store.create(tool='job', arguments={'blob': 'x' * 200000}, ttl_ms=600000, poll_ms=1000,\n"
              "                 tools_file=Path('t.toml'), digest='0' * 64, snapshot=None, key=b'k' * 32)\n"
              "    print('done', flush=True)\n")
    rng = random.Random(3)
    for _ in range(15):
        proc = subprocess.Popen([sys.executable, "-c", writer, str(root)], stdout=subprocess.PIPE)
        assert proc.stdout
        for _ in range(rng.randrange(1, 4)):
            assert proc.stdout.readline() == b"done\n", "the writer died before finishing a record"
        proc.kill()
        proc.wait()
        proc.stdout.close()
    store = tasks.Store(root)
    names = os.listdir(root)
    assert any(n.endswith(".json") for n in names)
    for task_id in store.ids():
        record = store.read(task_id)
        assert record is not None and record.arguments["blob"] == "x" * 200000
