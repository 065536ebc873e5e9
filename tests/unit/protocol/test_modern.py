"""A modern request missing its envelope (issue 13 item 6): a 2026-07-28-only method without
`_meta`, or a `_meta` with client keys but no protocol version, is -32602 (the modern rule for a
missing required _meta field), before and after a legacy session, never "send initialize first"."""

from __future__ import annotations

from typing import Any

import pytest

from mcpwrap.protocol.modern import VERSION_KEY
from tests import mcpschema
from tests.harness import modern_meta
from tests.unit.protocol.test_core import feed, init, make_core, request, sent

NO_VERSION = {k: v for k, v in modern_meta().items() if k != VERSION_KEY}
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "discover with {} params": ("server/discover", {}),
    "discover without params": ("server/discover", None),                    # type: ignore[dict-item]
    "listen without _meta": ("subscriptions/listen", {"notifications": {"toolsListChanged": True}}),
    "tasks/update without _meta": ("tasks/update", {"taskId": "x", "inputResponses": {}}),
    "discover, _meta without version": ("server/discover", {"_meta": NO_VERSION}),
    "tools/list, client keys only": ("tools/list", {"_meta": NO_VERSION}),
    "tools/call, capabilities only": ("tools/call", {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}},
                                                     "name": "echo", "arguments": {"msg": "x"}}),
    "tools/list, log level only": ("tools/list", {"_meta": {"io.modelcontextprotocol/logLevel": "info"}}),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("session", ["before initialize", "after initialize"])
def test_missing_envelope_is_32602(case: str, session: str) -> None:
    core = make_core()
    if session == "after initialize":
        init(core, "2025-11-25")
    method, params = CASES[case]
    actions = feed(core, request(7, method, params))
    [answer] = sent(actions)
    mcpschema.check("2026-07-28", answer, method)
    assert answer["id"] == 7 and answer["error"]["code"] == -32602, answer
    assert VERSION_KEY in answer["error"]["message"] and "initialize" not in answer["error"]["message"]
    assert len(actions) == 1                          # nothing started, nothing else sent


def test_legacy_requests_with_other_meta_stay_legacy() -> None:
    """A progress token or a related-task key is legacy _meta: the session's rules still apply."""
    core = make_core()
    before = sent(feed(core, request(1, "tools/list", {"_meta": {"progressToken": 1}})))[0]
    assert before["error"]["code"] == -32600 and "initialize" in before["error"]["message"]
    init(core, "2025-11-25")
    listed = sent(feed(core, request(2, "tools/list", {"_meta": {"progressToken": 1}})))[0]
    mcpschema.check("2025-11-25", listed, "tools/list")
    assert "resultType" not in listed["result"]


def test_a_full_envelope_is_served() -> None:
    core = make_core()
    answer = sent(feed(core, request(3, "server/discover", {"_meta": modern_meta()})))[0]
    mcpschema.check("2026-07-28", answer, "server/discover")
    assert answer["result"]["resultType"] == "complete"
