"""state.durable: what it creates is 0600 / 0700 whatever the umask, and the owner keeps access under
a restrictive one (issue 24, class 7; the whole session: tests/project/test_private_files.py)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpwrap.state import durable


@pytest.fixture
def umask_zero() -> Iterator[None]:
    """The test and every process it starts run with umask 0."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def shared_paths(*roots: Path) -> list[str]:
    """Every path under `roots` (the roots too) that group or others may access at all."""
    found = []
    for root in roots:
        for path in [root, *root.rglob("*")]:
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and stat.S_IMODE(mode) & 0o077:
                found.append(f"{path.relative_to(root.parent)} {stat.S_IMODE(mode):04o}")
    return found


def test_the_helpers_ignore_the_umask(tmp_path: Path, umask_zero: None) -> None:
    durable.make_private_dir(tmp_path / "a" / "b" / "c", parents=True)
    os.close(durable.create_private(tmp_path / "a" / "file"))
    os.close(durable.open_private(tmp_path / "a" / "b" / "opened", os.O_RDWR | os.O_CREAT))
    durable.write_atomic(tmp_path / "a" / "atomic", b"x")
    durable.write_private(tmp_path / "a" / "user", b"x")
    assert shared_paths(tmp_path / "a") == []
    assert stat.S_IMODE((tmp_path / "a" / "b" / "c").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a" / "file").stat().st_mode) == 0o600


def test_a_restrictive_umask_still_gives_the_owner_access(tmp_path: Path) -> None:
    old = os.umask(0o377)
    try:
        durable.make_private_dir(tmp_path / "d" / "e", parents=True)
        os.close(durable.create_private(tmp_path / "d" / "e" / "f"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "d" / "e" / "f").stat().st_mode) == 0o600
