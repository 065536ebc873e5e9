"""protocol/safety_net: a bug met while deciding a message costs that message's requests (each answered
-32603 once, inside its batch's array) and one log line naming the exception and where it was raised."""

from __future__ import annotations

from mcpwrap.protocol.actions import Send, Stderr
from mcpwrap.protocol.jsonrpc import Batch, Notification, Request
from mcpwrap.protocol.safety_net import bug_report, unexpected


def raised(exc: Exception) -> Exception:
    try:
        raise exc
    except Exception as caught:
        return caught


def test_each_request_is_answered_once_and_the_bug_is_logged() -> None:
    actions = unexpected(Request(3, "tools/list"), raised(KeyError("k")))
    assert isinstance(actions[0], Stderr) and actions[0].level == "error"
    assert "on tools/list request 3: KeyError: 'k' at test_safety_net.py:" in actions[0].text
    send = actions[1]
    assert isinstance(send, Send) and send.answers == (3,)
    assert send.message == {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": (
        "internal error: tools/list failed unexpectedly; nothing more was done (see the server's log)")}}


def test_a_batch_is_answered_in_one_array_and_a_notification_not_at_all() -> None:
    batch = Batch((Request(1, "a"), Notification("n"), Request("x", "b")))
    send = unexpected(batch, raised(ValueError("v")))[1]
    assert isinstance(send, Send) and isinstance(send.message, list)
    assert [m["id"] for m in send.message] == [1, "x"] and send.answers == (1, "x")
    only = unexpected(Notification("n"), raised(ValueError("v")))
    assert [type(a) for a in only] == [Stderr] and "on notification" in only[0].text
    assert "on a message" in unexpected(None, ValueError("v"))[0].text


def test_the_report_is_one_line_and_unwraps_a_lone_group() -> None:
    group = raised(ExceptionGroup("g", [raised(RuntimeError("two\nlines"))]))
    line = bug_report("in the driver", group)
    assert line.startswith("mcpwrap: internal error in the driver: RuntimeError: two lines at test_safety_net.py:")
    assert "\n" not in line
    assert bug_report("x", ValueError("never raised")) == "mcpwrap: internal error x: ValueError: never raised"
