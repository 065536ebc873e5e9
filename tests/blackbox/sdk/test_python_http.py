"""Interop: the official Python SDK's Streamable HTTP client (mcp 2.3.0) against `serve --http`, both eras.

`mode="legacy"` does `initialize` and holds a session; `mode="auto"` speaks 2026-07-28
statelessly. Each lists, calls with progress, is asked for a missing argument, and cancels
a call whose tool must then be killed.

Legacy cancellation and the SDK (mcp 2.3.0): a legacy POST's request is cancelled by a
`notifications/cancelled` sent in a POST of its own, and the SDK keeps the call's POST
open, waiting for the server to end it. Its POST tasks outlive the read stream they
deliver to: one that gets an error status once the client is closing raises
ClosedResourceError out of `streamable_http_client` (`_handle_post_request` sends the
stand-in error unguarded). The server used to leave the cancelled call's POST open until
the session ended, and the SDK's own DELETE on exit then answered it 503: that was the
flake (14 of 30 runs under stress-ng). Now the server ends the POST at the cancellation
(an SSE stream without an answer), and the test waits for that end before it leaves the
client, so no POST is open when the SDK closes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests import procs
from tests.harness import HANG_S
from tests.httpharness import HttpServer
from tests.blackbox.sdk.test_python import wait_until

TOOLS = Path(__file__).parents[2] / "fixtures" / "http.toml"
pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def run(tmp_path: Path, mode: str, body: Callable[[Client], Awaitable[None]],
        on_response: Callable[[Any], Awaitable[None]] | None = None) -> list[str]:
    """Run `body` with a client of `mode` (its HTTP responses, headers read, shown to `on_response`);
    the methods the server received, in order."""
    async def elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def main() -> None:
        http = create_mcp_http_client()
        http.event_hooks["response"] = [on_response] if on_response else []
        with anyio.fail_after(2 * HANG_S):
            async with http, Client(streamable_http_client(f"http://{server.host}:{server.port}{server.path}",
                                                           http_client=http), mode=mode,
                                    read_timeout_seconds=HANG_S, elicitation_callback=elicit) as client:
                await body(client)

    with HttpServer(TOOLS, tmp_path, "--log-level", "debug") as server:
        anyio.run(main, backend="trio")
    received = [json.loads(line[len("mcpwrap <- "):]) for line in server.stderr if line.startswith("mcpwrap <- ")]
    return [m["method"] for m in received if "method" in m and
            (mode == "legacy") != ("io.modelcontextprotocol/protocolVersion" in m.get("params", {}).get("_meta", {}))]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_list_call_with_progress_and_elicit(tmp_path: Path, mode: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async def body(client: Client) -> None:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"echo", "slow", "greet"} <= names
        assert text_of(await client.call_tool("echo", {"msg": "over http"})) == "over http\n"
        slow = await client.call_tool("slow", {}, progress_callback=on_progress)
        assert text_of(slow) == "finished\n"
        assert await wait_until(lambda: len(seen) >= 3)
        greet = await client.call_tool("greet", {})
        assert text_of(greet) == "hello Ada\n", greet

    methods = run(tmp_path, mode, body)        # every request of the era asked for: legacy, or modern _meta
    assert methods[0] == ("initialize" if mode == "legacy" else "server/discover")
    assert "tools/call" in methods and ("initialize" in methods) == (mode == "legacy")
    assert seen == [1, 2, 3]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_cancel_kills_the_tool(tmp_path: Path, mode: str) -> None:
    secs = f"603.{os.getpid() % 1000000:06d}"
    ended: list[int] = []                  # statuses of the responses to the cancelled call's POST

    async def on_response(response: Any) -> None:
        if secs.encode() in response.request.content:
            ended.append(response.status_code)

    async def body(client: Client) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "sleeper", {"secs": secs})
            assert await wait_until(lambda: len(procs.with_cmdline(secs)) >= 2)
            group.cancel_scope.cancel()
        assert await wait_until(lambda: not procs.with_cmdline(secs))
        if mode == "legacy":               # the server ends the POST of a call cancelled by notification
            assert await wait_until(lambda: ended)     # (2026-07-28: the client closed it, which was the cancellation)
            assert ended == [200]
        assert text_of(await client.call_tool("echo", {"msg": "still here"})) == "still here\n"

    methods = run(tmp_path, mode, body, on_response)
    assert mode != "legacy" or "notifications/cancelled" in methods
