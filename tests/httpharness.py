"""A real `mcpwrap serve --http` on a loopback port it picks itself, and a plain HTTP client for it.

The server binds port 0 and names its address on stderr; the test waits for that line
(an event, not a sleep). Every message read back is validated against the schema of the
revision in force: 2026-07-28 for a modern POST, the session's negotiated one otherwise.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from tests import mcpschema
from tests.harness import HANG_S, MODERN, mcpwrap_cmd, modern_meta, until

NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",          # 2026-07-28
         "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}   # the tasks extension


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    messages: list[Any] = field(default_factory=list)        # a batch answer is one list
    body: bytes = b""

    @property
    def final(self) -> Any:
        return self.messages[-1]


def read_sse(response: http.client.HTTPResponse, on_message: Any = None) -> list[dict[str, Any]]:
    """Every `data:` event until the server ends the stream; `on_message` sees each as it comes."""
    messages, data = [], []
    while True:
        line = response.readline()
        if not line:
            return messages
        text = line.decode().rstrip("\r\n")
        if text.startswith("data:"):
            data.append(text[5:].lstrip(" "))
        elif not text and data:
            messages.append(json.loads("\n".join(data)))
            data = []
            if on_message is not None:
                on_message(messages[-1])


class HttpServer:
    def __init__(self, tools: Path, tmp: Path, *extra: str, address: str = "127.0.0.1:0",
                 secret: Path | None = None, state: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            mcpwrap_cmd("serve", str(tools), "--http", address, "--secret-file", str(secret or tmp / "secret"),
                        "--state-dir", str(state or tmp / "state"), *extra),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env={**os.environ, **(env or {})})
        self.stderr: list[str] = []
        self.session: str | None = None
        self.rev: str = "2025-11-25"
        self._pump = threading.Thread(target=self._read_stderr, daemon=True)
        self._pump.start()
        line = until(lambda: next((x for x in self.stderr if " on http://" in x), None) or self.proc.poll() is not None,
                     lambda: "the server to listen; stderr:\n" + "".join(self.stderr))
        assert isinstance(line, str), "server exited: " + "".join(self.stderr)
        found = re.search(r"http://(\S+?):(\d+)(/\S*)", line)
        assert found, line
        self.host, self.port, self.path = found.group(1), int(found.group(2)), found.group(3)

    def _read_stderr(self) -> None:
        assert self.proc.stderr
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace"))

    # --- raw exchanges ------------------------------------------------------------------
    def open(self, method: str, body: bytes | None, headers: dict[str, str]) -> tuple[http.client.HTTPConnection,
                                                                                     http.client.HTTPResponse]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=HANG_S)
        conn.request(method, self.path, body=body, headers=headers)
        return conn, conn.getresponse()

    def send(self, message: Any, headers: dict[str, str] | None = None, rev: str | None = None,
             method: str = "POST", raw: bytes | None = None) -> Answer:
        base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self.session is not None:
            base["mcp-session-id"] = self.session
        body = raw if raw is not None else (json.dumps(message).encode() if message is not None else None)
        conn, response = self.open(method, body, {**base, **(headers or {})})
        try:
            answer = Answer(response.status, {k.lower(): v for k, v in response.getheaders()})
            if answer.headers.get("content-type") == "text/event-stream":
                answer.messages = read_sse(response)
            else:
                answer.body = response.read()
                if answer.body:
                    answer.messages = [json.loads(answer.body)]
        finally:
            conn.close()
        sent = message if isinstance(message, list) else [message]
        methods = {m.get("id"): m.get("method") for m in sent if isinstance(m, dict)}
        for item in (i for m in answer.messages for i in (m if isinstance(m, list) else [m])):
            check(rev or self.rev, item, methods.get(item.get("id")) if "method" not in item else None)
        return answer

    # --- the two eras -------------------------------------------------------------------
    def modern(self, method: str, params: dict[str, Any] | None = None, id: Any = 1,
               caps: dict[str, Any] | None = None, headers: dict[str, str] | None = None, **meta: Any) -> Answer:
        params = {**(params or {}), "_meta": modern_meta(caps, **meta)}
        return self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params},
                         {**modern_headers(method, params), **(headers or {})}, MODERN)

    def initialize(self, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> Answer:
        self.session = None
        answer = self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": {"name": "t", "version": "1"}}},
            rev=version)
        self.session, self.rev = answer.headers["mcp-session-id"], answer.final["result"]["protocolVersion"]
        assert self.send({"jsonrpc": "2.0", "method": "notifications/initialized"}).status == 202
        return answer

    def legacy(self, method: str, params: dict[str, Any] | None = None, id: Any = 1) -> Answer:
        return self.send({"jsonrpc": "2.0", "id": id, "method": method, **({"params": params} if params else {})})

    def close(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(HANG_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._pump.join(HANG_S)
        bugs = [line for line in self.stderr if "internal error" in line or "Traceback" in line]
        assert not bugs, "the server logged a bug:\n" + "".join(self.stderr)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def modern_headers(method: str, params: dict[str, Any]) -> dict[str, str]:
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if method in NAMED:
        headers["mcp-name"] = str(params.get(NAMED[method]))
    return headers


def check(rev: str, message: dict[str, Any], method: str | None) -> None:
    """Schema-check one message; a transport refusal (no id, code -32600) has a form only from 2025-11-25."""
    if "error" in message and "id" not in message:
        mcpschema.validate("2025-11-25", "JSONRPCErrorResponse", message)
        return
    result = message.get("result")
    # Strict mode closes each allOf branch on its own, so it rejects the valid allOf-composed task shapes.
    tasky = (method or "").startswith("tasks/") or isinstance(result, dict) and result.get("resultType") == "task"
    mcpschema.check(rev, message, method if "id" in message else None, strict=not tasky)
