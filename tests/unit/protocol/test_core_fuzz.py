"""Hypothesis: `Core.receive` driven with arbitrary client text and JSON in every field of every method.

Both eras in one core: a legacy session after `initialize` (a revision drawn per example) and
2026-07-28 requests with the required `_meta`. Every field a client fills (ids, params, `_meta`,
cursors, URIs, names, arguments, task ids, an elicitation's answer) is drawn from the full Unicode
range, percent-encoded bytes, near-miss digits (², ٣, ０, 1_0, " 1") and arbitrary JSON values. The
driver's part is played in memory: every call, read, prompt, completion and task operation is
settled at once. Promised: `receive` never raises, every request gets exactly one answer with a
result or an error of a JSON-RPC code, and no answer is an internal error (-32603): the core's
catch-all (`Core.receive`) is a backstop, never the way an input is refused.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcpwrap.config import load as config
from mcpwrap.protocol import jsonrpc
from mcpwrap.state import signing
from mcpwrap.protocol.actions import Complete, GetPrompt, ReadResource, Send, StartCall, TaskOp
from mcpwrap.protocol.core import Core
from mcpwrap.protocol.resources import OutputPage
from mcpwrap.protocol.revisions import TASKS_EXTENSION
from mcpwrap.protocol.task_requests import TaskFound, TaskNotFound
from mcpwrap.protocol.tasking import TaskRecord, new_id
from mcpwrap.result import Resource as Contents
from mcpwrap.result import Text, ToolResult
from mcpwrap.protocol.pages import Page
from tests.harness import modern_meta

TOOLS = config.loads(b"""
[tools.echo]
command = ["echo", "{msg}"]
args.msg = { type = "string" }
[tools.num]
command = ["echo", "{n}", "{x}", "{b}"]
args.n = { type = "integer", minimum = 0 }
args.x = { type = "number" }
args.b = { type = "boolean", default = false }
[tools.deploy]
command = ["echo", "{target}"]
confirm = "Deploy to {target}?"
args.target = { type = "string", enum = ["staging", "prod"] }
[tools.ask]
command = ["echo", "{name}", "{count}"]
args.name = { type = "string", elicit = true }
args.count = { type = "integer", default = 1, elicit = true }
[tools.sh]
shell = 'printf "%s" "$MCP_ARG_TEXT"'
args.text = { type = "string" }
[tools.job]
command = ["echo", "{n}"]
task = "optional"
args.n = { type = "integer" }
[tools.always]
command = ["echo"]
task = "always"
[resources.status]
uri = "svc://status"
command = ["echo", "ok"]
[resources.log]
uri_template = "git://log/{branch}{?limit}"
command = ["echo", "{branch}", "{limit}"]
args.branch = { type = "string", pattern = "^[a-z]+$", examples = ["main"] }
args.limit = { type = "integer", minimum = 1, default = 5 }
[resources.num]
uri_template = "n://{i}/{f}{?flag}"
command = ["echo", "{i}", "{f}", "{flag}"]
args.i = { type = "integer" }
args.f = { type = "number" }
args.flag = { type = "boolean", default = false }
[prompts.p]
args.a = { required = true, examples = ["x", "y"] }
messages = [{ text = "{a}" }]
[prompts.q]
args.b = { complete = ["echo", "b"] }
messages = [{ command = ["echo", "{b}"] }]
""", Path("/tmp/fuzz.toml"))
PAGE_SIZE = 2                              # small pages: every list has real cursors to mutate
LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
METHODS = ["ping", "tools/list", "tools/call", "logging/setLevel", "server/discover", "subscriptions/listen",
           "resources/list", "resources/templates/list", "resources/read", "resources/subscribe",
           "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete", "tasks/get",
           "tasks/result", "tasks/list", "tasks/cancel", "tasks/update", "initialize", "nope/nope"]
DIGEST = TOOLS.digest[:16]

# --- client text -------------------------------------------------------------------------------
unicode_text = st.text(max_size=24)                # every code point a JSON string can carry
NEAR_MISSES = ["²", "1³", "¹⁰", "٣", "０", "𝟗", "1_0", " 1", "1 ", "+1", "-1", "0x1", "1e3", "1e999", "nan", "inf", "1" * 40, ""]
near_digits = st.sampled_from(NEAR_MISSES) | st.text(st.sampled_from("0123456789²³¹٣०０𝟗_ -+.eExX\u00a0\t"), max_size=6)
percent = st.lists(st.one_of(st.text(max_size=2), st.integers(0, 255).map(lambda b: f"%{b:02X}"),
                             st.tuples(st.characters(codec="utf-8"), st.characters(codec="utf-8")).map(lambda p: "%" + "".join(p))),
                   max_size=6).map("".join)
client_text = st.one_of(unicode_text, near_digits, percent)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | client_text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(client_text, children, max_size=3),
    max_leaves=8)


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


hex_ids = st.text("0123456789abcdef", min_size=32, max_size=32)


def queries(*keys: str) -> st.SearchStrategy[str]:
    """A query string of these keys (a near-miss number, percent-encoded bytes), or any text at all."""
    pairs = st.tuples(st.sampled_from(keys), near_digits | near_digits | percent).map("=".join)
    return st.lists(pairs, min_size=1, max_size=2).map("&".join) | client_text


query = queries("limit", "flag")
output_pages = st.builds(lambda c, s, q: f"mcpwrap://output/{c}/{s}?{q}", hex_ids,
                         st.sampled_from(["stdout", "stderr"]), queries("offset", "length"))
uris = st.one_of(
    output_pages, output_pages, output_pages,
    st.builds(lambda c, s: f"mcpwrap://output/{c}/{s}", hex_ids, st.sampled_from(["stdout", "stderr"])),
    st.builds(lambda c, s: f"mcpwrap://output/{c}/{s}", client_text, client_text),
    st.builds(lambda b, q: f"git://log/{b}" + (f"?{q}" if q is not None else ""), client_text, st.none() | query),
    st.builds(lambda i, f, q: f"n://{i}/{f}" + (f"?{q}" if q is not None else ""),
              near_digits | percent, near_digits | percent, st.none() | query),
    st.builds(lambda i, f, q: f"n://{i}/{f}" + (f"?{q}" if q is not None else ""),
              near_digits, near_digits, st.none() | query),
    st.sampled_from(["svc://status", "git://log/{branch}{?limit}", "n://{i}/{f}{?flag}"]), client_text, json_values)
cursors = st.one_of(
    st.builds(lambda k, n, d: _b64(f"{k}:{n}:{d}"), st.sampled_from(["1", "2", "resources", "templates", "prompts"]),
              near_digits, st.sampled_from([DIGEST, "0" * 16]) | client_text),
    st.builds(lambda k, p, t: _b64(f"2:{k}:{p}:{t}"), near_digits, near_digits, st.just(new_id()) | client_text),
    client_text.map(_b64), client_text, json_values)
task_ids = st.one_of(st.just(new_id()), client_text, json_values)
names = st.sampled_from(["echo", "num", "deploy", "ask", "sh", "job", "always", "p", "q"]) | client_text | json_values
arguments = st.dictionaries(st.sampled_from(["msg", "n", "x", "b", "target", "name", "count", "text", "a"])
                            | client_text, near_digits | client_text | json_values, max_size=3) | json_values
refs = st.fixed_dictionaries({"type": st.sampled_from(["ref/prompt", "ref/resource"]) | json_values,
                              "name": names, "uri": uris})
FIELDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "tools/list": {"cursor": cursors}, "resources/list": {"cursor": cursors},
    "resources/templates/list": {"cursor": cursors}, "prompts/list": {"cursor": cursors},
    "tasks/list": {"cursor": cursors},
    "tools/call": {"name": names, "arguments": arguments,
                   "task": st.fixed_dictionaries({"ttl": json_values | near_digits}) | json_values,
                   "requestState": client_text | json_values, "inputResponses": json_values},
    "resources/read": {"uri": uris}, "resources/subscribe": {"uri": uris}, "resources/unsubscribe": {"uri": uris},
    "prompts/get": {"name": names, "arguments": arguments},
    "completion/complete": {"ref": refs | json_values,
                            "argument": st.fixed_dictionaries({"name": names, "value": client_text}) | json_values},
    "logging/setLevel": {"level": st.sampled_from(["debug", "error"]) | client_text | json_values},
    "subscriptions/listen": {"notifications": st.fixed_dictionaries(
        {"toolsListChanged": json_values, "resourceSubscriptions": st.lists(uris, max_size=2) | json_values})
        | json_values},
    **{m: {"taskId": task_ids, "inputResponses": json_values}
       for m in ("tasks/get", "tasks/result", "tasks/cancel", "tasks/update")},
    "initialize": {"protocolVersion": st.sampled_from(LEGACY) | client_text, "capabilities": json_values,
                   "clientInfo": json_values},
}


@st.composite
def params_for(draw: Any, method: str) -> Any:
    """The method's own fields (each sometimes arbitrary JSON), plus stray ones; now and then not an object."""
    if draw(st.integers(0, 19)) == 0:
        return draw(json_values)
    fields = FIELDS.get(method, {})
    chosen = [name for name in fields if draw(st.integers(0, 4))]
    params = {name: draw(json_values if draw(st.integers(0, 4)) == 0 else fields[name]) for name in chosen}
    params.update(draw(st.dictionaries(client_text, json_values, max_size=2)))
    return params


