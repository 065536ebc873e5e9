"""JSON-RPC 2.0 framing: bytes -> message or `Invalid`, message -> bytes.

Never raises on bad input: whatever arrives becomes a `Request`,
`Notification`, `Response`, `Batch` or `Invalid` (with the error code the
caller should answer with). `LineReader` splits a byte stream into lines with
a hard size cap and resynchronises at the next newline after an oversized one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700, -32600, -32601, -32602, -32603)
MAX_LINE = 4 * 1024 * 1024         # bytes; a longer line is rejected, never buffered whole
# orjson reads 1,024 levels but writes at most 254; every value we echo sits a few levels down
# (a task record, a result's structuredContent), so anything deeper than this is refused on the way in.
MAX_DEPTH = 100

RequestId = str | int


@dataclass(frozen=True)
class Request:
    """A request from the client: it awaits exactly one answer for its id."""
    id: RequestId
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Notification:
    """A message with no id: nothing answers it."""
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Response:
    """A client's answer to a request the server sent (elicitation)."""
    id: RequestId
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class Invalid:
    """A line or item that is not a valid JSON-RPC message: answered with `code`."""
    code: int
    message: str
    id: RequestId | None = None     # echoed when the broken request had a usable id


@dataclass(frozen=True)
class Batch:
    """A JSON array of messages (revisions that have batches answer with one array)."""
    items: tuple[Request | Notification | Response | Invalid, ...]


Message = Request | Notification | Response | Invalid | Batch


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def classify(obj: Any) -> Request | Notification | Response | Invalid:
    """One decoded JSON value -> a message, checking the JSON-RPC 2.0 shape."""
    if not isinstance(obj, dict):
        return Invalid(INVALID_REQUEST, "a JSON-RPC message must be an object")
    raw_id = obj.get("id")
    usable_id = raw_id if _valid_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        return Invalid(INVALID_REQUEST, 'missing or wrong "jsonrpc": must be "2.0"', usable_id)
    if "method" in obj:
        method, params = obj["method"], obj.get("params", {})
        if not isinstance(method, str):
            return Invalid(INVALID_REQUEST, '"method" must be a string', usable_id)
        if not isinstance(params, dict):
            return Invalid(INVALID_REQUEST, '"params" must be an object', usable_id)
        if "id" not in obj:
            return Notification(method, params)
        if usable_id is None:
            return Invalid(INVALID_REQUEST, '"id" must be a string or an integer (null is not allowed)')
        return Request(usable_id, method, params)
    if usable_id is not None and ("result" in obj) != ("error" in obj):
        result, error = obj.get("result"), obj.get("error")
        if (result is not None and not isinstance(result, dict)) or (error is not None and not isinstance(error, dict)):
            return Invalid(INVALID_REQUEST, "a response needs an object result or error", usable_id)
        return Response(usable_id, result, error)
    return Invalid(INVALID_REQUEST, "not a request, notification or response", usable_id)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether containers nest more than `limit` levels (iterative: a deep value cannot exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _checked(obj: Any, depth_offset: int = 0, shallow: bool = False) -> Request | Notification | Response | Invalid:
    """classify, refusing a message nested too deeply to be answered or echoed safely
    (`shallow`: its line has too few brackets to nest that deep, so it is not walked)."""
    message = classify(obj)
    if not shallow and not isinstance(message, Invalid) and too_deep(obj, MAX_DEPTH - depth_offset):
        request_id = message.id if isinstance(message, (Request, Response)) else None
        return Invalid(INVALID_PARAMS, f"invalid params: the message nests deeper than {MAX_DEPTH} levels",
                       request_id)
    return message


def decode(line: bytes) -> Message:
    """One line of input -> one message; invalid JSON or UTF-8 is a parse error."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return Invalid(PARSE_ERROR, f"parse error: {exc}")
    shallow = line.count(b"{") + line.count(b"[") < MAX_DEPTH   # each level opens with one of them
    if isinstance(obj, list):
        if not obj:
            return Invalid(INVALID_REQUEST, "an empty batch is not a request")
        return Batch(tuple(_checked(item, 1, shallow) for item in obj))
    return _checked(obj, 0, shallow)


def decode_line(line: bytes | None) -> Message:
    """A line from `LineReader`: None stands for a line over the size limit, which was dropped."""
    if line is None:
        return Invalid(INVALID_REQUEST, f"message too large: lines are limited to {MAX_LINE} bytes")
    return decode(line)


def encode(message: dict[str, Any] | list[dict[str, Any]]) -> bytes:
    """One message (or batch answer) as one line; orjson never emits raw newlines (and appends
    the line's own without copying the message's bytes once more)."""
    return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)


def response(id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


class LineReader:
    """Feeds bytes in, yields complete lines; an oversized line becomes None once."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self.buffer = bytearray()
        self.skipping = False

    def feed(self, data: bytes) -> list[bytes | None]:
        out: list[bytes | None] = []
        self.buffer += data
        while True:
            newline = self.buffer.find(b"\n")
            if newline < 0:
                if len(self.buffer) > self.max_line:
                    if not self.skipping:
                        out.append(None)
                    self.skipping = True
                    self.buffer.clear()
                return out
            line = bytes(self.buffer[:newline])
            del self.buffer[:newline + 1]
            if self.skipping:
                self.skipping = False
                continue
            if len(line) > self.max_line:
                out.append(None)
            elif line.strip():
                out.append(line.rstrip(b"\r"))

    def finish(self) -> list[bytes | None]:
        """At EOF: a last line without a newline still counts."""
        rest, self.buffer = bytes(self.buffer), bytearray()
        if self.skipping or not rest.strip():
            return []
        return [rest] if len(rest) <= self.max_line else [None]
