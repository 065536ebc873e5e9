"""Output beyond max_output: the spool on its own, through the runner, and over real pipes.

The acceptance case: 10 MB of output with max_output = "64KiB" gives a capped result
that links the whole output; reading the link page by page gives back all 10 MB byte
for byte, in every revision (resource_link from 2025-06-18, a text note before); a
quota evicts the oldest output first and a read of it is the revision's not-found error.
"""

from __future__ import annotations

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
