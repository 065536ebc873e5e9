"""A result on the terminal: progress on stderr, binary content to files (never to stdout).

Used by `call`, `read` and `tasks result`, which print a result the same way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcpwrap.cli.common import EXIT_USAGE, colour, fail


class ProgressLine:
    """One self-rewriting progress line on a terminal's stderr."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def update(self, progress: float, total: float | None, message: str | None) -> None:
        share = f" {progress / total:.0%}" if total else ""
        sys.stderr.write(f"\r\033[K{colour(self.tool, '1')} {progress:g}{f'/{total:g}' if total else ''}{share}")
        sys.stderr.flush()

    def line(self, text: str) -> None:
        """stderr lines that are not progress still reach the user, above the progress line."""
        sys.stderr.write(f"\r\033[K{text}\n")

    def clear(self) -> None:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()


def _binary_blocks(result: Any) -> list[tuple[str, bytes]]:
    """(MIME type, bytes) of each image, audio or binary-resource block, in order."""
    import base64

    from mcpwrap.result import Media, Resource

    blocks = []
    for block in result.content:
        if isinstance(block, Media):
            blocks.append((block.mime_type, base64.b64decode(block.data)))
        elif isinstance(block, Resource) and block.blob is not None:
            blocks.append((block.mime_type or "application/octet-stream", base64.b64decode(block.blob)))
    return blocks


def write_binary(result: Any, output: Path | None) -> None:
    """Write binary content to files, never to stdout, and say on stderr where each went (or that none came).

    The first block goes to `output`, the n-th to `output` with "-n" before its suffix; without
    `output`, each goes to a new temporary file (0600, as mkstemp makes it) named after its type.
    """
    from mcpwrap.state.durable import write_private

    blocks = _binary_blocks(result)
    if output is not None and not blocks:
        print(f"mcpwrap: no binary content; nothing written to {output}", file=sys.stderr)
    for n, (mime, data) in enumerate(blocks, start=1):
        if output is None:
            import mimetypes      # here: a text-only call should not pay for them
            import tempfile

            fd, name = tempfile.mkstemp(prefix="mcpwrap-", suffix=mimetypes.guess_extension(mime) or ".bin")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            target = Path(name)
        else:
            target = output if n == 1 else output.with_name(f"{output.stem}-{n}{output.suffix}")
            try:
                write_private(target, data)
            except OSError as exc:
                fail(f"cannot write {mime} to {target}: {exc.strerror}", EXIT_USAGE)
        print(f"wrote {mime}, {len(data)} bytes, to {target}", file=sys.stderr)
