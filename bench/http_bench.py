"""`serve --http` against `serve` on stdio, in one run: per-call latency and requests/s.

Both servers serve the same one-tool file; each gets N sequential 2026-07-28 `tools/call`
(`echo`) requests: over stdio pipes, and over one keep-alive HTTP/1.1 connection. Then
C client threads, each with its own keep-alive connection, send N calls in total to the
HTTP server for requests/s. Standard library only; prints a table, then one JSON line.

    .venv/bin/python bench/http_bench.py [--calls 1000] [--clients 8]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TOOLS = '[tools.echo]\ndescription = "echo"\ncommand = ["echo", "{msg}"]\nargs.msg = { type = "string" }\n'
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
           "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"}


def call(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"msg": "x"}, "_meta": META}}).encode()


def serve(tmp: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "mcpwrap", "serve", str(tmp / "tools.toml"), "--no-watch",
                             "--secret-file", str(tmp / "secret"), "--state-dir", str(tmp / "state"), *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stdio_latencies(tmp: Path, calls: int) -> list[float]:
    proc = serve(tmp)
    assert proc.stdin and proc.stdout
    took = []
    for n in range(calls):
        start = time.perf_counter()
        proc.stdin.write(call(n) + b"\n")
        proc.stdin.flush()
        assert b'"result"' in proc.stdout.readline()
        took.append(time.perf_counter() - start)
    proc.stdin.close()
    proc.wait(60)
    return took


def http_server(tmp: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str, int]:
    proc = serve(tmp, "--http", "127.0.0.1:0", *extra)
    assert proc.stderr
    while True:
        line = proc.stderr.readline().decode()
        if found := re.search(r"http://(\S+?):(\d+)/mcp", line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, found.group(1), int(found.group(2))
        if not line:
            raise SystemExit("the HTTP server did not start")


def http_latencies(host: str, port: int, calls: int) -> list[float]:
    conn = http.client.HTTPConnection(host, port, timeout=60)
    took = []
    for n in range(calls):
        start = time.perf_counter()
        conn.request("POST", "/mcp", call(n), HEADERS)
        response = conn.getresponse()
        assert response.status == 200 and b'"result"' in response.read()
        took.append(time.perf_counter() - start)
    conn.close()
    return took


def http_rate(host: str, port: int, calls: int, clients: int) -> float:
    def client(share: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        for n in range(share):
            conn.request("POST", "/mcp", call(n), HEADERS)
            response = conn.getresponse()
            assert response.status == 200, response.read()
            response.read()
        conn.close()

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, [calls // clients] * clients))
    return (calls // clients * clients) / (time.perf_counter() - start)


def ms(values: list[float], percentile: int) -> float:
    return round(1000 * statistics.quantiles(values, n=100)[percentile - 1], 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=min(8, 4 * (os.cpu_count() or 1)))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "tools.toml").write_text(TOOLS)
        stdio = stdio_latencies(tmp, args.calls)
        proc, host, port = http_server(tmp)
        try:
            over_http = http_latencies(host, port, args.calls)
            rate = http_rate(host, port, args.calls, args.clients)
        finally:
            proc.terminate()
            proc.wait(60)
    figures = {"stdio_call_p50_ms": ms(stdio, 50), "stdio_call_p95_ms": ms(stdio, 95),
               "http_call_p50_ms": ms(over_http, 50), "http_call_p95_ms": ms(over_http, 95),
               "http_sequential_calls_per_s": round(len(over_http) / sum(over_http)),
               "stdio_sequential_calls_per_s": round(len(stdio) / sum(stdio)),
               f"http_calls_per_s_{args.clients}_clients": round(rate)}
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
