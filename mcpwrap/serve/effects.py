"""The effects behind resources, prompts and completions: read a file, run a command, read a page.

Commands go through `runner.run` like a tool call (argv templating and its
injection rules, timeout, process-group kill, output cap); files are read only
when they are regular files, up to FILE_LIMIT. A failure is a `ProtocolError`
-32603 naming what failed; the core sends it for the request.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path

import trio

from mcpwrap.config.load import read_regular_file
from mcpwrap.config.model import Config, Prompt, Tool
from mcpwrap.protocol import resources
from mcpwrap.protocol.pages import Page
from mcpwrap.protocol.prompts import fill
from mcpwrap.protocol.revisions import Revision
from mcpwrap.protocol.tools import ProtocolError
from mcpwrap.result import Block, Resource, Text, ToolResult
from mcpwrap.run import process as runner
from mcpwrap.run.spool import Spool

FILE_LIMIT = 8 * 1024 * 1024
COMPLETE_TIMEOUT_S = 10.0
TEXT_TYPES = ("application/json", "application/xml", "application/toml", "application/yaml",
              "application/javascript", "application/x-sh")


async def read(target: resources.Target, spool: Spool) -> Page | list[Resource] | None:
    if isinstance(target, resources.OutputPage):
        return await trio.to_thread.run_sync(spool.read, target.call, target.stream, target.offset, target.length)
    resource = target.resource
    if resource.path is not None:
        return [await trio.to_thread.run_sync(_file_contents, resource.path, target.uri, resource.mime_type)]
    assert resource.tool is not None
    result = await _run(resource.tool, target.arguments, f"resource '{resource.name}'")
    block = result.content[0] if result.content else Text("")
    if isinstance(block, Resource):
        return [Resource(target.uri, resource.mime_type, blob=block.blob)]
    return [Resource(target.uri, resource.mime_type, text=result.text)]


def _file_contents(path: Path, uri: str, mime: str | None) -> Resource:
    try:
        data = read_regular_file(path, FILE_LIMIT)
    except OSError as exc:
        raise ProtocolError(-32603, f"cannot read {path}: {exc.strerror or exc}", {"uri": uri}) from None
    if mime and (mime.startswith("text/") or mime in TEXT_TYPES or mime.endswith(("+json", "+xml"))):
        try:
            return Resource(uri, mime, text=data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return Resource(uri, mime, blob=base64.b64encode(data).decode())


async def _run(tool: Tool, arguments: Mapping[str, object], what: str) -> ToolResult:
    try:
        result = await runner.run(tool, arguments)
    except runner.ArgumentError as exc:
        raise ProtocolError(-32602, f"{what}: {exc}; nothing ran") from None
    if result.is_error:
        raise ProtocolError(-32603, f"{what} failed: {result.text[-2000:]}")
    return result


async def prompt_blocks(config: Config, prompt: Prompt, arguments: Mapping[str, str], spool: Spool,
                        rev: Revision) -> list[tuple[str, Block]]:
    """Each message as a content block: text filled in, a resource read, a command's output."""
    blocks: list[tuple[str, Block]] = []
    for i, message in enumerate(prompt.messages):
        if message.text is not None:
            blocks.append((message.role, Text(fill(message.text, arguments))))
        elif message.resource is not None:
            uri = resources.expand(message.resource, arguments)
            outcome = await read(resources.resolve(config, uri, rev), spool)
            if not isinstance(outcome, list) or not outcome:
                raise ProtocolError(-32603, f"prompt '{prompt.name}' embeds {uri}, which is gone")
            blocks += [(message.role, contents) for contents in outcome]
        else:
            assert message.tool is not None
            result = await _run(message.tool, arguments, f"prompt '{prompt.name}' message {i}")
            blocks.append((message.role, Text(result.text)))
    return blocks


async def complete(config: Config, command: tuple[str, ...]) -> list[str]:
    """The lines a `complete` command prints, run in the tools file's directory."""
    tool = Tool(name="complete", description="", args=(), command=command, shell=None,
                cwd=config.path.resolve().parent, env={}, timeout_s=COMPLETE_TIMEOUT_S,
                max_output=1024 * 1024, output="text")
    result = await _run(tool, {}, f"complete command {command[0]!r}")
    return [line.strip() for line in result.text.splitlines() if line.strip()]
