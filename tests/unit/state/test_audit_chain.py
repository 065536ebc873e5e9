"""`state/audit_chain.py`: verify names the first line that breaks the chain, and any one-byte change
is found (the logs are written by `state/audit_log.py`, tests/unit/state/test_audit_log.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from mcpwrap.state import audit_chain
from tests.unit.state.test_audit_log import _edit, _insert, _recompute_prev, _tampered, _verify, _write


@pytest.mark.parametrize("change, named", [
    (_edit, "audit.log:6: line 5 was edited"),
    (lambda lines: lines.pop(4), "audit.log:5: seq jumps from 3 to 5: 1 line(s) removed"),
    (lambda lines: lines.__setitem__(slice(4, 6), [lines[5], lines[4]]), "audit.log:5: seq 5 comes before seq 4"),
    (lambda lines: lines.insert(4, lines[3]), "audit.log:5: a copy of line 4 (inserted)"),
    (_insert, "audit.log:6: it chains to line 4: line 5 was inserted"),
    (_recompute_prev, "audit.log:7: line 6 was edited"),
    (lambda lines: lines.pop(0), "audit.log:1: the file does not start with an audit.header"),
])
def test_verify_names_the_first_bad_line(tmp_path: Path, change, named: str) -> None:  # type: ignore[no-untyped-def]
    problem = _tampered(tmp_path, change)
    assert problem is not None and named in problem, problem


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_single_byte_change_is_detected(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("prop") / "audit.log"
    _write(path, 6).close()
    anchor = _verify(path).last_hash
    raw = bytearray(path.read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1))
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != raw[at]))
    raw[at] = byte
    verdict = audit_chain.verify([("audit.log", bytes(raw))])
    # a change in any line but the last breaks the chain; the last one is held by the anchor (the
    # last hash `mcpwrap audit verify` prints, kept elsewhere) alone, as for any unkeyed chain
    last_line = at >= raw.rstrip(b"\n").rfind(b"\n", 0, len(raw) - 1)
    assert verdict.problem is not None or verdict.torn_tail is not None or last_line and verdict.last_hash != anchor
