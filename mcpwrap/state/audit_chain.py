"""The audit trail's line format and its chain, and checking it: pure, on bytes (no I/O).

A line is one JSON object, keys sorted (`orjson.OPT_SORT_KEYS`: the same record is always the same
bytes, whatever order it was built in, and no key order has to be kept by hand). Every line
carries `seq` (one more than the line before, across rotated files too), `time` (UTC, ISO 8601,
milliseconds), `event`, and `prev`: the SHA-256 hex of the previous line's bytes without its
newline. Every file starts with an `audit.header` line naming `FORMAT`; the first file's header
has `prev` = `GENESIS`, a rotated file's the hash of the last line of the file before it. A line
a writer left unfinished (it died mid-write) is ended with a newline by the next writer, which
then writes an `audit.torn` line (`torn_bytes`) chained to the last complete line.

`verify` follows the chain line by line, oldest file first, and stops at the first line that
fails, naming it and why: edited (its successor recorded another hash for it), removed (the
sequence jumps and the missing number is nowhere), reordered (the missing number comes later),
inserted (the next line chains past it), or not a record at all. An unfinished line is not
tampering: inside the trail it must be followed by its `audit.torn` line (it is then reported as
recovered); at the very end it is the torn tail of a crash.

The chain is unkeyed: it proves the lines are the ones written, in order, as long as the last
hash (`Verdict.last_hash`, which `mcpwrap audit verify` prints) is kept where whoever can write
the file cannot change it; whoever can rewrite the whole file can recompute every hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

FORMAT = "mcpwrap-audit/1"
GENESIS = "0" * 64
HEADER, TORN = "audit.header", "audit.torn"


def line_hash(line: bytes) -> str:
    """The `prev` the next line carries: SHA-256 hex of this line's bytes, newline excluded."""
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


def utc(now: float) -> str:
    """`now` (seconds since the epoch) as the `time` of a line: 2026-12-02T10:00:00.123Z."""
    return datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode(record: Mapping[str, Any], seq: int, prev: str, now: float) -> bytes:
    """One line, newline included: the record with its chain fields, keys sorted."""
    return orjson.dumps({**record, "seq": seq, "prev": prev, "time": utc(now)},
                        option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS) + b"\n"


def header() -> dict[str, Any]:
    """The first line of every file."""
    return {"event": HEADER, "format": FORMAT}


def torn(torn_bytes: int) -> dict[str, Any]:
    """What follows a line a writer left unfinished (ended with a newline by the next writer)."""
    return {"event": TORN, "torn_bytes": torn_bytes}


@dataclass
class Verdict:
    """What `verify` found: `problem` (None: the chain holds) names FILE:LINE and why; `last_hash`
    is the hash to keep elsewhere as the anchor of everything checked."""
    lines: int = 0
    last_hash: str = GENESIS
    last_seq: int = -1
    problem: str | None = None
    torn_tail: str | None = None          # FILE:LINE of an unfinished last line
    notes: list[str] = field(default_factory=list)


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    ok = isinstance(value, dict) and isinstance(value.get("prev"), str) and type(value.get("seq")) is int
    return value if ok else None


class _File:
    """One file's lines and records, and where each sequence number is."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name = name
        self.lines = data.split(b"\n")
        self.ended = self.lines[-1] == b""           # the last line has its newline
        if self.ended:
            self.lines.pop()
        self.records = [_record(line) for line in self.lines]
        self.where = {r["seq"]: i for i, r in enumerate(self.records) if r is not None}


def verify(files: Sequence[tuple[str, bytes]]) -> Verdict:
    """Check the chain through `files` (name, bytes), oldest first; stop at the first failure."""
    verdict = Verdict()
    for index, (name, data) in enumerate(files):
        f = _File(name, data)
        last = index == len(files) - 1
        if not _check_file(f, verdict, last):
            break
    return verdict


def _check_file(f: _File, v: Verdict, last_file: bool) -> bool:
    """Follow the chain through one file, extending `v`; False once a line fails."""
    i = 0
    while i < len(f.lines):
        line, record = f.lines[i], f.records[i]
        at = f"{f.name}:{i + 1}"
        if record is None:
            if i == len(f.lines) - 1 and not f.ended:
                if last_file:
                    v.torn_tail = at
                    return True
                v.problem = f"{at}: unfinished line in a file that is not the newest"
                return False
            after = f.records[i + 1] if i + 1 < len(f.records) else None
            if (after is not None and after.get("event") == TORN and after.get("torn_bytes") == len(line)
                    and after["prev"] == v.last_hash):
                v.notes.append(f"{at}: a line left unfinished by a writer that died, recovered at line {i + 2}")
                i += 1
                continue
            v.problem = f"{at}: not an audit record (edited)"
            return False
        problem = _check_line(f, i, record, v)
        if problem is not None:
            v.problem = f"{at}: {problem}"
            return False
        v.lines += 1
        v.last_hash, v.last_seq = line_hash(line), record["seq"]
        i += 1
    return True


def _check_line(f: _File, i: int, record: dict[str, Any], v: Verdict) -> str | None:
    """Why line `i` does not follow the chain so far, or None."""
    first = v.lines == 0 and v.last_seq == -1
    if (i == 0) != (record.get("event") == HEADER):
        return ("the file does not start with an audit.header line (lines before it were removed)" if i == 0
                else "an audit.header line inside a file (inserted)")
    if first:
        if record["prev"] != GENESIS:
            v.notes.append(f"{f.name}:1: continues a trail from a file not given (prev {record['prev'][:16]}...)")
        return None
    expected = v.last_seq + 1
    if record["prev"] == v.last_hash:
        return None if record["seq"] == expected else (
            f"seq {record['seq']} where {expected} was due, though it chains to the line before (edited)")
    if i >= 1 and f.lines[i] == f.lines[i - 1]:
        return f"a copy of line {i} (inserted)"
    if i >= 2 and record["prev"] == line_hash(f.lines[i - 2]):
        return f"it chains to line {i - 1}: line {i} was inserted"
    if record["seq"] == expected:
        return (f"line {i} was edited (this line recorded another hash for it)" if i > 0
                else "the line before it, at the end of the previous file, was edited, or the file is not its successor")
    if record["seq"] > expected:
        if expected in f.where and f.where[expected] > i:
            return f"seq {record['seq']} comes before seq {expected} (line {f.where[expected] + 1}): reordered"
        return f"seq jumps from {v.last_seq} to {record['seq']}: {record['seq'] - expected} line(s) removed before it"
    return f"seq {record['seq']} after seq {v.last_seq}: reordered, or inserted"
