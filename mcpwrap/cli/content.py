"""`mcpwrap read` and `mcpwrap prompt`: a resource or a prompt, resolved and produced as `serve` would.

Exit 1 when the command behind it failed, 2 when the caller asked for something that is not there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

from mcpwrap.cli.common import (EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, UsageError, assignment, fail, load_tools,
                                output_spool, print_json, print_text)
from mcpwrap.cli.inline import tools_config, without_file
from mcpwrap.cli.output import write_binary


def read(file: str | None, uri: str | None, output: str | None, state_dir: str | None, as_json: bool,
         inline: list[str], describe: list[str]) -> NoReturn:
    """Read a resource, given by its URI or its name (`by_name`), as `serve` would; an output URI gives its
    whole stream (from `offset`, or `length` bytes of it). Text goes to stdout, binary contents to files
    as `call` writes them."""
    import trio

    from mcpwrap.protocol import resources
    from mcpwrap.protocol.revisions import LATEST_LEGACY
    from mcpwrap.protocol.tools import ProtocolError
    from mcpwrap.result import ToolResult
    from mcpwrap.serve import effects

    file, uri = without_file(inline, [file, uri])
    if uri is None:
        raise UsageError("Missing argument 'URI|NAME'.")
    config = tools_config(file, inline, describe)
    uri = by_name(config, uri)
    spool = output_spool(config, state_dir)
    try:
        target = resources.resolve(config, uri, LATEST_LEGACY)
        outcome = (_output_stream(spool, target, uri) if isinstance(target, resources.OutputPage)
                   else trio.run(effects.read, target, spool))
    except ProtocolError as exc:
        _content_failed(exc)
    contents = outcome if isinstance(outcome, list) else []
    if as_json:
        print_json({"contents": [resources.contents_json(c) for c in contents]})
        raise SystemExit(EXIT_OK)
    for item in contents:
        if item.text is not None:
            print_text(item.text)
    write_binary(ToolResult(tuple(c for c in contents if c.blob is not None)), Path(output) if output else None)
    raise SystemExit(EXIT_OK)


def prompt(file: str, name: str, arg: list[str], state_dir: str | None, as_json: bool) -> NoReturn:
    """Get a prompt as `serve` would and print its messages."""
    import trio

    from mcpwrap.protocol import prompts
    from mcpwrap.protocol.revisions import LATEST_LEGACY
    from mcpwrap.protocol.tools import ProtocolError
    from mcpwrap.result import Media, Resource, Text
    from mcpwrap.serve import effects

    config = load_tools(Path(file))
    if config.prompt(name) is None:
        fail(f"no prompt named {name!r} in {file} (prompts: {', '.join(p.name for p in config.prompts) or 'none'})",
             EXIT_USAGE)
    try:
        found, arguments = prompts.parse_get(config, {"name": name, "arguments": dict(
            assignment("--arg", a) for a in arg)})
        blocks = trio.run(effects.prompt_blocks, config, found, arguments, output_spool(config, state_dir),
                          LATEST_LEGACY)
    except ProtocolError as exc:
        _content_failed(exc)
    if as_json:
        print_json(prompts.get_result(found, blocks, LATEST_LEGACY))
        raise SystemExit(EXIT_OK)
    for n, (role, block) in enumerate(blocks):     # a message is text, an image or audio, or a resource it embeds
        if isinstance(block, Resource):
            head = f"[{role}] {block.uri}"
            body = block.text if block.text is not None else f"({block.mime_type or 'binary'} contents: see --json)"
        elif isinstance(block, Media):
            head, body = f"[{role}]", f"({block.mime_type} {block.kind}: see --json)"
        else:
            assert isinstance(block, Text)
            head, body = f"[{role}]", block.text
        print_text(("\n" if n else "") + f"{head}\n{body}")
    raise SystemExit(EXIT_OK)


def by_name(config: Any, given: str) -> str:
    """The URI `read` reads for what the user gave. The two cannot be mistaken: a URI has a scheme
    ("scheme:...", as `check` requires of every resource's), a name never has a ':' (`check` allows
    only A-Z a-z 0-9 _ - .). So text with a ':' is read as a URI, as given; text without names a
    resource, whose URI is read (a usage error naming the resources if none has that name, or if it
    is a template, whose URI needs its arguments filled in)."""
    if ":" in given:
        return given
    named = next((r for r in config.resources if r.name == given), None)
    if named is None:
        fail(f"no resource named {given!r} in {config.path} (resources: "
             f"{', '.join(r.name for r in config.resources) or 'none'}); a URI has a scheme, as in file:///...",
             EXIT_USAGE)
    if named.uri is None:
        fail(f"resource {given!r} is a template: give its URI with the arguments filled in ({named.uri_template})",
             EXIT_USAGE)
    return str(named.uri)


def _output_stream(spool: Any, target: Any, uri: str) -> list[Any]:
    """A kept stream read whole (or the `length` the URI asks for), as one text or blob contents."""
    import base64
    import urllib.parse

    from mcpwrap.protocol.resources import not_found
    from mcpwrap.protocol.revisions import LATEST_LEGACY
    from mcpwrap.protocol.tools import ProtocolError
    from mcpwrap.result import Resource

    wanted = target.length if "length" in urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query) else None
    chunks, offset = [], target.offset
    while wanted is None or offset < target.offset + wanted:
        page = spool.read(target.call, target.stream, offset, target.length)
        if page is None:
            raise not_found(uri, LATEST_LEGACY)
        if page.offset > page.total:
            raise ProtocolError(-32602, f"offset {page.offset} is past the end ({page.total} bytes)", {"uri": uri})
        if not page.data:
            break
        chunks.append(page.data)
        offset += len(page.data)
    data = b"".join(chunks)[:wanted]
    try:
        return [Resource(uri, "text/plain", text=data.decode("utf-8"))]
    except UnicodeDecodeError:
        return [Resource(uri, "application/octet-stream", blob=base64.b64encode(data).decode())]


def _content_failed(exc: Any) -> NoReturn:
    """A protocol error of a read or prompt: the caller's mistake (2), or the command behind it failed (1)."""
    where = f" ({exc.data['uri']})" if isinstance(exc.data, dict) and "uri" in exc.data else ""
    fail(f"{exc.message}{where}", EXIT_TOOL_ERROR if exc.code == -32603 else EXIT_USAGE)
