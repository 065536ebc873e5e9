"""Per-call cost of OAuth JWT validation on the real `serve --http`: p50 of sequential 2026-07-28
`tools/call` (`echo`) requests, each carrying its bearer token, on three servers side by side — no
authentication (loopback), `--token-file` (a named line), and `--oauth-issuer` with `--oauth-scope`
(an RS256 JWT access token checked against the issuer's cached JWKS on every request) — one keep-alive
connection each, the calls interleaved in blocks of 50 so that machine noise hits all three alike.
The issuer is tests/blackbox/http/test_oauth.py's (RFC 8414 metadata and a JWKS on loopback).
Prints each p50 and the server's CPU time a call (/proc), each with its ratio to the token-file server.

Run: .venv/bin/python bench/oauth_call.py [--calls N]
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))

from bench import pct  # noqa: E402
from http_bench import HEADERS, TOOLS, call, http_server  # noqa: E402
from tests.blackbox.http.test_oauth import Issuer  # noqa: E402

BLOCK = 50
TOKEN = "bench-token-0123456789abcdef"


class Caller:
    """One server and one keep-alive connection to it, presenting `token` (if any) on every call."""

    def __init__(self, tmp: Path, token: str | None, *extra: str) -> None:
        tmp.mkdir(mode=0o700)
        (tmp / "tools.toml").write_text(TOOLS)
        self.proc, host, port = http_server(tmp, *extra)
        self.conn = http.client.HTTPConnection(host, port, timeout=60)
        self.headers = {**HEADERS, **({"authorization": f"Bearer {token}"} if token else {})}
        self.resource = f"http://{host}:{port}/mcp"

    def call(self, n: int) -> float:
        start = time.perf_counter()
        self.conn.request("POST", "/mcp", call(n), self.headers)
        response = self.conn.getresponse()
        body = response.read()
        assert response.status == 200 and b'"result"' in body, (response.status, body)
        return time.perf_counter() - start

    def cpu_s(self) -> float:
        """The server's CPU time so far (user + system, /proc), in seconds."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    issuer = Issuer()
    issuer.new_key("k1")
    callers: dict[str, Caller] = {}
    with tempfile.TemporaryDirectory(prefix="mcpwrap-oauth-bench-") as name:
        tmp = Path(name)
        tokens = tmp / "tokens"
        tokens.write_text(f"bench: {TOKEN}\n")
        tokens.chmod(0o600)
        try:
            callers["no auth"] = Caller(tmp / "none", None)
            callers["--token-file"] = Caller(tmp / "file", TOKEN, "--token-file", str(tokens))
            oauth = Caller(tmp / "oauth", None, "--oauth-issuer", issuer.url, "--oauth-scope", "mcp")
            oauth.headers["authorization"] = "Bearer " + issuer.token(oauth.resource, exp=int(time.time()) + 3600)
            callers["--oauth-issuer"] = oauth
            latencies: dict[str, list[float]] = {label: [] for label in callers}
            for caller in callers.values():
                for n in range(20):                                           # warm-up (and the JWKS fetch)
                    caller.call(n)
            cpu = {label: -caller.cpu_s() for label, caller in callers.items()}
            while len(latencies["no auth"]) < args.calls:
                for label, caller in callers.items():
                    latencies[label].extend(1000 * caller.call(n) for n in range(BLOCK))
            cpu = {label: 1e6 * (callers[label].cpu_s() + cpu[label]) / len(latencies[label]) for label in cpu}
        finally:
            for caller in callers.values():
                caller.close()
            issuer.close()
    base = pct(latencies["--token-file"], 50)
    for label, values in latencies.items():
        p50 = pct(values, 50)
        print(f"{label:15} p50 {p50:6.3f} ms  p95 {pct(values, 95):6.3f} ms  x{p50 / base:5.3f}"
              f"  server CPU {cpu[label]:5.0f} us a call  x{cpu[label] / cpu['--token-file']:5.3f}")
    print(f"JWKS fetches: {issuer.fetches}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
