"""[resources.NAME] and the output template: the core in memory per revision, then over real pipes.

Every answer the core gives is validated against the schema of the revision in force.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness import Server, modern_meta, write_atomically


# --- over real pipes ------------------------------------------------------------------------------
def test_files_and_commands_over_pipes(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text("""
[tools.echo]
command = ["echo", "hi"]
[resources.notes]
path = "notes.md"
[resources.logo]
path = "logo.png"
[resources.greeting]
uri_template = "greet://{who}"
command = ["printf", "hello %s", "{who}"]
args.who = { type = "string", maxLength = 20 }
[resources.raw]
uri = "raw://bytes"
command = ["printf", "\\\\377\\\\000"]
output = "blob"
""")
    (tmp_path / "notes.md").write_text("# notes\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n")
    with Server(tools, tmp_path) as server:
        server.initialize("2025-11-25")
        notes = (tmp_path / "notes.md").as_uri()
        assert server.call("resources/read", {"uri": notes})["result"]["contents"] == [
            {"uri": notes, "mimeType": "text/markdown", "text": "# notes\n"}]
        logo = server.call("resources/read", {"uri": (tmp_path / "logo.png").as_uri()})["result"]["contents"][0]
        assert logo["mimeType"] == "image/png" and logo["blob"] == "iVBORw0K"
        # A value that would split a shell line or start an option is one argv element, as for tools.
        greeting = server.call("resources/read", {"uri": "greet://a%20b%3B%20rm%20-rf"})["result"]
        assert greeting["contents"][0]["text"] == "hello a b; rm -rf"
        too_long = server.call("resources/read", {"uri": "greet://" + "x" * 21})["error"]
        assert too_long["code"] == -32602
        raw = server.call("resources/read", {"_meta": modern_meta(), "uri": "raw://bytes"})["result"]
        assert raw["contents"] == [{"uri": "raw://bytes", "mimeType": "application/octet-stream", "blob": "/wA="}]
        # Subscribed to a file: an edit is announced.
        assert server.call("resources/subscribe", {"uri": notes})["result"] == {}
        write_atomically(tmp_path / "notes.md", "# notes, edited\n")
        notes_seen: list[Any] = []
        while not any(m.get("method") == "notifications/resources/updated" for m in notes_seen):
            notes_seen.append(server.read())
        assert notes_seen[-1]["params"] == {"uri": notes}
