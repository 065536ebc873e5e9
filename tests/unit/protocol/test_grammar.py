"""The grammar of client text (`protocol/grammar.py`) and every parser of it, fuzzed over all of Unicode.

Each parser is total (never raises) and strict: what it accepts is exactly ASCII in its grammar, so
a check can never be looser than the conversion after it ('²' passed `isdigit()` and broke `int()`).
The URI, cursor, id and header parsers are driven through their public names with the full Unicode
range and percent-encoded bytes (`%` and any two characters, invalid UTF-8 included).
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcpwrap.config import load as config
from mcpwrap.protocol import pages
from mcpwrap.protocol import http_binding as binding, grammar, prompts, resources, tasking, tools
from mcpwrap.protocol.revisions import LATEST_LEGACY
from mcpwrap.protocol.tools import ProtocolError

NEAR_MISSES = ["²", "1³", "٣", "०", "０", "𝟗", "1_0", " 1", "1 ", "1\n", "+1", "0x1", "1e3", "nan", "inf",
               "infinity", "1" * 19, "", "-", "1.", ".5", "\u00a01"]
texts = st.text() | st.sampled_from(NEAR_MISSES) | st.text("0123456789²³٣０-+.eE_ \n", max_size=25)
percent = st.lists(st.one_of(st.text(max_size=2), st.integers(0, 255).map(lambda b: f"%{b:02X}"),
                             st.tuples(st.characters(), st.characters()).map(lambda p: "%" + "".join(p))),
                   max_size=8).map("".join)
CFG = config.loads(b"""
[tools.a]
command = ["echo"]
[tools.b]
command = ["echo"]
[tools.c]
command = ["echo"]
[resources.s]
uri = "s://x"
command = ["echo"]
[resources.n]
uri_template = "n://{i}/{f}{?flag}"
command = ["echo", "{i}", "{f}", "{flag}"]
args.i = { type = "integer" }
args.f = { type = "number" }
args.flag = { type = "boolean", default = false }
[prompts.p]
messages = [{ text = "x" }]
[prompts.q]
messages = [{ text = "y" }]
""", Path("/tmp/grammar.toml"))


# --- the grammar itself ---------------------------------------------------------------------------
@given(texts)
def test_decimal_is_ascii_digits_of_bounded_length(text: str) -> None:
    value = grammar.decimal(text)
    ascii_digits = re.fullmatch(r"[0-9]{1,18}", text, re.ASCII) is not None
    assert (value is not None) == ascii_digits
    if value is not None:
        assert value == int(text) and 0 <= value < 10 ** 18


@given(texts)
def test_integer_and_number_are_json_numbers_in_ascii(text: str) -> None:
    whole = grammar.integer(text)
    assert (whole is not None) == (re.fullmatch(r"-?[0-9]{1,18}", text, re.ASCII) is not None)
    value = grammar.number(text)
    if value is not None:
        assert text.isascii() and value == float(text) and value not in (float("inf"), float("-inf"))
        assert value == value                     # never nan


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_refused(text: str) -> None:
    assert grammar.decimal(text) is None and grammar.integer(text) is None
    assert text in ("1e3", "1" * 19) or grammar.number(text) is None     # 1e3 is a JSON number; 19 digits too


@given(texts, st.integers(1, 40))
def test_ids_and_tokens(text: str, length: int) -> None:
    assert grammar.hex_id(text, length) == (re.fullmatch(f"[0-9a-f]{{{length}}}", text) is not None)
    assert grammar.token(text, 1, length) == (re.fullmatch(f"[A-Za-z0-9_-]{{1,{length}}}", text) is not None)


@given(st.lists(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e).filter(lambda c: c != ":"),
                        max_size=10), min_size=1, max_size=4))
def test_cursor_round_trip(fields: list[str]) -> None:
    cursor = grammar.encode_cursor(*fields)
    assert grammar.cursor_fields(cursor, len(fields), max_length=1000) == fields
    assert grammar.cursor_fields(cursor, len(fields) + 1, max_length=1000) is None


@given(texts | percent | st.binary().map(lambda b: b.decode("latin-1")))
def test_cursor_fields_take_only_base64url_of_printable_ascii(text: str) -> None:
    fields = grammar.cursor_fields(text, 3)
    if fields is not None:
        assert re.fullmatch(r"[A-Za-z0-9_-]{0,128}", text) and all(f.isascii() and f.isprintable() for f in fields)


@given(texts)
def test_header_values_and_qvalues(text: str) -> None:
    assert grammar.header_value(text) == text.strip(" \t")
    q = grammar.qvalue(text)
    assert q is None or (0.0 <= q <= 1.0 and grammar.header_value(text).isascii())


def test_header_whitespace_is_only_sp_and_htab() -> None:
    assert grammar.header_value(" \t2025-11-25\t ") == "2025-11-25"
    assert grammar.header_value("2025-11-25\u00a0") == "2025-11-25\u00a0"      # NBSP is not HTTP whitespace
    assert [grammar.qvalue(q) for q in ("1", "0.5", "0.125", "1.000", "1.5", "nan", "inf", "1e0", "٠.5")] == \
        [1.0, 0.5, 0.125, 1.0, None, None, None, None, None]


# --- the parsers of client text, through their public names ---------------------------------------
def _refused(call: Any) -> ProtocolError | None:
    """Run a parser: its deliberate refusal (a ProtocolError) or None; anything else fails the test."""
    try:
        call()
    except ProtocolError as error:
        return error
    return None


@settings(max_examples=300)
@given(st.sampled_from(["mcpwrap://output/" + "a" * 32 + "/stdout", "mcpwrap://output/" + "a" * 32 + "/stderr",
                        "n://", "s://"]), texts | percent, texts | percent)
@example("n://", "[", "")                  # an unclosed IPv6 host once made urlsplit raise (-32603)
def test_resolve_refuses_or_reads_any_uri(prefix: str, middle: str, query: str) -> None:
    for uri in (prefix + middle, f"{prefix}?{middle}", f"{prefix}?offset={query}&length={middle}",
                f"{prefix}{middle}/{query}?flag={query}", f"{prefix}?{middle}={query}"):
        for rev in (LATEST_LEGACY,):
            try:
                target = resources.resolve(CFG, uri, rev)
            except ProtocolError:
                continue
            if isinstance(target, resources.OutputPage):
                assert pages.valid(target.call, target.stream) and 0 < target.length <= resources.PAGE_BYTES
                assert 0 <= target.offset < 10 ** 18
                query_text = uri.partition("?")[2]
                for value in urllib.parse.parse_qs(query_text, keep_blank_values=True).values():
                    assert all(v.isascii() and v.isdigit() for v in value)
            else:
                for value in target.arguments.values():
                    assert isinstance(value, (str, bool)) or value == value and abs(value) != float("inf")


def test_output_page_numbers_are_ascii_digits() -> None:
    base = "mcpwrap://output/" + "a" * 32 + "/stdout"
    for bad in ("offset=²", "offset=٣", "offset=%C2%B2", "length=+1", "offset=1_0", "offset=%20" + "1",
                "offset=" + "9" * 19, "offset=1&offset=2"):
        assert _refused(lambda: resources.resolve(CFG, f"{base}?{bad}", LATEST_LEGACY)).code == -32602, bad
    assert resources.resolve(CFG, f"{base}?offset=%32&length=007", LATEST_LEGACY) == \
        resources.OutputPage("a" * 32, "stdout", 2, 7)              # percent-encoded ASCII digits are digits


def test_a_call_id_is_exactly_32_lowercase_hex() -> None:
    for call in ("a" * 32 + "\n", "A" * 32, "a" * 31, "a" * 33, "٣" * 32):
        assert not pages.valid(call, "stdout"), repr(call)
        uri = f"mcpwrap://output/{call}/stdout"
        assert _refused(lambda: resources.resolve(CFG, uri, LATEST_LEGACY)) is not None, repr(call)
    assert pages.valid("0123456789abcdef" * 2, "stdout") and not pages.valid("0" * 32, "stdout\n")


def test_template_numbers_keep_json_grammar() -> None:
    target = resources.resolve(CFG, "n://-12/2.5e3?flag=true", LATEST_LEGACY)
    assert isinstance(target, resources.Source) and target.arguments == {"i": -12, "f": 2500.0, "flag": True}
    for uri in ("n://١/1", "n://1/nan", "n://1/1e999", "n://1/infinity", "n://1_0/1", "n://%201/1", "n://1/%EF%BC%91"):
        error = _refused(lambda: resources.resolve(CFG, uri, LATEST_LEGACY))
        assert error is not None and error.code == -32602, uri


@settings(max_examples=300)
@given(texts | percent | st.integers() | st.none())
def test_every_cursor_parser_refuses_or_pages(cursor: Any) -> None:
    for parse in (lambda: tools.list_page(CFG, LATEST_LEGACY, cursor, 1),
                  lambda: resources.list_resources(CFG, LATEST_LEGACY, cursor, 1),
                  lambda: resources.list_templates(CFG, LATEST_LEGACY, cursor, 1),
                  lambda: prompts.list_prompts(CFG, LATEST_LEGACY, cursor, 1),
                  lambda: tasking.decode_cursor(cursor)):
        error = _refused(parse)
        assert error is None or error.code == -32602


@settings(max_examples=300)
@given(st.lists(texts, min_size=1, max_size=4))
def test_a_cursor_made_of_near_miss_numbers_is_refused(fields: list[str]) -> None:
    """A cursor whose numbers are not ASCII digits is never taken, even when `int()` would read them."""
    for kind, count in (("1", 3), ("resources", 3), ("2", 4)):
        made = [kind, *fields][:count] + [""] * (count - len(fields) - 1)
        cursor = grammar.encode_cursor(*made)
        numbers = made[1:3] if kind == "2" else made[1:2]
        if all(re.fullmatch(r"[0-9]{1,18}", n) for n in numbers):
            continue
        parse = {"1": lambda: tools.decode_cursor(cursor, CFG),
                 "resources": lambda: resources.list_resources(CFG, LATEST_LEGACY, cursor, 1),
                 "2": lambda: tasking.decode_cursor(cursor)}[kind]
        error = _refused(parse)
        assert error is not None and error.code == -32602, made


def test_cursors_round_trip_and_unicode_digits_are_refused() -> None:
    assert tools.decode_cursor(tools.encode_cursor(1, CFG), CFG) == 1
    task = tasking.new_id()
    assert tasking.decode_cursor(tasking.encode_cursor(12, 3, task)) == (12, 3, task)
    for cursor in (grammar.encode_cursor(1, "١", CFG.digest[:16]), grammar.encode_cursor(2, "٣", 0, task),
                   grammar.encode_cursor(1, " 1", CFG.digest[:16]), "!" + tools.encode_cursor(1, CFG)):
        assert _refused(lambda: tools.decode_cursor(cursor, CFG)) is not None
        assert _refused(lambda: tasking.decode_cursor(cursor)) is not None


@given(texts | percent | st.binary().map(lambda b: b.decode("latin-1")))
def test_task_ids_are_base64url_of_22_or_23(text: str) -> None:
    ok = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{22}|[A-Za-z0-9_-]{22}", text, re.ASCII) is not None
    assert tasking.valid_id(text) == ok


@given(st.binary(max_size=40).map(lambda b: b.decode("latin-1")), st.binary(max_size=40).map(lambda b: b.decode("latin-1")))
def test_header_parsers_never_raise(accept: str, version: str) -> None:
    """Header values reach us decoded as latin-1: every byte a client can put there."""
    for media in ("application/json", "text/event-stream"):
        binding.accepts(accept, media)
    refusal = binding.legacy_version_refusal({"mcp-protocol-version": version})
    assert (refusal is None) == (version.strip(" \t") in binding.ALL_VERSIONS)
    binding.decode_value(version)


def test_header_values_do_not_trim_unicode_spaces() -> None:
    assert binding.legacy_version_refusal({"mcp-protocol-version": "2025-11-25\u00a0"}).status == 400
    assert binding.legacy_version_refusal({"mcp-protocol-version": "\t2025-11-25 "}) is None
    assert not binding.accepts("application/json;q=infinity", "application/json")
    assert not binding.accepts("application/json;q=nan", "application/json")
    assert not binding.accepts("application/json\u0085", "application/json")
    assert binding.accepts("application/json;q=0.5", "application/json")
