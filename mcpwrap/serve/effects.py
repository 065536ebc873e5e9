"""The effects behind calls, resources, prompts and completions: resolve a call's path arguments,
spend a requestState's nonce, read a file, run a command, read a page.

Commands go through `runner.run` like a tool call (arguments placed by `run.arguments`, argv
templating and its injection rules, timeout, process-group kill, output cap); files are read only
when they are regular files, up to FILE_LIMIT. A failure is a `ProtocolError` -32603 naming what
failed (-32602 for arguments refused); the core sends it for the request. The nonce ledger is made
when a nonce is first spent, so a server whose clients never retry a requestState never touches it.
"""

from __future__ import annotations

import base64
import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from mcpwrap.config.load import read_regular_file
from mcpwrap.config.model import Config, Prompt, Tool
from mcpwrap.protocol import resources
from mcpwrap.protocol.actions import Once, ResolvePaths
from mcpwrap.protocol.asking import Resolution
from mcpwrap.protocol.pages import Page
from mcpwrap.protocol.prompts import fill
from mcpwrap.protocol.revisions import Revision
from mcpwrap.protocol.tools import ProtocolError
from mcpwrap.result import Block, Media, Resource, Text, ToolResult
from mcpwrap.run import process as runner
from mcpwrap.run.arguments import place, resolve_paths
from mcpwrap.run.spool import Spool

if TYPE_CHECKING:
    from mcpwrap.state.signing import NonceLedger

FILE_LIMIT = 8 * 1024 * 1024
TEXT_TYPES = ("application/json", "application/xml", "application/toml", "application/yaml",
              "application/javascript", "application/x-sh")


def resolved(action: ResolvePaths) -> Resolution:
    """A call's path arguments resolved, for `Core.paths_resolved`."""
    return resolve_paths(action.tool, action.arguments)


def spend(state_dir: Path, once: Once) -> bool | OSError:
    """Record `once`'s nonce as used in the ledger every process on `state_dir` shares, just before the
    run it authorises starts: True for its first use (the run may start); else what `Core.once_refused`
    takes, False when it was used already, the OSError when the ledger cannot keep the record."""
    try:
        return _ledger(state_dir).consume(once.nonce, once.expires_at, time.time())
    except OSError as exc:                # `LedgerError` is one
        return exc


@functools.cache
def _ledger(state_dir: Path) -> NonceLedger:
    """One ledger per state directory and process (its sweeps are paced per ledger), made at the first use."""
    from mcpwrap.state.signing import NonceLedger

    return NonceLedger(state_dir)


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
    placed, problems = place(tool, arguments)
    if problems:
        raise ProtocolError(-32602, f"{what}: {'; '.join(problems)}; nothing ran")
    try:
        result = await runner.run(tool, placed)
    except runner.ArgumentError as exc:
        raise ProtocolError(-32602, f"{what}: {exc}; nothing ran") from None
    if result.is_error:
        raise ProtocolError(-32603, f"{what} failed: {result.text[-2000:]}")
    return result


async def prompt_blocks(config: Config, prompt: Prompt, arguments: Mapping[str, str], spool: Spool,
                        rev: Revision) -> list[tuple[str, Block]]:
    """Each message as a content block: text filled in, a resource read, a command's output (as text, or
    the image or audio block its `output` names)."""
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
            media = result.content[0] if message.tool.output != "text" and result.content else None
            blocks.append((message.role, media if isinstance(media, Media) else Text(result.text)))
    return blocks


async def complete(command: Tool) -> list[str]:
    """The lines a `complete` command prints (it runs as every command of the file does: `command.cwd`)."""
    result = await _run(command, {}, f"complete command {command.name}")
    return [line.strip() for line in result.text.splitlines() if line.strip()]
