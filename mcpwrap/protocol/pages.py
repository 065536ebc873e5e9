"""A call's kept output as the protocol names it: the URI of each stream, and a page of one. Pure.

A stream is named `mcpwrap://output/<call>/<stream>`: `<call>` is 128 random bits in lowercase hex
and `<stream>` is stdout or stderr, both checked (`valid`) before anything is built from them,
since they come back from the client. `run.spool` keeps the bytes under these names; the
resources decisions read them page by page.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpwrap.protocol import grammar

STREAMS = ("stdout", "stderr")
CALL_ID_LENGTH = 32                    # 128 bits in lowercase hex
URI_PREFIX = "mcpwrap://output/"


def output_uri(call: str, stream: str) -> str:
    return f"{URI_PREFIX}{call}/{stream}"


def valid(call: str, stream: str) -> bool:
    return grammar.hex_id(call, CALL_ID_LENGTH) and stream in STREAMS


@dataclass(frozen=True)
class Page:
    """Bytes of a kept stream from `offset`, and the stream's size when they were read."""
    data: bytes
    offset: int
    total: int                             # the stream's size now
