"""completion/complete is rate limited: one run of a `complete` command answers every request for it.

The spec (server/utilities/completion.mdx, "Security", 2025-03-26 onwards): "Implementations
**MUST**: ... Implement appropriate rate limiting" (and server-obligations.txt, Completion: "Apply
rate limiting on the server side"). A client completes as the user types, one request a keystroke,
and the command's output does not depend on the typed value (the core filters it by the prefix):
so requests for the same command while it runs wait for that run, and a fresh result is cached
for `COMPLETION_TTL_S`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


from mcpwrap.config import load as config
from mcpwrap.protocol.actions import Complete, Stderr, StopComplete
from mcpwrap.protocol.core import Core
from mcpwrap.protocol.prompts import COMPLETION_TTL_S, COMPLETION_WAITERS
from mcpwrap.protocol.tools import ProtocolError
from tests.unit.protocol.test_core import KEYRING, feed, request, sent

WORD = "abcdefghijklmnopqrstuvwxyz" * 2
CANDIDATES = [WORD[:10], WORD[:30], WORD[:52], "b"]
TOOLS = """
[tools.echo]
command = ["echo", "hi"]
[prompts.pick]
args.word = { required = true, complete = ["sh", "-c", "SCRIPT"] }
messages = [{ text = "{word}" }]
"""
# Counts its runs, then waits for the test to open the gate, so every request is in before it ends.
SCRIPT = ("echo run >> counter; while [ ! -e gate ]; do sleep 0.01; done; "
          "printf '" + "\\\\n".join(CANDIDATES) + "\\\\n'")


def completing(prefix: str, id: Any) -> dict[str, Any]:
    return request(id, "completion/complete", {"ref": {"type": "ref/prompt", "name": "pick"},
                                               "argument": {"name": "word", "value": prefix}})


def make(tmp_path: Path) -> tuple[Core, list[float]]:
    path = tmp_path / "tools.toml"
    path.write_text(TOOLS.replace("SCRIPT", "true"))
    now = [1000.0]
    return Core(config.load(path), lambda: KEYRING, lambda: now[0]), now


def init(core: Core) -> None:
    feed(core, request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "1"}}))
    feed(core, {"jsonrpc": "2.0", "method": "notifications/initialized"})


def values(message: dict[str, Any]) -> list[str]:
    return message["result"]["completion"]["values"]


def test_requests_while_a_command_runs_wait_for_it_and_a_fresh_result_is_reused(tmp_path: Path) -> None:
    core, now = make(tmp_path)
    init(core)
    first = feed(core, completing("a", 1))
    assert len(first) == 1 and isinstance(first[0], Complete)
    assert feed(core, completing("ab", 2)) == [] and feed(core, completing("b", 3)) == []     # joined the run
    out = sent(core.completed(first[0].run, CANDIDATES))
    assert {m["id"]: values(m) for m in out} == {1: CANDIDATES[:3], 2: CANDIDATES[:3], 3: ["b"]}
    now[0] += COMPLETION_TTL_S - 0.5
    assert values(sent(feed(core, completing("abcdefghijk", 4)))[0]) == CANDIDATES[1:3]      # cached: nothing runs
    now[0] += 1.0
    again = feed(core, completing("a", 5))
    assert len(again) == 1 and isinstance(again[0], Complete) and again[0].run != first[0].run  # expired: runs


def test_a_failing_command_answers_every_waiter_with_no_candidates_and_says_so_once(tmp_path: Path) -> None:
    core, now = make(tmp_path)
    init(core)
    run = feed(core, completing("a", 1))[0].run
    for i in range(2, 6):
        assert feed(core, completing("a" * i, i)) == []
    actions = core.completed(run, ProtocolError(-32603, "complete command prompts.pick.args.word.complete "
                                                        "failed: boom\n[exited with status 3]"))
    out = sent(actions)
    assert sorted(m["id"] for m in out) == [1, 2, 3, 4, 5] and all(values(m) == [] for m in out)
    assert [a.text for a in actions if isinstance(a, Stderr)] == [
        "mcpwrap: complete command prompts.pick.args.word.complete failed: boom [exited with status 3]; "
        "answered with no candidates"]
    assert values(sent(feed(core, completing("a", 6)))[0]) == []       # a failing command is rate limited too
    now[0] += COMPLETION_TTL_S
    assert isinstance(feed(core, completing("a", 7))[0], Complete)


def test_cancelled_waiters_are_dropped_and_the_starter_s_cancel_does_not_stop_the_run(tmp_path: Path) -> None:
    core, now = make(tmp_path)
    init(core)
    run = feed(core, completing("a", 1))[0].run
    feed(core, completing("ab", 2))
    feed(core, completing("abc", 3))
    for cancelled in (1, 3):                      # the request that started it, then a waiter
        out = feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": cancelled}})
        assert not any(isinstance(a, StopComplete) for a in out)
    assert [(m["id"], values(m)) for m in sent(core.completed(run, CANDIDATES))] == [(2, CANDIDATES[:3])]
    now[0] += COMPLETION_TTL_S
    run = feed(core, completing("x", 4))[0].run   # nobody is left waiting for this one: it is stopped
    out = feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}})
    assert StopComplete(run) in out
    assert sent(core.completed(run, CANDIDATES)) == []


def test_waiters_for_one_command_are_bounded(tmp_path: Path) -> None:
    core, _ = make(tmp_path)
    init(core)
    run = feed(core, completing("", "first"))[0].run
    for i in range(1, COMPLETION_WAITERS):
        assert feed(core, completing("a", i)) == []
    refused = sent(feed(core, completing("a", "late")))[0]
    assert refused["error"]["code"] == -32603 and "completion requests" in refused["error"]["message"]
    assert len(sent(core.completed(run, CANDIDATES))) == COMPLETION_WAITERS
