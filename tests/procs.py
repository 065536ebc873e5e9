"""What /proc says about live processes: the tests' way to prove nothing survived."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int

    def read(self, name: str) -> bytes:
        try:
            with open(f"/proc/{self.pid}/{name}", "rb") as f:
                return f.read()
        except OSError:
            return b""


def live() -> Iterator[Proc]:
    """Every process that is not a zombie (a zombie has exited; only its reaper is late)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            yield Proc(int(entry), int(fields[1]), int(fields[2]))


def group_alive(pgid: int) -> bool:
    return any(p.pgid == pgid for p in live())


def with_cmdline(marker: str) -> list[int]:
    return [p.pid for p in live() if marker.encode() in p.read("cmdline")]


def with_env(name: str, value: str) -> list[int]:
    needle = f"{name}={value}".encode()
    return [p.pid for p in live() if p.pid != os.getpid() and needle in p.read("environ").split(b"\0")]
