"""protocol/jsonrpc: bytes -> a message or an `Invalid` with the code to answer (never an exception),
batches, ids, the depth bound, and `LineReader`'s size cap and resynchronisation."""

from __future__ import annotations

import pytest

from mcpwrap.protocol.jsonrpc import (INVALID_PARAMS, INVALID_REQUEST, MAX_DEPTH, PARSE_ERROR, Batch, Invalid,
                                      LineReader, Notification, Request, Response, decode, decode_line, encode)


def test_each_kind_of_message_is_told_apart() -> None:
    assert decode(b'{"jsonrpc":"2.0","id":1,"method":"ping"}') == Request(1, "ping", {})
    assert decode(b'{"jsonrpc":"2.0","id":"a","method":"m","params":{"x":1}}') == Request("a", "m", {"x": 1})
    assert decode(b'{"jsonrpc":"2.0","method":"notifications/x"}') == Notification("notifications/x", {})
    assert decode(b'{"jsonrpc":"2.0","id":7,"result":{}}') == Response(7, {}, None)
    assert decode(b'{"jsonrpc":"2.0","id":7,"error":{"code":1}}') == Response(7, None, {"code": 1})


@pytest.mark.parametrize(("line", "code", "id"), [
    (b"{not json", PARSE_ERROR, None),
    (b'\xff{"jsonrpc":"2.0"}', PARSE_ERROR, None),
    (b"[]", INVALID_REQUEST, None),
    (b"3", INVALID_REQUEST, None),
    (b'{"id":1,"method":"ping"}', INVALID_REQUEST, 1),
    (b'{"jsonrpc":"1.0","id":"x","method":"ping"}', INVALID_REQUEST, "x"),
    (b'{"jsonrpc":"2.0","id":2,"method":5}', INVALID_REQUEST, 2),
    (b'{"jsonrpc":"2.0","id":3,"method":"m","params":[1]}', INVALID_REQUEST, 3),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":4,"result":{},"error":{}}', INVALID_REQUEST, 4),
    (b'{"jsonrpc":"2.0","id":5,"result":[1]}', INVALID_REQUEST, 5),
])
def test_a_broken_message_is_invalid_with_its_code_and_a_usable_id(line: bytes, code: int, id: object) -> None:
    message = decode(line)
    assert isinstance(message, Invalid) and (message.code, message.id) == (code, id)


def test_a_batch_holds_each_item_classified_on_its_own() -> None:
    batch = decode(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"foo":1},{"jsonrpc":"2.0","method":"n"}]')
    assert isinstance(batch, Batch)
    assert [type(m) for m in batch.items] == [Request, Invalid, Notification]


def test_a_message_nested_past_the_bound_is_refused_with_its_id() -> None:
    deep = b'{"jsonrpc":"2.0","id":9,"method":"m","params":{"a":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}}"
    message = decode(deep)
    assert isinstance(message, Invalid) and (message.code, message.id) == (INVALID_PARAMS, 9)
    ok = b'{"jsonrpc":"2.0","id":9,"method":"m","params":{"a":' + b"[" * 50 + b"]" * 50 + b"}}"
    assert isinstance(decode(ok), Request)
    in_batch = decode(b"[" + deep + b"]")
    assert isinstance(in_batch, Batch) and isinstance(in_batch.items[0], Invalid)


def test_encode_is_one_line_and_an_oversized_line_is_invalid() -> None:
    line = encode({"jsonrpc": "2.0", "id": 1, "result": {"text": "a\nb"}})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line[:-1]) == Response(1, {"text": "a\nb"}, None)
    too_large = decode_line(None)
    assert isinstance(too_large, Invalid) and too_large.code == INVALID_REQUEST and "too large" in too_large.message


def test_line_reader_splits_caps_and_resynchronises() -> None:
    reader = LineReader(max_line=8)
    assert reader.feed(b"ab\r\n\n  \ncd") == [b"ab"]
    assert reader.feed(b"\n") == [b"cd"]
    assert reader.feed(b"0123456789") == [None]           # over the cap: said once, never buffered whole
    assert reader.feed(b"0123456789") == []
    assert reader.feed(b"tail\nok\n") == [b"ok"]          # the rest of the long line is dropped
    assert reader.feed(b"123456789\n") == [None]
    assert reader.feed(b"last") == [] and reader.finish() == [b"last"]
    assert reader.finish() == []
