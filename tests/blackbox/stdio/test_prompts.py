"""[prompts.NAME] and completion/complete: the core in memory per revision, then over real pipes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness import MODERN, Server, modern_meta
from tests.unit.protocol.test_prompts import tools


def test_prompts_and_completions_over_pipes(tmp_path: Path) -> None:
    path = tmp_path / "tools.toml"
    path.write_text(tools(tmp_path))
    (tmp_path / "notes.md").write_text("# notes\n")
    with Server(path, tmp_path) as server:
        server.initialize("2025-11-25")
        got = server.call("prompts/get", {"name": "context", "arguments": {"who": "ann; rm -rf"}})["result"]
        contents = [m["content"] for m in got["messages"]]
        assert contents[0] == {"type": "text", "text": "Context for ann; rm -rf:"}
        assert contents[1]["resource"] == {"uri": (tmp_path / "notes.md").as_uri(), "mimeType": "text/markdown",
                                           "text": "# notes\n"}
        assert contents[2] == {"type": "text", "text": "ann; rm -rf"}               # one argv element, as for tools
        option = server.call("prompts/get", {"name": "context", "arguments": {"who": "-rf"}})["error"]
        assert option["code"] == -32602 and "would be read as an option" in option["message"]
        completion = server.call("completion/complete", {"ref": {"type": "ref/prompt", "name": "context"},
                                                         "argument": {"name": "who", "value": "b"}})
        assert completion["result"]["completion"]["values"] == ["bob"]
        modern: dict[str, Any] = {"_meta": modern_meta(), "ref": {"type": "ref/resource", "uri": "git://branch/{name}"},
                                  "argument": {"name": "name", "value": "ma"}}
        assert server.call("completion/complete", modern)["result"]["completion"]["values"] == ["main", "maint"]


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
PICTURES = f"""
[resources.logo]
uri = "test://logo"
shell = 'printf %s {PNG} | base64 -d'
output = "blob"
mime_type = "image/png"
[prompts.picture]
messages = [
  {{ text = "What is in this picture?" }},
  {{ shell = 'printf %s {PNG} | base64 -d', output = "image/png" }},
  {{ role = "assistant", resource = "test://logo" }},
]
"""


def test_a_prompt_message_is_an_image_or_a_binary_resource(tmp_path: Path) -> None:
    """A command message with `output = "image/png"` is an ImageContent of its bytes; a blob resource embeds."""
    path = tmp_path / "tools.toml"
    path.write_text(PICTURES)
    for rev in ("2025-06-18", MODERN):
        with Server(path, tmp_path) as server:
            meta = {"_meta": modern_meta()} if rev == MODERN else {}
            if rev != MODERN:
                server.initialize(rev)
            got = server.call("prompts/get", {**meta, "name": "picture"})["result"]      # schema-checked
            image, embedded = got["messages"][1], got["messages"][2]
            assert image == {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}}
            assert embedded == {"role": "assistant", "content": {"type": "resource", "resource": {
                "uri": "test://logo", "mimeType": "image/png", "blob": PNG}}}


def test_a_missing_prompt_argument_is_asked_for_and_the_answer_completes_the_prompt(tmp_path: Path) -> None:
    """2026-07-28, elicitation declared: input_required naming the argument, then the retry with the
    answer and the requestState renders the prompt, a command message getting the answer as data."""
    path = tmp_path / "tools.toml"
    path.write_text(tools(tmp_path))
    (tmp_path / "notes.md").write_text("# notes\n")
    meta = {"_meta": modern_meta({"elicitation": {}})}
    with Server(path, tmp_path) as server:
        first = server.call("prompts/get", {**meta, "name": "context"})["result"]      # schema-checked
        assert first["resultType"] == "input_required"
        ((key, question),) = first["inputRequests"].items()
        assert question["params"]["requestedSchema"]["required"] == ["who"]
        answer = {key: {"action": "accept", "content": {"who": "ann; rm -rf"}}}
        done = server.call("prompts/get", {**meta, "name": "context", "inputResponses": answer,
                                           "requestState": first["requestState"]})["result"]
        assert done["resultType"] == "complete"
        assert [m["content"].get("text") for m in done["messages"]][::2] == ["Context for ann; rm -rf:", "ann; rm -rf"]
        tampered = first["requestState"][:-2] + ("AA" if not first["requestState"].endswith("AA") else "BB")
        refused = server.call("prompts/get", {**meta, "name": "context", "inputResponses": answer,
                                              "requestState": tampered})
        assert refused["error"]["code"] == -32602
