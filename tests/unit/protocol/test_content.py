"""protocol/content: the resources, prompts and completion handlers — what is answered at once (lists, a
prompt of text, a completion from values), what becomes an action for the driver (a read, a prompt with
commands, a completion command) and how its outcome is answered (never once the request was cancelled)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcpwrap.config import load as config
from mcpwrap.protocol.actions import Complete, GetPrompt, ReadResource, Stderr
from mcpwrap.protocol.core import Core
from mcpwrap.protocol.tools import ProtocolError
from mcpwrap.result import Resource, Text
from tests import mcpschema
from tests.unit.protocol.test_core import KEYRING, feed, init, request, sent

TOOLS = b"""
[tools.echo]
command = ["echo", "hi"]
[resources.notes]
uri = "file:///notes"
path = "/tmp/notes.txt"
mime_type = "text/plain"
[resources.date]
uri = "mcpwrap://date"
command = ["date"]
[prompts.hello]
args.who = { required = true, enum = ["ada", "alan", "grace"] }
messages = [{ text = "hello {who}" }]
[prompts.status]
args.what = { complete = ["sh", "-c", "echo x"] }
messages = [{ command = ["uptime"] }]
"""


def make() -> Core:
    core = Core(config.loads(TOOLS, Path("/tmp/content.toml")), lambda: KEYRING, lambda: 1000.0)
    init(core, "2025-11-25")
    return core


def test_lists_are_answered_at_once() -> None:
    core = make()
    resources = sent(feed(core, request(1, "resources/list")))[0]
    mcpschema.check("2025-11-25", resources, "resources/list")
    assert [r["uri"] for r in resources["result"]["resources"]] == ["file:///notes", "mcpwrap://date"]
    prompts = sent(feed(core, request(2, "prompts/list")))[0]
    assert [p["name"] for p in prompts["result"]["prompts"]] == ["hello", "status"]


def test_a_prompt_of_text_is_filled_in_at_once_and_one_with_commands_goes_to_the_driver() -> None:
    core = make()
    hello = sent(feed(core, request(1, "prompts/get", {"name": "hello", "arguments": {"who": "ada"}})))[0]
    mcpschema.check("2025-11-25", hello, "prompts/get")
    assert hello["result"]["messages"][0]["content"] == {"type": "text", "text": "hello ada"}
    actions = feed(core, request(2, "prompts/get", {"name": "status"}))
    assert [type(a) for a in actions] == [GetPrompt] and 2 in core.inflight
    done = sent(core.prompt_done(actions[0].ctx, actions[0].prompt, [("user", Text("up 3 days"))]))[0]
    assert done["id"] == 2 and done["result"]["messages"][0]["content"]["text"] == "up 3 days"


def test_a_read_goes_to_the_driver_and_is_not_answered_once_cancelled() -> None:
    core = make()
    read = feed(core, request(1, "resources/read", {"uri": "file:///notes"}))
    assert [type(a) for a in read] == [ReadResource]
    answer = sent(core.resource_read(read[0].ctx, read[0].target, [Resource("file:///notes", "text/plain", "hi")]))[0]
    assert answer["result"]["contents"] == [{"uri": "file:///notes", "mimeType": "text/plain", "text": "hi"}]
    again = feed(core, request(2, "resources/read", {"uri": "file:///notes"}))[0]
    feed(core, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    assert core.resource_read(again.ctx, again.target, []) == []


def test_only_a_file_resource_can_be_subscribed_to() -> None:
    core = make()
    assert sent(feed(core, request(1, "resources/subscribe", {"uri": "file:///notes"})))[0]["result"] == {}
    assert core.subscribed == {"file:///notes"}
    refused = sent(feed(core, request(2, "resources/subscribe", {"uri": "mcpwrap://date"})))[0]
    assert refused["error"]["code"] == -32602 and "file resources only" in refused["error"]["message"]
    feed(core, request(3, "resources/unsubscribe", {"uri": "file:///notes"}))
    assert core.subscribed == set()


def completing(id: Any, name: str, arg: str, value: str) -> dict[str, Any]:
    return request(id, "completion/complete", {"ref": {"type": "ref/prompt", "name": name},
                                               "argument": {"name": arg, "value": value}})


def test_a_completion_from_values_is_answered_at_once_and_one_from_a_command_when_it_ran() -> None:
    core = make()
    values = sent(feed(core, completing(1, "hello", "who", "a")))[0]
    assert values["result"]["completion"]["values"] == ["ada", "alan"]
    start = feed(core, completing(2, "status", "what", ""))
    assert [type(a) for a in start] == [Complete]
    failed = core.completed(start[0].run, ProtocolError(-32603, "the command\nfailed"))
    assert isinstance(failed[0], Stderr) and failed[0].text == "mcpwrap: the command failed; answered with no candidates"
    assert sent(failed)[0]["result"]["completion"]["values"] == []
    assert core.completed(start[0].run, ["late"]) == []        # nobody waits any more