@st.composite
def meta_for(draw: Any, modern: bool) -> Any:
    """A modern request's `_meta` (each key sometimes arbitrary), or a legacy one's optional progress token."""
    if not modern:
        return draw(st.none() | st.fixed_dictionaries({"progressToken": client_text | json_values}) | json_values)
    caps = draw(st.sampled_from([{}, {"elicitation": {}}, {"extensions": {TASKS_EXTENSION: {}}},
                                 {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}]))
    if draw(st.integers(0, 9)) == 0:
        caps = draw(json_values)
    meta = modern_meta(caps)
    for key in draw(st.lists(st.sampled_from([*meta, "io.modelcontextprotocol/logLevel", "progressToken"]),
                             max_size=2)):
        meta[key] = draw(st.sampled_from(["2026-07-28", "debug"]) | client_text | json_values)
    return meta


@st.composite
def requests(draw: Any, ids: Any, method: str) -> dict[str, Any]:
    modern = draw(st.booleans())
    params = draw(params_for(method))
    meta = draw(meta_for(modern))
    if isinstance(params, dict) and meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}


@st.composite
def scripts(draw: Any) -> tuple[str, list[Any], list[Any]]:
    """A legacy revision, then one request of every method and one of a made-up method, in any order (unique
    ids), some of them batched; then the answers to the elicitations they may cause."""
    version = draw(st.sampled_from(LEGACY))
    counter = iter(range(1, 1_000_000))
    ids = iter(lambda: draw(st.sampled_from([next(counter), f"{next(counter)}{draw(unicode_text)}"])), None)
    pending = [draw(requests(ids, method)) for method in draw(st.permutations([*METHODS, draw(client_text)]))]
    messages: list[Any] = []
    while pending:
        size = draw(st.sampled_from([1, 1, 1, 2, 3]))
        messages.append(pending[:size] if size > 1 else pending[0])
        pending = pending[size:]
    answers = draw(st.lists(st.fixed_dictionaries({"action": st.sampled_from(["accept", "decline"]) | json_values,
                                                   "content": arguments}) | json_values, max_size=4))
    return version, messages, answers


