"""Output beyond max_output: the spool on its own, through the runner, and over real pipes.

The acceptance case: 10 MB of output with max_output = "64KiB" gives a capped result
that links the whole output; reading the link page by page gives back all 10 MB byte
for byte, in every revision (resource_link from 2025-06-18, a text note before); a
quota evicts the oldest output first and a read of it is the revision's not-found error.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Server, modern_meta

TEN_MB = bytes(range(256)) * 40960                  # 10 MiB, every byte value, not UTF-8
WRITE_TEN_MB = "import sys; sys.stdout.buffer.write(bytes(range(256)) * 40960)"
TEXT_LINE = "héllo wörld ✓ "                          # multi-byte characters cut at page ends


# --- over real pipes ------------------------------------------------------------------------------
def read_whole(server: Server, uri: str, meta: dict[str, Any] | None = None) -> tuple[bytes, list[str]]:
    """Follow the pages of a kept stream from `uri`; (bytes, the kind of each page: text or blob)."""
    data, kinds, next_uri = b"", [], uri
    while next_uri:
        params: dict[str, Any] = {"uri": next_uri, **({"_meta": meta} if meta else {})}
        result = server.call("resources/read", params)["result"]
        contents = result["contents"][0]
        data += base64.b64decode(contents["blob"]) if "blob" in contents else contents["text"].encode()
        next_uri = result["_meta"]["mcpwrap/page"].get("next")
        kinds.append("blob" if "blob" in contents else "text")
    return data, kinds


@pytest.fixture
def big_tools(tmp_path: Path) -> Path:
    tools = tmp_path / "tools.toml"
    tools.write_text(f"""
[server]
max_output = "64KiB"
[spool]
quota = "15MiB"
[tools.big]
command = ["python3", "-c", "{WRITE_TEN_MB}"]
[tools.text]
command = ["python3", "-c", "print({TEXT_LINE!r} * 200000, end='')"]
""")
    return tools


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
def test_ten_megabytes_capped_linked_and_read_back_whole(big_tools: Path, tmp_path: Path, version: str) -> None:
    with Server(big_tools, tmp_path) as server:
        caps = server.initialize(version)["result"]["capabilities"]
        assert caps["resources"] == {"listChanged": True}
        templates = server.call("resources/templates/list", {})["result"]["resourceTemplates"]
        assert templates[0]["uriTemplate"] == "mcpwrap://output/{call}/{stream}{?offset,length}"
        result = server.call("tools/call", {"name": "big", "arguments": {}})["result"]
        first = result["content"][0]
        assert first["type"] == "text" and len(first["text"]) < 66_000      # characters: 64 KiB decoded
        link = result["content"][1]
        if version >= "2025-06-18":
            assert link["type"] == "resource_link"
            uri = link["uri"]
        else:                                                   # no resource_link yet: a text note
            assert link["type"] == "text" and "[resource link]" in link["text"]
            uri = link["text"].split(": ", 1)[1].split(" ")[0]
        assert uri in first["text"]
        data, kinds = read_whole(server, uri)
        assert data == TEN_MB and kinds == ["blob"] * 10


def test_text_pages_cut_at_character_boundaries_modern(big_tools: Path, tmp_path: Path) -> None:
    with Server(big_tools, tmp_path) as server:
        result = server.call("tools/call", {"_meta": modern_meta(), "name": "text", "arguments": {}})["result"]
        uri = next(b["uri"] for b in result["content"] if b["type"] == "resource_link")
        data, kinds = read_whole(server, uri + "?length=100001", modern_meta())     # pages end mid-character
        assert data == (TEXT_LINE * 200000).encode() and kinds == ["text"] * len(kinds) and len(kinds) > 30
        page = server.call("resources/read", {"_meta": modern_meta(), "uri": uri})["result"]
        assert page["ttlMs"] == 0 and page["cacheScope"] == "private" and "text" in page["contents"][0]


def test_quota_evicts_oldest_and_unknown_is_not_found(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text("""
[server]
max_output = "1KiB"
[spool]
quota = "5MiB"
[tools.out]
command = ["head", "-c", "3000000", "/dev/zero"]
""")
    with Server(tools, tmp_path) as server:
        server.initialize("2025-11-25")
        uris = [next(b["uri"] for b in server.call("tools/call", {"name": "out", "arguments": {}})["result"]["content"]
                     if b["type"] == "resource_link") for _ in range(2)]
        gone = server.call("resources/read", {"uri": uris[0]})
        assert gone["error"]["code"] == -32002 and gone["error"]["data"] == {"uri": uris[0]}
        assert read_whole(server, uris[1])[0] == b"\0" * 3000000
        modern = server.call("resources/read", {"_meta": modern_meta(), "uri": uris[0]})
        assert modern["error"]["code"] == -32602 and modern["error"]["data"] == {"uri": uris[0]}
        bad = server.call("resources/read", {"uri": uris[1] + "?offset=x"})
        assert bad["error"]["code"] == -32602


def test_no_spool_no_resources_capability(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text('[spool]\nquota = 0\n[tools.out]\ncommand = ["head", "-c", "3000", "/dev/zero"]\nmax_output = 10\n')
    with Server(tools, tmp_path) as server:
        assert "resources" not in server.initialize("2025-11-25")["result"]["capabilities"]
        result = server.call("tools/call", {"name": "out", "arguments": {}})["result"]
        assert [b["type"] for b in result["content"]] == ["text"]
        assert server.call("resources/templates/list", {})["error"]["code"] == -32601     # not declared


def test_a_task_keeps_its_output_beyond_the_cap(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text('[tools.job]\ncommand = ["head", "-c", "200000", "/dev/zero"]\nmax_output = "1KiB"\n'
                     'task = "always"\n')
    with Server(tools, tmp_path) as server:
        # No notifications/initialized: no status notifications (the strict 2025-11-25 check cannot
        # validate their allOf of two closed schemas), and tasks work the same.
        server.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "clientInfo": {"name": "tests", "version": "1"}})
        task = server.call("tools/call", {"name": "job", "arguments": {}, "task": {"ttl": 60000}})["result"]["task"]
        payload = server.call("tasks/result", {"taskId": task["taskId"]})["result"]
        link = next(b for b in payload["content"] if b["type"] == "resource_link")
        assert read_whole(server, link["uri"])[0] == b"\0" * 200000
