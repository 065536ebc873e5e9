"""Every refusal of a requestState says on stderr, in words, what differed (issue 28, item 7).

The client hears only "invalid or expired requestState" (the wire message stays generic); the
operator reads which claim failed: the tool, the arguments, the tools file, the expiry, the
identity, or that the state was already used, never an internal claim key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mcpwrap.config import load as config
from mcpwrap.protocol import sealing
from mcpwrap.protocol.actions import Stderr
from mcpwrap.protocol.sealing import StateError, seal, unseal
from mcpwrap.state.signing import Keyring
from tests.harness import modern_meta
from tests.unit.protocol.test_core import TOOLS, feed, make_core, request, sent

PARAMS: dict[str, Any] = {"_meta": modern_meta({"elicitation": {}}), "name": "deploy", "arguments": {"target": "prod"}}
CLAIM_KEY = re.compile(r"another [a-z](?:/|$|\b)")


def _state(core: Any) -> str:
    return str(sent(feed(core, request(1, "tools/call", PARAMS)))[0]["result"]["requestState"])


def _refusal(core: Any, params: dict[str, Any]) -> str:
    actions = feed(core, request(2, "tools/call", {**params, "inputResponses": {"confirm": {"action": "accept"}}}))
    assert sent(actions)[0]["error"] == {"code": -32602, "message": "invalid or expired requestState"}
    lines = [a.text for a in actions if isinstance(a, Stderr)]
    assert len(lines) == 1 and not CLAIM_KEY.search(lines[0]), lines
    return lines[0]


def test_a_state_for_other_arguments_or_another_tool_says_which() -> None:
    core = make_core()
    state = _state(core)
    line = _refusal(core, {**PARAMS, "arguments": {"target": "staging"}, "requestState": state})
    assert "issued for other arguments" in line, line
    line = _refusal(core, {**PARAMS, "name": "echo", "arguments": {"msg": "x"}, "requestState": state})
    assert "issued for tool 'deploy', not 'echo'" in line, line


def test_a_state_from_before_a_reload_says_the_tools_file_changed() -> None:
    core = make_core()
    state = _state(core)
    core.reload(config.loads(TOOLS + b"\n# edited\n", Path("/tmp/core.toml")))
    line = _refusal(core, {**PARAMS, "requestState": state})
    assert "the tools file changed since it was issued" in line, line


def test_an_expired_state_says_when_it_expired() -> None:
    core = make_core()
    state = _state(core)
    core.test_clock["now"] += sealing.DEFAULT_STATE_TTL_S + 30
    line = _refusal(core, {**PARAMS, "requestState": state})
    assert re.search(r"it expired 3\ds ago", line), line


def test_a_state_retried_by_another_identity_says_so() -> None:
    keyring = Keyring(b"k" * 32)
    token = seal(keyring, {"t": "deploy"}, 1000.0, bound="principal-a")
    try:
        unseal(keyring, token, 1000.0, bound="principal-b")
    except StateError as error:
        assert "another identity" in error.reason, error.reason
    else:
        raise AssertionError("a state retried by another principal verified")
