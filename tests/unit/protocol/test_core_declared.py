"""What the server does not declare it does not serve (issue 24, class 8).

The spec (2025-11-25 server/prompts, resources, utilities/completion; 2026-07-28 alike): "Servers
that support prompts MUST declare the prompts capability", and so on for resources (subscribe
too), completions, logging and tasks. A method whose capability is absent from what the server
declared is "Method not found" (-32601; 404 over 2026-07-28 HTTP), in both eras, in the core and
over both transports; every method a declared capability covers is served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import load as config
from mcpwrap.protocol.core import Core
from tests.harness import MODERN, modern_meta
from tests.unit.protocol.test_core import KEYRING, feed, request, sent

BARE = '[spool]\nquota = 0\n[tools.echo]\ncommand = ["echo", "hi"]\n'
FULL = """
[tools.echo]
command = ["echo", "hi"]
task = "optional"
[resources.notes]
path = "notes.md"
[resources.branches]
uri_template = "git://branch/{name}"
command = ["echo", "{name}"]
args.name = { type = "string", complete = ["printf", "main\\\\n"] }
[prompts.review]
args.who = { required = true }
messages = [{ text = "Review {who}" }]
"""
# What the bare file leaves undeclared: method -> params good enough to be served if it were declared.
UNDECLARED: dict[str, dict[str, Any]] = {
    "prompts/list": {}, "prompts/get": {"name": "review", "arguments": {"who": "x"}},
    "resources/list": {}, "resources/templates/list": {}, "resources/read": {"uri": "git://branch/main"},
    "completion/complete": {"ref": {"type": "ref/prompt", "name": "review"},
                            "argument": {"name": "who", "value": ""}},
}
LEGACY_ONLY = {"resources/subscribe": {"uri": "file:///notes.md"}, "resources/unsubscribe": {"uri": "file:///notes.md"}}
REVS = ["2024-11-05", "2025-03-26", "2025-11-25", MODERN]


def core_for(tmp_path: Path, text: str, rev: str) -> tuple[Core, dict[str, Any]]:
    """A core for `text`, initialized at `rev` (legacy), and the capabilities it declared."""
    (tmp_path / "tools.toml").write_text(text)
    (tmp_path / "notes.md").write_text("notes\n")
    core = Core(config.load(tmp_path / "tools.toml"), lambda: KEYRING, lambda: 1000.0)
    if rev == MODERN:
        found = sent(feed(core, request(0, "server/discover", {"_meta": modern_meta()})))
        return core, found[0]["result"]["capabilities"]
    found = sent(feed(core, request(0, "initialize", {"protocolVersion": rev, "capabilities": {},
                                                        "clientInfo": {"name": "t", "version": "1"}})))
    feed(core, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return core, found[0]["result"]["capabilities"]


def ask(core: Core, rev: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    params = {**params, "_meta": modern_meta()} if rev == MODERN else params
    out = sent(feed(core, request(1, method, params)))
    return out[0] if out else {}          # no answer yet: the method was served (a command started)


@pytest.mark.parametrize("rev", REVS)
def test_undeclared_methods_are_method_not_found(tmp_path: Path, rev: str) -> None:
    """prompts/list answered {prompts: []} and prompts/get -32602 without a prompts capability."""
    core, caps = core_for(tmp_path, BARE, rev)
    assert not {"prompts", "resources", "completions"} & caps.keys()
    methods = {**UNDECLARED, **(LEGACY_ONLY if rev != MODERN else {})}
    answers = {method: ask(core, rev, method, params).get("error", {}).get("code") for method, params in methods.items()}
    assert answers == dict.fromkeys(methods, -32601)


@pytest.mark.parametrize("rev", REVS)
def test_declared_methods_are_served(tmp_path: Path, rev: str) -> None:
    core, caps = core_for(tmp_path, FULL, rev)
    assert {"prompts", "resources"} <= caps.keys()
    methods = {**UNDECLARED, **(LEGACY_ONLY if rev != MODERN else {})}
    if "completions" not in caps:                         # 2024-11-05 has no completions capability
        assert ask(core, rev, "completion/complete", methods.pop("completion/complete"))["error"]["code"] == -32601
    for method, params in methods.items():
        if method in LEGACY_ONLY:
            params = {"uri": (tmp_path / "notes.md").as_uri()}
        assert ask(core, rev, method, params).get("error", {}).get("code") != -32601, method


def test_subscribe_is_only_served_where_declared(tmp_path: Path) -> None:
    """resources without file resources declare no `subscribe`: subscribing is -32601, not -32602."""
    core, caps = core_for(tmp_path, '[tools.echo]\ncommand = ["echo"]\n', "2025-11-25")
    assert caps["resources"] == {"listChanged": True}
    assert ask(core, "2025-11-25", "resources/subscribe", {"uri": "x://y"})["error"]["code"] == -32601
