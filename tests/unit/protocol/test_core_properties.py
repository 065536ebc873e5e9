"""Hypothesis: the framing and the protocol core on arbitrary input (templating: tests/unit/protocol/test_argv.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcpwrap.config import load as config
from mcpwrap.protocol import jsonrpc
from mcpwrap.state import signing
from mcpwrap.protocol.actions import Send
from mcpwrap.protocol.core import Core
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
[resources.r]
uri_template = "r://{a}"
command = ["echo", "{a}"]
args.a = { type = "string", enum = ["x"] }
[prompts.p]
args.a = { required = true, examples = ["x"] }
messages = [{ text = "{a}" }]
""", Path("/tmp/props.toml"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12)
methods = st.sampled_from(["initialize", "ping", "tools/list", "tools/call", "logging/setLevel", "server/discover",
                           "subscriptions/listen", "tasks/get", "tasks/list", "notifications/initialized",
                           "notifications/cancelled", "resources/list", "resources/templates/list", "resources/read",
                           "resources/subscribe", "prompts/list", "prompts/get", "completion/complete", "x"])
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
                                                                   "requestState", "inputResponses", "notifications",
                                                                   "uri", "ref", "argument"]),
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


Requests = dict[bytes, list[tuple[str, bool]]]


def _requests(message: Any) -> Requests:
    """The requests in a message, batch items included: JSON id -> each (method, modern) it was used with.

    Ids are keyed by their JSON text, so 1 and true stay apart as they do on the wire.
    """
    found: Requests = {}
    for item in message if isinstance(message, list) else [message]:
        if isinstance(item, dict) and "id" in item and isinstance(item.get("method"), str):
            params = item.get("params")
            meta = params.get("_meta") if isinstance(params, dict) else None
            modern = (item["method"] != "initialize" and isinstance(meta, dict)
                      and meta.get("io.modelcontextprotocol/protocolVersion") is not None)
            found.setdefault(orjson.dumps(item["id"]), []).append((item["method"], modern))
    return found


def _problem(core: Core, message: dict[str, Any], method: str | None, modern: bool) -> str | None:
    """Why `message` is not a valid answer to a `method` request of that era (None: it is)."""
    rev = "2026-07-28" if modern or "io.modelcontextprotocol/subscriptionId" in str(message) else core.session.rev.version
    codes = core.session.rev.error_codes | {-32021, -32022} if modern else core.session.rev.error_codes
    if "error" in message and message["error"]["code"] not in codes:
        return f"error code {message['error']['code']} is not one of {sorted(codes)}"
    try:
        mcpschema.check(rev, message, method)
    except Exception as exc:            # also a revision without that method's result type at all
        return repr(exc)[:500]
    return None


def _check_sent(core: Core, actions: list[Any], seen: Requests) -> None:
    """Every message sent is valid for at least one request its id was used with (an id can be reused)."""
    for action in actions:
        if not isinstance(action, Send):
            continue
        # A batch's answers are held encoded: judged as the client reads them.
        messages = orjson.loads(jsonrpc.encode(action.message)) if isinstance(action.message, list) else [action.message]
        for message in messages:
            assert message["jsonrpc"] == "2.0"
            assert ("result" in message) + ("error" in message) + ("method" in message) == 1
            asked = seen.get(orjson.dumps(message["id"]), []) if message.get("id") is not None else []
            problems = [_problem(core, message, method, modern) for method, modern in asked or [(None, False)]]
            assert None in problems, problems


# An id reused inside a batch: the ping's empty result must not be judged as the earlier tools/list's.
_REUSED_ID_IN_A_BATCH = [
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
     "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}},
    [{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}],
]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(plausible_messages(), max_size=8))
@example(_REUSED_ID_IN_A_BATCH)
def test_core_answers_anything_with_valid_messages(messages: list[Any]) -> None:
    core = Core(TOOLS, lambda: signing.Keyring(b"s" * 32), lambda: 1000.0)
    seen: Requests = {}
    for message in messages:
        for key, requests in _requests(message).items():
            seen.setdefault(key, []).extend(requests)
        _check_sent(core, core.receive(jsonrpc.decode(orjson.dumps(message))), seen)


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

