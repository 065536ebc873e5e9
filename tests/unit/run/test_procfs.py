"""The chase for a fresh leader's early forks (`procfs.adopt_early_forks`), on a simulated /proc:
which pids it looks at, what it moves into the call's cgroup, and when it is sure it is done.

The pids are far above any real one, so none is a child of this process or another call's leader;
what /proc says of them, and the pids handed out, come from the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from mcpwrap.run import procfs

LEADER = 2_000_000_000
TAG = b"MCPWRAP_CALL=feedc0de"
OTHER = b"PATH=/usr/bin\0HOME=/root"


class FakeProc:
    """ns_last_pid as a sequence of reads, environments by pid (absent: gone), and the cgroup.procs
    the chase writes to (a pipe whose read end says what was moved)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, last_pids: list[int], environs: dict[int, bytes]) -> None:
        self.reads: Iterator[int] = iter(last_pids)
        self.environs = environs
        self.looked: list[int] = []
        self.read_end, self.procs = os.pipe()
        monkeypatch.setattr(procfs, "last_pid", lambda: next(self.reads))
        monkeypatch.setattr(procfs, "read_file", self.read_file)

    def read_file(self, path: str) -> bytes:
        pid = int(path.split("/")[2])
        self.looked.append(pid)
        return self.environs.get(pid, b"")

    def chase(self) -> bool:
        return procfs.adopt_early_forks(LEADER, TAG, self.procs)

    def moved(self) -> list[bytes]:
        """The pids written, in order (all of the test's pids have ten digits)."""
        os.close(self.procs)
        with os.fdopen(self.read_end, "rb") as pipe:
            written = pipe.read()
        return [written[i:i + 10] for i in range(0, len(written), 10)]


def test_no_pid_handed_out_after_the_leader_is_done_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeProc(monkeypatch, [LEADER], {})
    assert fake.chase() and fake.looked == [] and fake.moved() == []


def test_a_busy_machine_handing_out_pids_to_others_does_not_keep_the_chase_unsure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Other processes fork on and on (a burst's other spawns): one round that finds every pid live
    and none of the call's is enough, however many pids are handed out meanwhile."""
    last_pids = [LEADER + 3 * n for n in range(1, 6)]
    fake = FakeProc(monkeypatch, last_pids, {pid: OTHER for pid in range(LEADER + 1, LEADER + 16)})
    assert fake.chase()
    assert fake.looked == [LEADER + 1, LEADER + 2, LEADER + 3] and fake.moved() == []


def test_a_fork_is_moved_and_what_it_forked_meanwhile_is_looked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader's fork is moved; it may have forked before its move, so the pids handed out
    meanwhile are looked at too, and its own fork is moved."""
    environs = {LEADER + 1: OTHER, LEADER + 2: TAG, LEADER + 3: OTHER, LEADER + 4: TAG}
    fake = FakeProc(monkeypatch, [LEADER + 2, LEADER + 4, LEADER + 4], environs)
    assert fake.chase()
    assert fake.looked == [LEADER + 1, LEADER + 2, LEADER + 3, LEADER + 4]
    assert fake.moved() == [b"%d" % (LEADER + 2), b"%d" % (LEADER + 4)]


def test_a_pid_gone_before_it_was_looked_at_makes_the_chase_look_further(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gone pid may have been a fork that forked before it ended: its fork, handed out later, is found."""
    environs = {LEADER + 1: OTHER, LEADER + 3: TAG}
    fake = FakeProc(monkeypatch, [LEADER + 2, LEADER + 3, LEADER + 3], environs)
    assert fake.chase()
    assert fake.moved() == [b"%d" % (LEADER + 3)]


def test_forks_that_never_settle_leave_the_chase_unsure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every round finds a fork of the call and pids keep coming: not certain, so the sweep must look."""
    last_pids = [LEADER + n for n in range(1, 6)]
    fake = FakeProc(monkeypatch, last_pids, {LEADER + n: TAG for n in range(1, 6)})
    assert not fake.chase()
    assert len(fake.moved()) == 4


def test_pids_past_the_chase_bound_leave_it_unsure(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeProc(monkeypatch, [LEADER + procfs.CHASE_PIDS + 1], {})
    assert not fake.chase() and fake.looked == []