# --- the driver's part, in memory ----------------------------------------------------------------
def _record(tool: str) -> TaskRecord:
    return TaskRecord(new_id(), "working", tool, {}, 1000.0, 1000.0, 60_000, 1000, "/tmp/fuzz.toml", "d")


def _settle(core: Core, action: Any) -> list[Any]:
    """What the driver would report back for one action, at once."""
    if isinstance(action, StartCall):
        return core.call_done(action.ctx, ToolResult(content=(Text("ok"),)))
    if isinstance(action, TaskOp) and action.op == "create":
        assert action.tool is not None
        return core.task_done(action, TaskFound(_record(action.tool.name)))
    if isinstance(action, TaskOp) and action.op != "watch":
        return core.task_done(action, TaskNotFound("Task not found"))
    if isinstance(action, ReadResource):
        if isinstance(action.target, OutputPage):
            return core.resource_read(action.ctx, action.target, Page(b"page", action.target.offset, 10))
        return core.resource_read(action.ctx, action.target, [Contents(action.target.uri, "text/plain", text="x")])
    if isinstance(action, GetPrompt):
        return core.prompt_done(action.ctx, action.prompt, [("user", Text("x"))])
    if isinstance(action, Complete):
        return core.completed(action.run, ["a", "b"])
    return []


