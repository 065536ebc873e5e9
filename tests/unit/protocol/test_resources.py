"""[resources.NAME] and the output template: the core in memory per revision, then over real pipes.

Every answer the core gives is validated against the schema of the revision in force.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import load as config
from mcpwrap.protocol.actions import ReadResource, Send
from mcpwrap.protocol.resources import OutputPage, Source
from mcpwrap.result import Resource as Contents
from mcpwrap.protocol.pages import Page
from tests import mcpschema
from tests.harness import MODERN, modern_meta
from tests.unit.protocol.test_core import KEYRING, feed, request, sent

LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
TOOLS = """
[tools.echo]
command = ["echo", "hi"]
[resources.notes]
title = "Notes"
description = "The team notes"
path = "notes.md"
[resources.status]
uri = "svc://status"
command = ["echo", "all good"]
cache_ttl = "30s"
cache_scope = "public"
[resources.log]
title = "Commits"
uri_template = "git://log/{branch}{?limit}"
command = ["git", "log", "--max-count={limit}", "--", "{branch}"]
args.branch = { type = "string", pattern = "^[a-z]+$", examples = ["main", "dev"] }
args.limit = { type = "integer", minimum = 1, default = 5 }
"""


def make(tmp_path: Path, text: str = TOOLS, page_size: int = 500) -> Any:
    from mcpwrap.protocol.core import Core

    path = tmp_path / "tools.toml"
    path.write_text(text)
    (tmp_path / "notes.md").write_text("# notes\n")
    return Core(config.load(path), lambda: KEYRING, lambda: 1000.0, page_size=page_size)


def answer(core: Any, rev: str, id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    params = dict(params or {})
    if rev == MODERN:
        params["_meta"] = modern_meta()
    out = sent(feed(core, request(id, method, params)))
    assert len(out) == 1, out
    mcpschema.check(rev, out[0], method)
    return out[0]


def init(core: Any, rev: str) -> dict[str, Any]:
    if rev == MODERN:
        return answer(core, rev, 0, "server/discover")["result"]
    result = answer(core, rev, 0, "initialize", {"protocolVersion": rev, "capabilities": {},
                                                 "clientInfo": {"name": "t", "version": "1"}})["result"]
    feed(core, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return result


@pytest.mark.parametrize("rev", LEGACY + [MODERN])
def test_lists_per_revision(tmp_path: Path, rev: str) -> None:
    core = make(tmp_path)
    caps = init(core, rev)["capabilities"]
    assert caps["resources"] == {"listChanged": True, "subscribe": True}
    assert ("completions" in caps) == (rev != "2024-11-05")
    listed = answer(core, rev, 1, "resources/list")["result"]
    assert [r["name"] for r in listed["resources"]] == ["notes", "status"]
    notes = listed["resources"][0]
    assert notes["uri"] == (tmp_path / "notes.md").as_uri() and notes["mimeType"] == "text/markdown"
    assert ("title" in notes) == (rev >= "2025-06-18")
    templates = answer(core, rev, 2, "resources/templates/list")["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["mcpwrap://output/{call}/{stream}{?offset,length}",
                                                     "git://log/{branch}{?limit}"]
    if rev == MODERN:
        assert listed["ttlMs"] > 0 and listed["cacheScope"] == "public"


@pytest.mark.parametrize("rev", LEGACY + [MODERN])
def test_read_resolves_then_renders(tmp_path: Path, rev: str) -> None:
    core = make(tmp_path)
    init(core, rev)
    meta = {"_meta": modern_meta()} if rev == MODERN else {}
    action = feed(core, request(1, "resources/read", {**meta, "uri": "git://log/main?limit=3"}))
    assert len(action) == 1 and isinstance(action[0], ReadResource)
    target = action[0].target
    assert isinstance(target, Source) and target.arguments == {"branch": "main", "limit": 3}
    out = sent(core.resource_read(action[0].ctx, target, [Contents("git://log/main?limit=3", "text/plain", "a\n")]))
    mcpschema.check(rev, out[0], "resources/read")
    assert out[0]["result"]["contents"] == [{"uri": "git://log/main?limit=3", "mimeType": "text/plain", "text": "a\n"}]
    status = feed(core, request(2, "resources/read", {**meta, "uri": "svc://status"}))[0]
    done = sent(core.resource_read(status.ctx, status.target, [Contents("svc://status", "text/plain", "ok")]))[0]
    mcpschema.check(rev, done, "resources/read")
    if rev == MODERN:                                       # per resource: cache_ttl, cache_scope
        assert (done["result"]["ttlMs"], done["result"]["cacheScope"]) == (30000, "public")


@pytest.mark.parametrize("rev", LEGACY + [MODERN])
def test_unknown_bad_and_gone_uris(tmp_path: Path, rev: str) -> None:
    core = make(tmp_path)
    init(core, rev)
    not_found = -32602 if rev == MODERN else -32002
    for uri in ("svc://nothing", "git://log/main/extra", "mcpwrap://output/nothex/stdout",
                "mcpwrap://output/" + "a" * 32 + "/stdin"):
        error = answer(core, rev, 1, "resources/read", {"uri": uri})["error"]
        assert error["code"] == not_found and error["data"] == {"uri": uri}
    # Matches the template, but the arguments fail their schema: invalid params, nothing runs.
    error = answer(core, rev, 2, "resources/read", {"uri": "git://log/-rf"})["error"]
    assert error["code"] == -32602 and "does not match" in error["message"]
    assert answer(core, rev, 3, "resources/read", {"uri": 7})["error"]["code"] == -32602
    # A kept stream that went (evicted, expired) between resolve and read.
    uri = "mcpwrap://output/" + "a" * 32 + "/stdout"
    read = feed(core, request(4, "resources/read", {"uri": uri, **({"_meta": modern_meta()} if rev == MODERN else {})}))[0]
    assert read.target == OutputPage("a" * 32, "stdout", 0, 1024 * 1024)
    error = sent(core.resource_read(read.ctx, read.target, None))[0]
    mcpschema.check(rev, error, "resources/read")
    assert error["error"]["code"] == not_found and error["error"]["data"] == {"uri": uri}


def test_output_page_rendering(tmp_path: Path) -> None:
    core = make(tmp_path)
    init(core, "2025-11-25")
    uri = "mcpwrap://output/" + "b" * 32 + "/stdout?offset=2&length=4"
    read = feed(core, request(1, "resources/read", {"uri": uri}))[0]
    assert read.target == OutputPage("b" * 32, "stdout", 2, 4)
    text = sent(core.resource_read(read.ctx, read.target, Page("é✓".encode()[:4], 2, 100)))[0]["result"]
    assert text["contents"][0]["text"] == "é" and text["_meta"]["mcpwrap/page"] == {   # ✓ cut: moved back
        "offset": 2, "length": 2, "total": 100,
        "next": "mcpwrap://output/" + "b" * 32 + "/stdout?offset=4&length=4"}
    read = feed(core, request(2, "resources/read", {"uri": uri}))[0]
    binary = sent(core.resource_read(read.ctx, read.target, Page(b"\xff\x00", 98, 100)))[0]["result"]
    assert binary["contents"][0]["blob"] == "/wA=" and "next" not in binary["_meta"]["mcpwrap/page"]


def test_cursors_page_through_and_reject_foreign_ones(tmp_path: Path) -> None:
    extra = "".join(f'[resources.r{i}]\nuri = "x://{i}"\ncommand = ["true"]\n' for i in range(5))
    extra += '[prompts.p]\nmessages = [{ text = "p" }]\n'     # prompts/list is served only when declared
    core = make(tmp_path, TOOLS + extra, page_size=3)
    init(core, "2025-11-25")
    names, cursor = [], None
    while True:
        page = answer(core, "2025-11-25", 1, "resources/list", {"cursor": cursor} if cursor else {})["result"]
        names += [r["name"] for r in page["resources"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert names == ["notes", "status"] + [f"r{i}" for i in range(5)]
    templates_cursor = answer(core, "2025-11-25", 2, "resources/templates/list")["result"]
    assert "nextCursor" not in templates_cursor
    first = answer(core, "2025-11-25", 3, "resources/list")["result"]["nextCursor"]
    assert answer(core, "2025-11-25", 4, "prompts/list", {"cursor": first})["error"]["code"] == -32602
    assert answer(core, "2025-11-25", 5, "resources/list", {"cursor": "bogus"})["error"]["code"] == -32602


def test_capabilities_only_for_what_the_file_defines(tmp_path: Path) -> None:
    core = make(tmp_path, '[spool]\nquota = 0\n[tools.echo]\ncommand = ["echo"]\n')
    caps = init(core, "2025-11-25")["capabilities"]
    assert not {"resources", "prompts", "completions"} & set(caps)
    assert answer(core, "2025-11-25", 1, "resources/list")["error"]["code"] == -32601     # not declared
    core = make(tmp_path, '[tools.echo]\ncommand = ["echo"]\n')               # the spool alone: resources
    assert init(core, MODERN)["capabilities"]["resources"] == {"listChanged": True}


def test_subscribe_updates_and_reload(tmp_path: Path) -> None:
    core = make(tmp_path)
    init(core, "2025-11-25")
    uri = (tmp_path / "notes.md").as_uri()
    assert core.resource_changed(uri) == []                                  # nobody subscribed
    assert answer(core, "2025-11-25", 1, "resources/subscribe", {"uri": uri})["result"] == {}
    assert core.watched() == {uri: tmp_path / "notes.md"}
    updated = sent(core.resource_changed(uri))
    assert updated == [{"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}]
    mcpschema.check("2025-11-25", updated[0])
    refused = answer(core, "2025-11-25", 2, "resources/subscribe", {"uri": "svc://status"})["error"]
    assert refused["code"] == -32602                                         # a command: no updates to send
    assert answer(core, "2025-11-25", 3, "resources/subscribe", {"uri": "svc://none"})["error"]["code"] == -32002
    assert answer(core, "2025-11-25", 4, "resources/unsubscribe", {"uri": uri})["result"] == {}
    assert core.resource_changed(uri) == [] and core.watched() == {}
    # A reload that changes the resources says so; one that changes only tools does not.
    path = tmp_path / "tools.toml"
    notes = [m for m in sent(core.reload(config.loads((TOOLS + '[resources.x]\nuri = "x://x"\ncommand = ["true"]\n')
                                                      .encode(), path))) if "method" in m]
    assert [m["method"] for m in notes] == ["notifications/tools/list_changed", "notifications/resources/list_changed"]
    for m in notes:
        mcpschema.check("2025-11-25", m)


def test_modern_listen_filter_for_resources(tmp_path: Path) -> None:
    core = make(tmp_path)
    uri = (tmp_path / "notes.md").as_uri()
    ack = sent(feed(core, request("L", "subscriptions/listen", {"_meta": modern_meta(), "notifications": {
        "resourceSubscriptions": [uri, "svc://status"], "resourcesListChanged": True}})))[0]
    mcpschema.check(MODERN, ack)
    assert ack["params"]["notifications"] == {"resourcesListChanged": True, "resourceSubscriptions": [uri]}
    updated = sent(core.resource_changed(uri))
    assert updated[0]["params"] == {"uri": uri, "_meta": {"io.modelcontextprotocol/subscriptionId": "L"}}
    mcpschema.check(MODERN, updated[0])
    assert [m["method"] for m in sent(core.reload(config.loads(b'[tools.e]\ncommand = ["e"]\n',
                                                                tmp_path / "tools.toml")))] == [
        "notifications/resources/list_changed"]
    assert all(isinstance(a, Send) for a in core.shutdown())
