"""Hypothesis: the framing and the protocol core on arbitrary input (templating: tests/test_templating.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpwrap import config, jsonrpc, signing
from mcpwrap.protocol.core import Core, Send
from tests import mcpschema
from tests.harness import modern_meta

TOOLS = config.loads(b"""
[tools.t]
command = ["prog", "{a}", "--opt={a}", "x{a}y", "--", "{a}", "{b}"]
args.a = { type = "string" }
args.b = { type = "array", items = { type = "string" } }
[tools.c]
command = ["echo", "{m}"]
confirm = "sure {m}?"
args.m = { type = "string", elicit = true }
""", Path("/tmp/props.toml"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12)
methods = st.sampled_from(["initialize", "ping", "tools/list", "tools/call", "logging/setLevel", "server/discover",
                           "subscriptions/listen", "tasks/get", "tasks/list", "notifications/initialized",
                           "notifications/cancelled", "resources/list", "x"])
versions = st.sampled_from(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28", "1999-01-01"])


@st.composite
def plausible_messages(draw: Any) -> Any:
    """JSON-RPC-shaped values, often valid, sometimes broken in one place."""
    message: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0"]))}
    method = draw(methods)
    message["method"] = method
    if not method.startswith("notifications/") or draw(st.booleans()):
        message["id"] = draw(st.integers(0, 5) | st.text(max_size=3) | st.none() | st.booleans())
    params: dict[str, Any] = draw(st.dictionaries(st.sampled_from(["name", "arguments", "cursor", "level", "requestId",
                                                                   "protocolVersion", "capabilities", "task",
                                                                   "requestState", "inputResponses", "notifications"]),
                                                  json_values, max_size=4))
    if method == "tools/call" and draw(st.booleans()):
        params.update(name=draw(st.sampled_from(["t", "c", "nope"])), arguments=draw(json_values))
    if method == "initialize":
        params.update(protocolVersion=draw(versions), capabilities={"elicitation": {}},
                      clientInfo={"name": "h", "version": "1"})
    if draw(st.booleans()):
        meta = modern_meta(draw(st.sampled_from([{}, {"elicitation": {}}])))
        meta["io.modelcontextprotocol/protocolVersion"] = draw(versions)
        params["_meta"] = meta
    message["params"] = params
    return draw(st.sampled_from([message, message, message, [message], draw(json_values)]))


def _check_sent(core: Core, actions: list[Any], seen: dict[Any, tuple[str, bool]]) -> None:
    for action in actions:
        if not isinstance(action, Send):
            continue
        messages = action.message if isinstance(action.message, list) else [action.message]
        for message in messages:
            assert message["jsonrpc"] == "2.0"
            assert ("result" in message) + ("error" in message) + ("method" in message) == 1
            method, modern = seen.get(message["id"], (None, False)) if message.get("id") is not None else (None, False)
            rev = "2026-07-28" if modern or "io.modelcontextprotocol/subscriptionId" in str(message) else core.session.rev.version
            if "error" in message:
                assert message["error"]["code"] in (core.session.rev.error_codes | {-32021, -32022} if modern
                                                    else core.session.rev.error_codes)
            mcpschema.check(rev, message, method)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(plausible_messages(), max_size=8))
def test_core_answers_anything_with_valid_messages(messages: list[Any]) -> None:
    core = Core(TOOLS, lambda: signing.Keyring(b"s" * 32), lambda: 1000.0)
    seen: dict[Any, tuple[str, bool]] = {}
    for message in messages:
        raw = orjson.dumps(message)
        decoded = jsonrpc.decode(raw)
        if isinstance(message, dict) and "id" in message and isinstance(message.get("method"), str):
            params = message.get("params") or {}
            seen[message["id"]] = (message["method"], message["method"] != "initialize"
                                   and isinstance(params.get("_meta"), dict)
                                   and params["_meta"].get("io.modelcontextprotocol/protocolVersion") is not None)
        _check_sent(core, core.receive(decoded), seen)


@given(st.binary(max_size=300))
def test_framing_never_raises(data: bytes) -> None:
    message = jsonrpc.decode(data)
    assert message is not None


@given(st.lists(st.binary(max_size=40), max_size=20), st.integers(1, 64))
def test_line_reader_is_chunking_independent(chunks: list[bytes], split: int) -> None:
    data = b"".join(chunks)
    whole = jsonrpc.LineReader(max_line=50)
    expected = whole.feed(data) + whole.finish()
    pieces = jsonrpc.LineReader(max_line=50)
    got: list[bytes | None] = []
    for i in range(0, len(data), split):
        got += pieces.feed(data[i:i + split])
    got += pieces.finish()
    assert [g for g in got if g is not None] == [e for e in expected if e is not None]

