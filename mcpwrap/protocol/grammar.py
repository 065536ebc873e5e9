"""The one grammar of what mcpwrap parses out of client text: numbers, ids, cursors, header tokens. Pure.

A client's text is never handed to a parser looser or stricter than the check before it
(`str.isdigit()` admits '²', which `int()` refuses; `int()` admits '٣', ' 1' and '1_0'; a
`$` admits a trailing newline). Each parser here is total: it returns the value, or None (False)
for anything outside its grammar, and never raises, whatever the text. Every grammar is ASCII
and bounded in length, so a value is refused before any conversion can cost more than the
bound. The callers turn None into their refusal (-32602, not found, 400).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from typing import Any

MAX_DIGITS = 18                          # fits an int64 whatever the digits: offsets, lengths, keys
_DIGITS = re.compile(r"[0-9]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")   # JSON's number, ASCII only
_HEX = re.compile(r"[0-9a-f]+")
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_PRINTABLE = re.compile(r"[\x20-\x7e]*")
_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")       # RFC 9110 §12.4.2
MAX_NUMBER_CHARS = 64


def decimal(text: Any, max_digits: int = MAX_DIGITS) -> int | None:
    """A non-negative integer in 1..max_digits ASCII digits (leading zeros allowed); None otherwise."""
    if not isinstance(text, str) or not 0 < len(text) <= max_digits or not _DIGITS.fullmatch(text):
        return None
    return int(text)


def integer(text: Any, max_digits: int = MAX_DIGITS) -> int | None:
    """An optional '-' and 1..max_digits ASCII digits; None otherwise."""
    if isinstance(text, str) and text.startswith("-"):
        value = decimal(text[1:], max_digits)
        return None if value is None else -value
    return decimal(text, max_digits)


def number(text: Any) -> float | None:
    """A JSON number (ASCII, bounded length) whose value is finite; None for 'nan', 'inf', '1e999', '١'..."""
    if not isinstance(text, str) or len(text) > MAX_NUMBER_CHARS or not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def hex_id(text: Any, length: int) -> bool:
    """Exactly `length` lowercase ASCII hex digits (no trailing newline, no other case)."""
    return isinstance(text, str) and len(text) == length and _HEX.fullmatch(text) is not None


def token(text: Any, min_length: int, max_length: int) -> bool:
    """A base64url-alphabet token of bounded length (ids mcpwrap made with `secrets.token_urlsafe`)."""
    return isinstance(text, str) and min_length <= len(text) <= max_length and _TOKEN.fullmatch(text) is not None


def encode_cursor(*fields: object) -> str:
    """An opaque cursor: the fields joined by ':' as unpadded base64url (read back by `cursor_fields`)."""
    return base64.urlsafe_b64encode(":".join(map(str, fields)).encode()).decode().rstrip("=")


def cursor_fields(cursor: Any, count: int, max_length: int = 128) -> list[str] | None:
    """The `count` fields of a cursor `encode_cursor` made: unpadded base64url of at most `max_length`
    characters whose text is printable ASCII; None for anything else."""
    if not isinstance(cursor, str) or len(cursor) > max_length or not _B64URL.fullmatch(cursor):
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        return None
    text = raw.decode("ascii", "replace")
    if not _PRINTABLE.fullmatch(text):
        return None
    fields = text.split(":")
    return fields if len(fields) == count else None


def header_value(value: str) -> str:
    """A header's value without its optional whitespace (RFC 9110: SP and HTAB only, nothing Unicode calls space)."""
    return value.strip(" \t")


def qvalue(text: str) -> float | None:
    """An Accept weight (RFC 9110 qvalue: 0 to 1, at most three decimals); None when malformed."""
    text = header_value(text)
    return float(text) if _QVALUE.fullmatch(text) else None
