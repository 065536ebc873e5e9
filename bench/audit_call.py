"""Per-call cost of the audit trail on the real `mcpwrap serve` (stdio): p50 of sequential `echo`
calls with no audit trail, with `--audit FILE`, and with `audit_required = true` (call.start
flushed before the spawn), three servers side by side, the calls interleaved in blocks of 50 so that
machine noise hits all three alike. Prints each p50 and its ratio to the server without a trail.

Run: .venv/bin/python bench/audit_call.py [--calls N] [--dir DIR]   (DIR: where the trails go)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench import TOOLS_TOML, Server, check_call_result, echo_params, pct  # noqa: E402

BLOCK = 50


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mcpwrap-audit-bench-", dir=args.dir))
    try:
        plain = tmp / "plain.toml"
        plain.write_text(TOOLS_TOML)
        required = tmp / "required.toml"
        required.write_text(TOOLS_TOML.replace('[server]\n', f'[server]\naudit = "{tmp / "required.log"}"\n'
                                               'audit_required = true\n', 1))
        servers = {"no audit": Server(plain, tmp, "plain"),
                   "--audit": Server(plain, tmp, "audited", ("--audit", str(tmp / "audit.log"))),
                   "audit_required": Server(required, tmp, "required")}
        latencies: dict[str, list[float]] = {name: [] for name in servers}
        try:
            for server in servers.values():
                server.initialize()
                for _ in range(20):                                           # warm-up
                    check_call_result(server.call("tools/call", echo_params())[1])
            while len(latencies["no audit"]) < args.calls:
                for name, server in servers.items():
                    for _ in range(BLOCK):
                        seconds, msg = server.call("tools/call", echo_params())
                        check_call_result(msg)
                        latencies[name].append(seconds * 1000)
        finally:
            for server in servers.values():
                server.close()
        base = pct(latencies["no audit"], 50)
        for name, values in latencies.items():
            p50 = pct(values, 50)
            print(f"{name:15} p50 {p50:6.3f} ms  p95 {pct(values, 95):6.3f} ms  x{p50 / base:5.3f}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
