"""Interop: the official Python SDK client lists and reads resources, gets prompts, completes
arguments and reads a 10 MiB output beyond the cap back whole, in legacy mode and in 2026-07-28
(`mode="auto"`), against tests/fixtures/content.toml. Every message the server writes is
validated against the schema of its request's revision (`Traced.check_schemas`).
"""

from __future__ import annotations

import base64
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.harness import HANG_S
from tests.blackbox.sdk.test_python import ROOT, Traced, run

FIXTURE = Path(__file__).parents[2] / "fixtures" / "content.toml"
TEN_MB = bytes(range(256)) * 40960

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


class ContentTraced(Traced):
    @contextlib.asynccontextmanager
    async def client(self, mode: str, **kwargs: Any) -> AsyncIterator[Client]:
        params = StdioServerParameters(
            command=sys.executable, cwd=str(ROOT),
            args=["-m", "mcpwrap", "serve", str(FIXTURE), "--secret-file", str(self.tmp_path / "secret"),
                  "--state-dir", str(self.tmp_path / "state"), "--log-level", "debug"])
        with open(self.log_path, "w") as self.errlog:
            async with Client(stdio_client(params, errlog=self.errlog), mode=mode, read_timeout_seconds=HANG_S,
                              **kwargs) as c:
                yield c


async def read_whole(c: Client, uri: str) -> bytes:
    data, next_uri = b"", uri
    while next_uri:
        page = await c.read_resource(next_uri)
        contents = page.contents[0]
        data += base64.b64decode(contents.blob) if isinstance(contents, types.BlobResourceContents) \
            else contents.text.encode()
        next_uri = (page.meta or {})["mcpwrap/page"].get("next")
    return data


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_resources_prompts_completions(tmp_path: Path, mode: str) -> None:
    traced = ContentTraced(tmp_path)

    async def body() -> None:
        async with traced.client(mode) as c:
            resources = await c.list_resources()
            assert [r.name for r in resources.resources] == ["notes"]
            notes = await c.read_resource(str(resources.resources[0].uri))
            assert notes.contents[0].text == "# Notes\nKeep it short.\n"
            templates = await c.list_resource_templates()
            assert [t.uri_template for t in templates.resource_templates] == [
                "mcpwrap://output/{call}/{stream}{?offset,length}", "greet://{who}"]
            greeting = await c.read_resource("greet://ann%20%26%20co")
            assert greeting.contents[0].text == "hello ann & co"
            with pytest.raises(MCPError) as missing:
                await c.read_resource("greet://" + "x" * 41)
            assert missing.value.error.code == -32602

            prompts = await c.list_prompts()
            assert [(p.name, [a.name for a in p.arguments or []]) for p in prompts.prompts] == [("review", ["topic"])]
            got = await c.get_prompt("review", {"topic": "speed"})
            assert [m.role for m in got.messages] == ["user", "user", "assistant"]
            assert got.messages[0].content.text == "Review the speed of this change."
            assert got.messages[1].content.resource.text == "hello speed"
            assert got.messages[2].content.text == "speed?"

            completion = await c.complete(types.PromptReference(name="review"), {"name": "topic", "value": "s"})
            assert completion.completion.values == ["speed", "security", "style"]
            by_template = await c.complete(types.ResourceTemplateReference(uri="greet://{who}"),
                                           {"name": "who", "value": "b"})
            assert by_template.completion.values == ["bob", "bea"]
    run(body)
    assert traced.check_schemas() >= 10


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_ten_megabytes_beyond_the_cap(tmp_path: Path, mode: str) -> None:
    traced = ContentTraced(tmp_path)

    async def body() -> None:
        async with traced.client(mode) as c:
            links = []
            for _ in range(2):
                result = await c.call_tool("big", {})
                assert result.is_error is False and len(result.content[0].text) < 66_000
                link = result.content[1]
                assert isinstance(link, types.ResourceLink)
                links.append(str(link.uri))
            assert await read_whole(c, links[1]) == TEN_MB
            with pytest.raises(MCPError) as evicted:                 # the quota holds one: the older went
                await c.read_resource(links[0])
            assert evicted.value.error.code == (-32002 if mode == "legacy" else -32602)
            assert evicted.value.error.data == {"uri": links[0]}
    run(body)
    assert traced.check_schemas() >= 10