def _run(core: Core, message: Any, answers: list[Any]) -> list[dict[str, Any]]:
    """Feed `message` as a client would (through the framing): the messages it leads to, once all is settled."""
    out: list[dict[str, Any]] = []
    queue = list(core.receive(jsonrpc.decode(json.dumps(message).encode())))
    queue += core.shutdown()                # ends a listen it opened: a batch holding one is answered
    while queue:
        action = queue.pop(0)
        if not isinstance(action, Send):
            queue += _settle(core, action)
            continue
        # a batch's answers are held encoded (orjson fragments): read them as the client would
        items = orjson.loads(jsonrpc.encode(action.message)) if isinstance(action.message, list) else [action.message]
        _names_what_it_answers(action, items, message)
        out += items
        for item in items:
            if item.get("method") == "elicitation/create":
                reply = {"jsonrpc": "2.0", "id": item["id"],
                         "result": answers.pop(0) if answers else {"action": "decline"}}
                queue += core.receive(jsonrpc.decode(json.dumps(reply).encode()))
    return out


def _names_what_it_answers(action: Send, items: list[dict[str, Any]], message: Any) -> None:
    """`Send.answers` names the requests its message answers, in order; none for a message of ours;
    for an error without an id (a refused batch) requests of the batch."""
    ids = [item["id"] for item in items if "method" not in item and item.get("id") is not None]
    if ids or not any("error" in item for item in items):
        assert list(action.answers) == ids, (action.answers, items)
        return
    sent = message if isinstance(message, list) else [message]
    asked = {orjson.dumps(m.get("id")) for m in sent if isinstance(m, dict)}
    assert {orjson.dumps(i) for i in action.answers} <= asked, (action.answers, message)


def _check(core: Core, message: Any, out: list[dict[str, Any]]) -> None:
    """Exactly one answer per request of `message` (a refused batch: one error without an id), valid in form."""
    items = message if isinstance(message, list) else [message]
    asked = sorted(orjson.dumps(m["id"]) for m in items)
    answered = sorted(orjson.dumps(m["id"]) for m in out if "method" not in m and m.get("id") is not None)
    refused = [m for m in out if "error" in m and m.get("id") is None]
    assert answered == asked or (isinstance(message, list) and not answered and len(refused) == 1), (asked, out)
    codes = core.session.rev.error_codes | {-32020, -32021, -32022}
    for sent in out:
        assert sent["jsonrpc"] == "2.0"
        assert ("result" in sent) + ("error" in sent) + ("method" in sent) == 1, sent
        if "error" in sent:
            code = sent["error"]["code"]
            assert code in codes and code != -32603, sent


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scripts())
@example(("2025-11-25", [{"jsonrpc": "2.0", "id": 1, "method": "resources/read",   # the hole the review found
                          "params": {"uri": "mcpwrap://output/" + "a" * 32 + "/stdout?offset=²"}}], []))
def test_receive_answers_every_request_without_an_internal_error(script: tuple[str, list[Any], list[Any]]) -> None:
    version, messages, answers = script
    core = Core(TOOLS, lambda: signing.Keyring(b"s" * 32), lambda: 1000.0, page_size=PAGE_SIZE)
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "f", "version": "1"}}}
    assert "result" in _run(core, initialize, answers)[0]
    assert _run(core, {"jsonrpc": "2.0", "method": "notifications/initialized"}, answers) == []
    for message in messages:
        _check(core, message, _run(core, message, answers))
