"""Output beyond max_output: the spool on its own, through the runner, and over real pipes.

The acceptance case: 10 MB of output with max_output = "64KiB" gives a capped result
that links the whole output; reading the link page by page gives back all 10 MB byte
for byte, in every revision (resource_link from 2025-06-18, a text note before); a
quota evicts the oldest output first and a read of it is the revision's not-found error.
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpwrap.config import load as config
from mcpwrap.run import process as runner
from mcpwrap.state.durable import UnsafePathError
from mcpwrap.protocol.pages import valid
from mcpwrap.run.spool import Sink, Spool
from tests.harness import Server, modern_meta

TEN_MB = bytes(range(256)) * 40960                  # 10 MiB, every byte value, not UTF-8
WRITE_TEN_MB = "import sys; sys.stdout.buffer.write(bytes(range(256)) * 40960)"
TEXT_LINE = "héllo wörld ✓ "                          # multi-byte characters cut at page ends


def spool_at(tmp_path: Path, quota: int = 1 << 20, ttl_s: float = 3600.0, now: list[float] | None = None) -> Spool:
    clock = now or [1000.0]
    return Spool(tmp_path / "state" / "digest" / "output", quota, ttl_s, clock=lambda: clock[0])


def keep(spool: Spool, data: bytes, stream: str = "stdout") -> str:
    call = spool.new_call()
    sink = spool.open(call, stream)
    assert sink.write(data)
    sink.close()
    return call


# --- the spool ------------------------------------------------------------------------------------
def test_kept_files_are_private_and_ids_unguessable(tmp_path: Path) -> None:
    spool = spool_at(tmp_path)
    calls = {keep(spool, b"x") for _ in range(50)}
    assert len(calls) == 50 and all(valid(c, "stdout") for c in calls)
    for directory in (spool.root.parent.parent, spool.root.parent, spool.root):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for f in spool.root.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    call = calls.pop()
    page = spool.read(call, "stdout", 0, 10)
    assert page is not None and page.data == b"x" and page.total == 1
    assert spool.read(call, "stderr", 0, 10) is None                 # never written
    assert spool.read("../../etc/passwd", "stdout", 0, 10) is None    # not an id: no path is built
    assert spool.read(call.upper(), "stdout", 0, 10) is None


def test_a_planted_symlink_or_open_directory_is_refused(tmp_path: Path) -> None:
    spool = spool_at(tmp_path)
    call = keep(spool, b"x")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"secret")
    other = "f" * 32
    os.symlink(target, spool.root / f"{other}.stdout")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        spool.read(other, "stdout", 0, 10)
    spool.root.chmod(0o777)
    with pytest.raises(UnsafePathError, match="writable by group or others"):
        spool_at(tmp_path).read(call, "stdout", 0, 10)


def test_quota_evicts_the_oldest_first(tmp_path: Path) -> None:
    spool = spool_at(tmp_path, quota=300)
    first, second = keep(spool, b"a" * 100), keep(spool, b"b" * 100)
    os.utime(spool.root / f"{first}.stdout", (1, 1))                   # oldest, whatever the clock's grain
    os.utime(spool.root / f"{second}.stdout", (2, 2))
    third = keep(spool, b"c" * 150)                                      # needs room: the oldest goes
    assert spool.read(first, "stdout", 0, 1) is None
    assert spool.read(second, "stdout", 0, 1) is not None and spool.read(third, "stdout", 0, 1) is not None
    # A stream the quota cannot hold even alone is dropped whole, never kept cut.
    call = spool.new_call()
    sink = spool.open(call, "stdout")
    assert sink.write(b"d" * 200) and not sink.write(b"d" * 200)
    assert not sink.kept and spool.read(call, "stdout", 0, 1) is None


def test_ttl_expires_output(tmp_path: Path) -> None:
    now = [os.stat(tmp_path).st_mtime]
    spool = spool_at(tmp_path, ttl_s=60, now=now)
    call = keep(spool, b"old")
    assert spool.read(call, "stdout", 0, 3) is not None
    now[0] += 3600
    assert spool.read(call, "stdout", 0, 3) is None
    keep(spool, b"new")                                                  # opening a new one collects it
    assert not (spool.root / f"{call}.stdout").exists()


def test_a_disabled_spool_keeps_nothing(tmp_path: Path) -> None:
    spool = spool_at(tmp_path, quota=0)
    sink = spool.open(spool.new_call(), "stdout")
    assert not sink.write(b"x") and not sink.kept
    assert not spool.root.exists()


# --- through the runner ---------------------------------------------------------------------------
def load(tmp_path: Path, text: str) -> config.Config:
    path = tmp_path / "tools.toml"
    path.write_text(text)
    return config.load(path)


def test_runner_keeps_both_streams_of_a_truncated_call(tmp_path: Path) -> None:
    cfg = load(tmp_path, """
