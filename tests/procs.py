"""What /proc says about live processes: the tests' way to prove nothing survived.

A test run tags itself: tests/conftest.py puts `TAG=<unique per run>` in the environment
before any test starts a process, so every server, tool and grandchild of this run carries
it (a child's environment is copied from its parent's). `mine()` is the processes of this
run only, so a census is never confused by another run's leftovers or another program's
processes that happen to share a command line. A search by a marker of the test's own
making (`with_cmdline`, `with_env`) needs no tag, and also finds a process that dropped it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

TAG = "TEST_RUN_OF_MCPWRAP"   # not MCPWRAP_*: those never reach a tool


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

    def has_env(self, name: str, value: str) -> bool:
        return f"{name}={value}".encode() in self.read("environ").split(b"\0")


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


def mine() -> Iterator[Proc]:
    """The live processes this test run started (all of them when the run is not tagged)."""
    tag = os.environ.get(TAG)
    return (p for p in live() if p.pid != os.getpid() and (tag is None or p.has_env(TAG, tag)))


# These three look at every process, tagged or not: what they look for is already unique to the
# test (a group it saw start, a marker it made up), and a process that cleared its environment
# (which the run's tag cannot follow) must still be found.
def group_alive(pgid: int) -> bool:
    return any(p.pgid == pgid for p in live())


def with_cmdline(marker: str) -> list[int]:
    return [p.pid for p in live() if p.pid != os.getpid() and marker.encode() in p.read("cmdline")]


def with_env(name: str, value: str) -> list[int]:
    return [p.pid for p in live() if p.pid != os.getpid() and p.has_env(name, value)]
