"""Era-independent tools decisions: listing pages, preparing calls, rendering results.

Everything is rendered "conservatively, field by field": a peer gets only the
fields and block types its revision defines, and a block it lacks is turned
into the nearest form it has (a text note), never sent as-is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcpwrap.config.model import Config, Tool
from mcpwrap.protocol import grammar
from mcpwrap.protocol.revisions import Revision

if TYPE_CHECKING:
    from mcpwrap.result import Block, ToolResult

PAGE_SIZE = 500
TASK_SUPPORT = {"optional": "optional", "always": "required"}
PROTOCOL_ERROR_CHARS = 2000       # a protocol error's message keeps this much of the end of its result's text


class ProtocolError(Exception):
    """A JSON-RPC error decided by the core; `code` is checked against the revision."""

    def __init__(self, code: int, message: str, data: Any = None, diagnostic: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data
        self.diagnostic = diagnostic      # for stderr only: the wire message stays generic

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def invalid_params(message: str) -> ProtocolError:
    return ProtocolError(-32602, message)


def _object_schema(schema: Mapping[str, Any] | None) -> bool:
    return schema is not None and schema.get("type") == "object"


def render_tool(tool: Tool, rev: Revision) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    if tool.title and rev.has("tool.title"):
        out["title"] = tool.title
    if tool.description:
        out["description"] = tool.description
    out["inputSchema"] = tool.input_schema
    if tool.output_schema is not None and rev.has("tool.outputSchema") and (
            rev.has("structured.any_json") or _object_schema(tool.output_schema)):
        out["outputSchema"] = dict(tool.output_schema)
    if tool.annotations and rev.has("tool.annotations"):
        out["annotations"] = dict(tool.annotations)
    if tool.task in TASK_SUPPORT and rev.has("tool.execution"):
        out["execution"] = {"taskSupport": TASK_SUPPORT[tool.task]}
    return out


def encode_cursor(offset: int, config: Config) -> str:
    return grammar.encode_cursor(1, offset, config.digest[:16])


def decode_cursor(cursor: Any, config: Config) -> int:
    """The offset a cursor names; -32602 for anything we did not mint for this tools file."""
    fields = grammar.cursor_fields(cursor, 3)
    offset = grammar.decimal(fields[1]) if fields else None
    if fields is None or offset is None:
        raise invalid_params("Invalid cursor")
    if fields[0] != "1" or not 0 < offset < len(config.tools) or fields[2] != config.digest[:16]:
        raise invalid_params("Invalid cursor: it does not belong to the current tools list; list again from the start")
    return offset


def list_page(config: Config, rev: Revision, cursor: Any, page_size: int = PAGE_SIZE) -> dict[str, Any]:
    offset = 0 if cursor is None else decode_cursor(cursor, config)
    tools = config.tools[offset:offset + page_size]
    result: dict[str, Any] = {"tools": [render_tool(t, rev) for t in tools]}
    if offset + page_size < len(config.tools):
        result["nextCursor"] = encode_cursor(offset + page_size, config)
    return result


@dataclass(frozen=True)
class CallRequest:
    """A tools/call's tool and arguments, checked against the tools file."""
    tool: Tool
    arguments: dict[str, Any]


def parse_call(config: Config, params: Mapping[str, Any]) -> CallRequest:
    """Name and argument shape; schema validation is a separate step (its outcome differs per revision)."""
    name = params.get("name")
    if not isinstance(name, str):
        raise invalid_params("tools/call needs a string 'name'")
    tool = config.tool(name)
    if tool is None:
        raise invalid_params(f"Unknown tool: {name}")
    arguments = params.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise invalid_params("tools/call 'arguments' must be an object")
    return CallRequest(tool, arguments)


def render_block(block: Block, rev: Revision) -> dict[str, Any]:
    """A block in the revision's wire form; one the revision lacks becomes a text note."""
    # Imported here: the first answers (the lists) render no result. `from mcpwrap import result`
    # is the cheap form of a function-level import (a third of `from mcpwrap.result import X`).
    from mcpwrap import result

    if isinstance(block, result.Media) and block.kind == "audio" and not rev.has("content.audio"):
        size = len(block.data) * 3 // 4
        block = result.Text(f"[audio output ({block.mime_type}, about {size} bytes) omitted: "
                            f"protocol revision {rev.version} cannot carry audio]")
    elif isinstance(block, result.ResourceLink) and not rev.has("content.resource_link"):
        label = block.title or block.name
        block = result.Text(f"[resource link] {label}: {block.uri}"
                            + (f" ({block.mime_type})" if block.mime_type else "")
                            + (f" - {block.description}" if block.description else ""))
    return result.block_to_json(block)


def render_result(result: ToolResult, rev: Revision) -> dict[str, Any]:
    from mcpwrap import result as results

    out: dict[str, Any] = {"content": [render_block(b, rev) for b in result.content]}
    structured = result.structured
    if structured is not results.NO_STRUCTURED and rev.has("result.structuredContent") and (
            rev.has("structured.any_json") or isinstance(structured, dict)):
        out["structuredContent"] = structured
    out["isError"] = result.is_error
    return out


def result_error(result: ToolResult) -> ProtocolError | None:
    """The JSON-RPC error a result stands for: a command that ended with one of its tool's
    `protocol_error_codes` answers a plain call with it, and fails its task with it (-32603, the
    error result's text as the message, the exit status as data); None for any other result."""
    if not result.protocol_error:
        return None
    return ProtocolError(-32603, result.text[-PROTOCOL_ERROR_CHARS:], {"exitCode": result.exit_code})


def progress_params(token: str | int, progress: float, total: float | None, message: str | None,
                    rev: Revision) -> dict[str, Any]:
    """notifications/progress params; `message` only where the revision defines it."""
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message and rev.has("progress.message"):
        params["message"] = message
    return params