[tools.big]
shell = 'head -c 300000 /dev/zero; echo "some stderr" >&2'
max_output = "64KiB"
[tools.small]
command = ["echo", "fits"]
""")
    spool = spool_at(tmp_path)
    result = trio.run(lambda: runner.run(cfg.tool("big"), {}, spool=spool))
    links = {b.uri.rsplit("/", 1)[1]: b for b in result.content if isinstance(b, runner.ResourceLink)}
    assert set(links) == {"stdout", "stderr"} and result.truncated
    assert links["stdout"].uri in result.text
    call = links["stdout"].uri.split("/")[-2]
    out, err = spool.read(call, "stdout", 0, 1 << 20), spool.read(call, "stderr", 0, 100)
    assert out is not None and out.data == b"\0" * 300000
    assert err is not None and err.data == b"some stderr\n"
    small = trio.run(lambda: runner.run(cfg.tool("small"), {}, spool=spool))
    assert len(small.content) == 1 and len(list(spool.root.iterdir())) == 2   # nothing kept for a call that fit


def test_a_failing_spool_costs_the_copy_not_the_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load(tmp_path, '[tools.big]\ncommand = ["head", "-c", "3000000", "/dev/zero"]\nmax_output = "1KiB"\n')
    spool = spool_at(tmp_path)
    real_write, writes = Sink.write, []

    def write(self: Sink, data: bytes) -> bool:
        writes.append(len(data))
        if len(writes) == 2:
            raise OSError(28, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(Sink, "write", write)
    warnings: list[str] = []
    result = trio.run(lambda: runner.run(cfg.tool("big"), {}, spool=spool, on_warning=warnings.append))
    assert not result.is_error and result.truncated and len(result.text) < 2000
    assert not any(isinstance(b, runner.ResourceLink) for b in result.content) and "kept at" not in result.text
    assert list(spool.root.iterdir()) == [] and "No space left" in warnings[0]


def test_concurrent_spills_stay_within_the_quota(tmp_path: Path) -> None:
    cfg = load(tmp_path, '[tools.big]\ncommand = ["head", "-c", "300000", "/dev/zero"]\nmax_output = "1KiB"\n')
    spool = spool_at(tmp_path, quota=1_000_000)
    results: list[Any] = []

    async def main() -> None:
        async def one() -> None:
            results.append(await runner.run(cfg.tool("big"), {}, spool=spool))
        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(one)
    trio.run(main)
    assert sum(f.stat().st_size for f in spool.root.iterdir()) <= 1_000_000
    kept = 0
    for result in results:
        for link in (b for b in result.content if isinstance(b, runner.ResourceLink)):
            page = spool.read(link.uri.split("/")[-2], "stdout", 0, 1 << 20)
            assert page is None or page.data == b"\0" * 300000       # evicted later, or whole
            kept += page is not None
    assert 1 <= kept <= 3                                             # the quota holds three at most


# --- over real pipes ------------------------------------------------------------------------------
def read_whole(server: Server, uri: str, meta: dict[str, Any] | None = None) -> tuple[bytes, list[str]]:
    """Follow the pages of a kept stream from `uri`; (bytes, the kind of each page: text or blob)."""
    data, kinds, next_uri = b"", [], uri
    while next_uri:
        params: dict[str, Any] = {"uri": next_uri, **({"_meta": meta} if meta else {})}
        result = server.call("resources/read", params)["result"]
        contents = result["contents"][0]
        data += base64.b64decode(contents["blob"]) if "blob" in contents else contents["text"].encode()
        next_uri = result["_meta"]["mcpwrap/page"].get("next")
        kinds.append("blob" if "blob" in contents else "text")
    return data, kinds


@pytest.fixture
def big_tools(tmp_path: Path) -> Path:
    tools = tmp_path / "tools.toml"
    tools.write_text(f"""
