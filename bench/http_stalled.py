"""`serve --http` while stalled connections are open: a fresh client's first answer.

Opens S connections that each send a POST's headers and one byte of its body, then stop
(they hold their sockets open for the whole run). Then, R times, a fresh client opens its
own connection and sends a 2026-07-28 `tools/call` (`echo`); the time from its connect to
the whole answer is its first answer's latency, and its status is kept (503 is the old
answer: stalled bodies held every request slot). The soft fd limit is raised to the hard
one first. Standard library only; prints a table, then one JSON line.

    .venv/bin/python bench/http_stalled.py [--stalled 1024] [--rounds 20]
"""

from __future__ import annotations

import argparse
import http.client
import json
import resource
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from http_bench import HEADERS, TOOLS, call, http_server  # noqa: E402  (a sibling script, not a package)


def stall(host: str, port: int, count: int) -> list[socket.socket]:
    body = call(0)
    head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {len(body)}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items()) + "\r\n").encode()
    opened = []
    for _ in range(count):
        sock = socket.create_connection((host, port), timeout=60)
        sock.sendall(head + body[:1])
        opened.append(sock)
    return opened


def first_answer(host: str, port: int) -> tuple[float, int]:
    start = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("POST", "/mcp", call(1), HEADERS)
    response = conn.getresponse()
    response.read()
    conn.close()
    return time.perf_counter() - start, response.status


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stalled", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = args.stalled + 256
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "tools.toml").write_text(TOOLS)
        proc, host, port = http_server(tmp)
        try:
            stalled = stall(host, port, args.stalled)
            time.sleep(1.0)             # let the server take every stalled connection before measuring
            rounds = [first_answer(host, port) for _ in range(args.rounds)]
            for sock in stalled:
                sock.close()
        finally:
            proc.terminate()
            proc.wait(60)
    took = [t for t, _ in rounds]
    figures = {"stalled_connections": args.stalled, "rounds": args.rounds,
               "statuses": sorted({s for _, s in rounds}),
               "first_answer_p50_ms": round(1000 * statistics.median(took), 1),
               "first_answer_max_ms": round(1000 * max(took), 1)}
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
