"""protocol/server_state: what a core knows between messages and the answers every handler gives from it —
replies stamped per era, errors in the revision's terms, capabilities from the tools file, the batch budget,
a request in flight until it is settled once."""

from __future__ import annotations

from pathlib import Path

from mcpwrap.config import load as config
from mcpwrap.protocol.actions import Context, Send, Stderr
from mcpwrap.protocol.revisions import REVISIONS, TASKS_EXTENSION
from mcpwrap.protocol.server_state import BatchBudget, ServerState, declares_extension, needs_extension
from mcpwrap.protocol.tools import ProtocolError
from mcpwrap.state import signing

PLAIN = config.loads(b"[spool]\nquota = 0\n[tools.a]\ncommand = ['true']\n", Path("/tmp/state.toml"))
RICH = config.loads(b"""
[tools.a]
command = ["true"]
[resources.notes]
uri = "file:///notes"
path = "/tmp/notes"
[prompts.p]
messages = [{ role = "user", text = "hi" }]
""", Path("/tmp/state.toml"))


def state(cfg: config.Config = PLAIN) -> ServerState:
    return ServerState(cfg, lambda: signing.Keyring(b"k" * 32), lambda: 1000.0)


def ctx(version: str, id: int = 1, capabilities: dict[str, object] | None = None) -> Context:
    return Context(id, "tools/list", REVISIONS[version], capabilities or {})


def test_capabilities_name_only_what_the_tools_file_has() -> None:
    assert state().capabilities(REVISIONS["2025-06-18"]) == {"tools": {"listChanged": True}, "logging": {}}
    rich = state(RICH).capabilities(REVISIONS["2025-06-18"])
    assert rich["resources"] == {"listChanged": True, "subscribe": True} and rich["prompts"] == {"listChanged": True}
    assert rich["completions"] == {}
    assert "resources" in state(config.loads(b"[tools.a]\ncommand = ['true']\n", Path("/tmp/s.toml"))).capabilities(
        REVISIONS["2025-06-18"])                     # output kept past max_output is read as a resource
    assert "tasks" in state().capabilities(REVISIONS["2025-11-25"])
    assert state().capabilities(REVISIONS["2026-07-28"])["extensions"] == {TASKS_EXTENSION: {}}


def test_a_reply_is_stamped_for_the_modern_era_only() -> None:
    legacy = state().reply(ctx("2025-11-25"), {"x": 1})
    assert legacy == Send({"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}, (1,))
    modern = state().reply(ctx("2026-07-28", 2), {"x": 1})
    assert isinstance(modern.message, dict) and modern.message["result"]["resultType"] == "complete"
    listed = state().listed(ctx("2026-07-28", 3), {"tools": []})
    assert isinstance(listed.message, dict) and "ttlMs" in listed.message["result"]


def test_an_error_is_in_the_revision_s_terms() -> None:
    core = state()
    assert core.error_message(1, ProtocolError(-32021, "m"), REVISIONS["2025-11-25"])["error"]["code"] == -32603
    assert core.error_message(1, ProtocolError(-32021, "m"), REVISIONS["2026-07-28"])["error"]["code"] == -32021
    assert core.error_message(None, ProtocolError(-32600, "m"), REVISIONS["2025-06-18"])["id"] is None
    assert "id" not in core.error_message(None, ProtocolError(-32600, "m"), REVISIONS["2025-11-25"])
    refused = core.refusal(4, ProtocolError(-32602, "bad", diagnostic="why"), REVISIONS["2025-11-25"])
    assert isinstance(refused[0], Send) and refused[1] == Stderr("mcpwrap: request 4 rejected: why", "warning")
    assert len(core.refusal(4, ProtocolError(-32602, "bad"), REVISIONS["2025-11-25"])) == 1


def test_a_request_is_settled_once() -> None:
    core, request = state(), ctx("2025-11-25", 9)
    core.inflight[9] = request
    assert core.settled(request) is True and core.settled(request) is False


def test_the_batch_budget_bounds_each_batch_and_all_together() -> None:
    budget = BatchBudget(per_batch=10, total=15)
    assert budget.refusal(0, 8) is None and budget.held == 8
    assert "batch's answers exceed 10" in str(budget.refusal(8, 3))
    assert "across the server" in str(budget.refusal(0, 8)) and budget.held == 8
    assert budget.refusal(0, 7) is None and budget.held == 15


def test_an_extension_is_declared_per_request() -> None:
    assert declares_extension(ctx("2026-07-28", capabilities={"extensions": {TASKS_EXTENSION: {}}}), TASKS_EXTENSION)
    assert not declares_extension(ctx("2026-07-28", capabilities={"extensions": [TASKS_EXTENSION]}), TASKS_EXTENSION)
    error = needs_extension(TASKS_EXTENSION, "why")
    assert error.code == -32021 and error.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
