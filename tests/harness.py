"""A real `mcpwrap serve` over pipes, with every message it writes schema-checked.

`Server` remembers which request each id was (method, era) and the legacy
revision negotiated by `initialize`, and validates each message it reads
against the official schema of the revision in force for it.

Waits are for events (a message, a stderr line, a process gone), never sleeps; every
timeout is a hang guard (HANG_S), far beyond what a loaded machine needs.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

from tests import mcpschema, procs

T = TypeVar("T")
MODERN = "2026-07-28"
HANG_S = 60.0           # a hang guard only: nothing expected takes a fraction of it


def until(condition: Callable[[], T], what: str | Callable[[], str], timeout: float = HANG_S) -> T:
    """Poll `condition` until it returns something truthy, and return that; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what if isinstance(what, str) else what()}")
        time.sleep(0.02)
    return value


def write_atomically(path: Path, text: str) -> None:
    """Replace a watched file in one step, so the watcher never reads it half-written."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    part.replace(path)


def modern_meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": caps or {},
            "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"}, **extra}


def mcpwrap_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpwrap", *args]


class Server:
    def __init__(self, tools: Path, tmp: Path, *extra: str, env: dict[str, str] | None = None,
                 secret: Path | None = None, state: Path | None = None) -> None:
        self.secret = secret or tmp / "secret"
        self.state = state or tmp / "state"
        self.proc = subprocess.Popen(
            mcpwrap_cmd("serve", str(tools), "--secret-file", str(self.secret), "--state-dir", str(self.state), *extra),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})}, start_new_session=True)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: list[str] = []
        self.pending: dict[Any, tuple[str, str]] = {}      # id -> (method, revision)
        self.rev: str | None = None
        self.next_id = 1000
        self._pumps = [threading.Thread(target=self._pump, daemon=True),
                       threading.Thread(target=self._pump_err, daemon=True)]
        for pump in self._pumps:
            pump.start()

    def _pump(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace"))

    # --- writing ------------------------------------------------------------------------
    def raw(self, data: bytes) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        if "id" in message and "method" in message:
            params = message.get("params") or {}
            meta = params.get("_meta") if isinstance(params, dict) else None
            modern = isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta \
                and message["method"] != "initialize"
            self.pending[message["id"]] = (message["method"], MODERN if modern else (self.rev or "2025-11-25"))
        self.raw(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any] | None = None, id: Any = None) -> Any:
        if id is None:
            self.next_id += 1
            id = self.next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return id

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    # --- reading ------------------------------------------------------------------------
    def read(self, timeout: float = HANG_S) -> dict[str, Any] | list[Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message within {timeout}s; stderr:\n" + "".join(self.stderr)) from None
        assert line is not None, "server closed stdout; stderr:\n" + "".join(self.stderr)
        message = json.loads(line)
        self._validate(message)
        return message

    def _validate(self, message: Any) -> None:
        if isinstance(message, list):
            for item in message:
                self._validate(item)
            return
        method, rev = self.pending.get(message.get("id"), (None, self.rev or "2025-11-25"))
        if "method" in message:
            meta = (message.get("params") or {}).get("_meta") or {}
            rev = MODERN if "io.modelcontextprotocol/subscriptionId" in meta else (self.rev or "2025-11-25")
            if message["method"] in ("notifications/progress", "notifications/message", "notifications/cancelled"):
                rev = self._notification_rev(message)
        elif method == "initialize" and "result" in message:
            self.rev = message["result"]["protocolVersion"]
            rev = self.rev
        mcpschema.check(rev, message, method)

    def _notification_rev(self, message: dict[str, Any]) -> str:
        params = message.get("params") or {}
        related = params.get("progressToken", params.get("requestId"))
        for request_id, (_, rev) in self.pending.items():
            if related == request_id:
                return rev
        return self.rev or MODERN

    def response(self, id: Any, timeout: float = HANG_S, notes: list[Any] | None = None) -> dict[str, Any]:
        """Read until the response for `id`; other messages are kept in `notes`."""
        return self.responses([id], timeout, notes)[0]

    def responses(self, ids: list[Any], timeout: float = HANG_S, notes: list[Any] | None = None) -> list[dict[str, Any]]:
        """Read until every id in `ids` is answered, in whatever order; the answers in the order of `ids`."""
        deadline = time.monotonic() + timeout
        answers: dict[str, dict[str, Any]] = {}
        wanted = {json.dumps(id) for id in ids}
        while wanted - answers.keys():
            message = self.read(max(0.01, deadline - time.monotonic()))
            key = json.dumps(message.get("id")) if isinstance(message, dict) and "method" not in message else None
            if key in wanted and key not in answers:
                answers[key] = message
            elif notes is not None:
                notes.append(message)
        return [answers[json.dumps(id)] for id in ids]

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = HANG_S) -> dict[str, Any]:
        return self.response(self.request(method, params), timeout)

    def initialize(self, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.call("initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                          "clientInfo": {"name": "tests", "version": "1"}})
        self.notify("notifications/initialized")
        return answer

    def no_message(self, wait: float = 0.3) -> None:
        """Nothing arrives within `wait`: a slow server can only make this pass, never fail."""
        try:
            line = self.lines.get(timeout=wait)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected message: {line!r}")

    def wait_stderr(self, text: str) -> str:
        """The first stderr line containing `text`, once the server has written it."""
        found = until(lambda: [line for line in self.stderr if text in line],
                      lambda: f"{text!r} on stderr; it has:\n" + "".join(self.stderr))
        return found[0]

    def tool_groups(self) -> set[int]:
        """The process groups of the tools running now (the server's children), once there are any.

        A child caught between fork and exec still shows the server's cmdline, and may not have
        its own session yet: it is not counted until it has exec'd."""
        server = procs.Proc(self.proc.pid, 0, 0).read("cmdline")
        return until(lambda: {p.pgid for p in procs.mine() if p.ppid == self.proc.pid and p.read("cmdline") != server},
                     "a tool to start")

    def close(self, timeout: float = HANG_S) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for pump, stream in zip(self._pumps, (self.proc.stdout, self.proc.stderr)):
                pump.join(timeout)                # EOF, once nothing holds the pipe open any more
                if stream and not pump.is_alive():
                    stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