[server]
max_output = "64KiB"
[spool]
quota = "15MiB"
[tools.big]
command = ["python3", "-c", "{WRITE_TEN_MB}"]
[tools.text]
command = ["python3", "-c", "print({TEXT_LINE!r} * 200000, end='')"]
""")
    return tools


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
def test_ten_megabytes_capped_linked_and_read_back_whole(big_tools: Path, tmp_path: Path, version: str) -> None:
    with Server(big_tools, tmp_path) as server:
        caps = server.initialize(version)["result"]["capabilities"]
        assert caps["resources"] == {"listChanged": True}
        templates = server.call("resources/templates/list", {})["result"]["resourceTemplates"]
        assert templates[0]["uriTemplate"] == "mcpwrap://output/{call}/{stream}{?offset,length}"
        result = server.call("tools/call", {"name": "big", "arguments": {}})["result"]
        first = result["content"][0]
        assert first["type"] == "text" and len(first["text"]) < 66_000      # characters: 64 KiB decoded
        link = result["content"][1]
        if version >= "2025-06-18":
            assert link["type"] == "resource_link"
            uri = link["uri"]
        else:                                                   # no resource_link yet: a text note
            assert link["type"] == "text" and "[resource link]" in link["text"]
            uri = link["text"].split(": ", 1)[1].split(" ")[0]
        assert uri in first["text"]
        data, kinds = read_whole(server, uri)
        assert data == TEN_MB and kinds == ["blob"] * 10


def test_text_pages_cut_at_character_boundaries_modern(big_tools: Path, tmp_path: Path) -> None:
    with Server(big_tools, tmp_path) as server:
        result = server.call("tools/call", {"_meta": modern_meta(), "name": "text", "arguments": {}})["result"]
        uri = next(b["uri"] for b in result["content"] if b["type"] == "resource_link")
        data, kinds = read_whole(server, uri + "?length=100001", modern_meta())     # pages end mid-character
        assert data == (TEXT_LINE * 200000).encode() and kinds == ["text"] * len(kinds) and len(kinds) > 30
        page = server.call("resources/read", {"_meta": modern_meta(), "uri": uri})["result"]
        assert page["ttlMs"] == 0 and page["cacheScope"] == "private" and "text" in page["contents"][0]


def test_quota_evicts_oldest_and_unknown_is_not_found(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text("""
[server]
max_output = "1KiB"
[spool]
quota = "5MiB"
[tools.out]
command = ["head", "-c", "3000000", "/dev/zero"]
""")
    with Server(tools, tmp_path) as server:
        server.initialize("2025-11-25")
        uris = [next(b["uri"] for b in server.call("tools/call", {"name": "out", "arguments": {}})["result"]["content"]
                     if b["type"] == "resource_link") for _ in range(2)]
        gone = server.call("resources/read", {"uri": uris[0]})
        assert gone["error"]["code"] == -32002 and gone["error"]["data"] == {"uri": uris[0]}
        assert read_whole(server, uris[1])[0] == b"\0" * 3000000
        modern = server.call("resources/read", {"_meta": modern_meta(), "uri": uris[0]})
        assert modern["error"]["code"] == -32602 and modern["error"]["data"] == {"uri": uris[0]}
        bad = server.call("resources/read", {"uri": uris[1] + "?offset=x"})
        assert bad["error"]["code"] == -32602


def test_no_spool_no_resources_capability(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text('[spool]\nquota = 0\n[tools.out]\ncommand = ["head", "-c", "3000", "/dev/zero"]\nmax_output = 10\n')
    with Server(tools, tmp_path) as server:
        assert "resources" not in server.initialize("2025-11-25")["result"]["capabilities"]
        result = server.call("tools/call", {"name": "out", "arguments": {}})["result"]
        assert [b["type"] for b in result["content"]] == ["text"]
        assert server.call("resources/templates/list", {})["error"]["code"] == -32601     # not declared


def test_a_task_keeps_its_output_beyond_the_cap(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text('[tools.job]\ncommand = ["head", "-c", "200000", "/dev/zero"]\nmax_output = "1KiB"\n'
                     'task = "always"\n')
    with Server(tools, tmp_path) as server:
        # No notifications/initialized: no status notifications (the strict 2025-11-25 check cannot
        # validate their allOf of two closed schemas), and tasks work the same.
        server.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "clientInfo": {"name": "tests", "version": "1"}})
        task = server.call("tools/call", {"name": "job", "arguments": {}, "task": {"ttl": 60000}})["result"]["task"]
        payload = server.call("tasks/result", {"taskId": task["taskId"]})["result"]
        link = next(b for b in payload["content"] if b["type"] == "resource_link")
        assert read_whole(server, link["uri"])[0] == b"\0" * 200000
