"""The revision-independent result of one tool call.

The runner produces a `ToolResult`; `protocol/tools.py` renders it for the
revision in force. Blocks are frozen dataclasses so a renderer can match on
type and convert what an old revision lacks. `parse_mcp_output` turns the
stdout of an `output = "mcp"` tool into blocks, saying exactly what is wrong.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

NO_STRUCTURED: Any = object()   # "no structuredContent", distinct from a JSON null


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Media:
    kind: str                       # "image" | "audio"
    data: str                       # base64
    mime_type: str


@dataclass(frozen=True)
class Resource:
    """An embedded resource: exactly one of text / blob (base64)."""
    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


@dataclass(frozen=True)
class ResourceLink:
    uri: str
    name: str
    mime_type: str | None = None
    description: str | None = None
    title: str | None = None


Block = Text | Media | Resource | ResourceLink


@dataclass(frozen=True)
class ToolResult:
    content: tuple[Block, ...]
    is_error: bool = False
    structured: Any = NO_STRUCTURED
    exit_code: int | None = None
    duration_s: float = 0.0
    truncated: bool = False
    timed_out: bool = False
    stderr_tail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    bytes_out: int = 0                    # what the command wrote to stdout, kept or not (the audit trail's)
    protocol_error: bool = False          # its exit status is in the tool's protocol_error_codes

    @property
    def text(self) -> str:
        """What a shell user sees: the text blocks, joined."""
        return "\n".join(b.text for b in self.content if isinstance(b, Text))

    def to_json(self) -> dict[str, Any]:
        """The whole result for `mcpwrap call --json` and the task store."""
        out: dict[str, Any] = {
            "content": [block_to_json(b) for b in self.content],
            "isError": self.is_error,
            "exitCode": self.exit_code,
            "durationMs": round(self.duration_s * 1000, 3),
            "truncated": self.truncated,
            "timedOut": self.timed_out,
        }
        if self.structured is not NO_STRUCTURED:
            out["structuredContent"] = self.structured
        return out


def error_result(message: str, **kwargs: Any) -> ToolResult:
    return ToolResult(content=(Text(message),), is_error=True, **kwargs)


def block_to_json(block: Block) -> dict[str, Any]:
    """The newest wire form of a block; renderers down-convert from here."""
    match block:
        case Text(text):
            return {"type": "text", "text": text}
        case Media(kind, data, mime):
            return {"type": kind, "data": data, "mimeType": mime}
        case Resource(uri, mime, text, blob):
            contents: dict[str, Any] = {"uri": uri}
            if mime:
                contents["mimeType"] = mime
            contents.update({"text": text} if text is not None else {"blob": blob})
            return {"type": "resource", "resource": contents}
        case ResourceLink(uri, name, mime, description, title):
            link = {"type": "resource_link", "uri": uri, "name": name, "mimeType": mime,
                    "description": description, "title": title}
            return {k: v for k, v in link.items() if v is not None}
    raise TypeError(block)


class MalformedOutput(ValueError):
    """stdout of an `mcp` tool that is not a valid result; the message says where."""


def _string(obj: dict[str, Any], key: str, where: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise MalformedOutput(f"{where}.{key} must be a string")
    return value


def _base64(value: str, where: str) -> str:
    try:
        base64.b64decode(value, validate=True)
    except binascii.Error:
        raise MalformedOutput(f"{where} is not valid base64") from None
    return value


def parse_block(raw: Any, where: str) -> Block:
    if not isinstance(raw, dict):
        raise MalformedOutput(f"{where} must be an object")
    kind = raw.get("type")
    if kind == "text":
        return Text(_string(raw, "text", where) or "")
    if kind in ("image", "audio"):
        data = _base64(_string(raw, "data", where) or "", f"{where}.data")
        return Media(kind, data, _string(raw, "mimeType", where) or "")
    if kind == "resource":
        res = raw.get("resource")
        if not isinstance(res, dict):
            raise MalformedOutput(f"{where}.resource must be an object")
        text, blob = res.get("text"), res.get("blob")
        if (text is None) == (blob is None):
            raise MalformedOutput(f"{where}.resource needs exactly one of 'text' or 'blob'")
        if text is not None:
            text = _string(res, "text", f"{where}.resource")
        else:
            blob = _base64(_string(res, "blob", f"{where}.resource") or "", f"{where}.resource.blob")
        return Resource(_string(res, "uri", f"{where}.resource") or "",
                        _string(res, "mimeType", f"{where}.resource", False), text, blob)
    if kind == "resource_link":
        return ResourceLink(*(_string(raw, k, where, k in ("uri", "name"))  # type: ignore[arg-type]
                              for k in ("uri", "name", "mimeType", "description", "title")))
    raise MalformedOutput(f"{where}.type must be one of text, image, audio, resource, "
                          f"resource_link (got {kind!r})")


def parse_mcp_output(doc: Any) -> tuple[tuple[Block, ...], Any, bool]:
    """(content, structured, is_error) from the JSON an `mcp` tool printed."""
    if not isinstance(doc, dict):
        raise MalformedOutput("output must be one JSON object with a 'content' array")
    unknown = set(doc) - {"content", "structuredContent", "isError"}
    if unknown:
        raise MalformedOutput(f"unknown key(s) {', '.join(sorted(unknown))}: "
                              "allowed are content, structuredContent, isError")
    content = doc.get("content")
    if not isinstance(content, list):
        raise MalformedOutput("'content' must be an array of content blocks")
    is_error = doc.get("isError", False)
    if not isinstance(is_error, bool):
        raise MalformedOutput("'isError' must be a boolean")
    blocks = tuple(parse_block(b, f"content[{i}]") for i, b in enumerate(content))
    return blocks, doc.get("structuredContent", NO_STRUCTURED), is_error
