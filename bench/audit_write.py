"""Per-line cost of the audit writer (state/audit_log.py): lines/s with and without fdatasync.

Run: .venv/bin/python bench/audit_write.py [DIR]   (DIR: the file system to measure; default a temp dir)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from mcpwrap.protocol import audit
from mcpwrap.state.audit_log import AuditLog

CALLER = audit.Caller("bearer:0123456789abcdef", "http", "session")


def rate(path: Path, fsync: bool, n: int) -> float:
    log = AuditLog(path, fsync=fsync)
    record = audit.call_end(CALLER, 1, "deploy", 0, None, 0.25, 1234, False, False)
    log.append(record)
    start = time.perf_counter()
    for _ in range(n):
        log.append(record)
    elapsed = time.perf_counter() - start
    log.close()
    return n / elapsed


def main() -> None:
    with tempfile.TemporaryDirectory(dir=sys.argv[1] if len(sys.argv) > 1 else None) as tmp:
        for fsync, n in ((False, 20000), (True, 2000)):
            per_s = rate(Path(tmp) / f"audit-{fsync}.log", fsync, n)
            print(f"fsync={fsync!s:5}  {per_s:10.0f} lines/s  {1e6 / per_s:8.1f} us/line")


if __name__ == "__main__":
    main()
