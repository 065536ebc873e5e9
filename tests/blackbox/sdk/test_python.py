"""Interop: the official Python SDK client (mcp 2.3.0) against a real `mcpwrap serve` process.

Every test spawns the server through the SDK's stdio transport, with its own secret file
and state dir, and runs under `anyio.run` (trio unless said otherwise) inside `fail_after`.
Wire evidence comes from `--log-level debug`, which traces each line the server reads
(`mcpwrap <- ...`) and writes (`mcpwrap -> ...`) on stderr; the SDK's `errlog` puts that
stderr in a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.client.stdio import stdio_client

from tests import mcpschema, procs
from tests.harness import HANG_S

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).parents[2] / "fixtures" / "sdk.toml"
MODERN = "2026-07-28"
TOOL_NAMES = ["echo", "status", "slow", "sleeper", "create", "greet", "deploy"]

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


# --- plumbing ---------------------------------------------------------------------------------
def server_params(tmp_path: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcpwrap", "serve", str(FIXTURE), "--secret-file", str(tmp_path / "secret"),
              "--state-dir", str(tmp_path / "state"), *extra],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
        cwd=str(ROOT))


def run(body: Callable[[], Awaitable[None]], timeout: float = 2 * HANG_S, backend: str = "trio") -> None:
    async def main() -> None:
        with anyio.fail_after(timeout):
            await body()
    anyio.run(main, backend=backend)


class Traced:
    """A `Client` whose server runs with `--log-level debug`, its stderr kept in a file."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.log_path = tmp_path / "server-stderr.log"

    @contextlib.asynccontextmanager
    async def client(self, mode: str, **kwargs: Any) -> AsyncIterator[Client]:
        with open(self.log_path, "w") as self.errlog:
            transport = stdio_client(server_params(self.tmp_path, "--log-level", "debug"), errlog=self.errlog)
            async with Client(transport, mode=mode, read_timeout_seconds=HANG_S, **kwargs) as c:
                yield c

    def _flush(self) -> None:
        if not self.errlog.closed:
            self.errlog.flush()

    def _messages(self, prefix: str) -> list[dict[str, Any]]:
        self._flush()
        found = []
        for line in self.log_path.read_text().splitlines():
            if line.startswith(prefix):
                message = json.loads(line[len(prefix):])
                found += message if isinstance(message, list) else [message]
        return found

    def received(self) -> list[dict[str, Any]]:
        return self._messages("mcpwrap <- ")

    def sent(self) -> list[dict[str, Any]]:
        return self._messages("mcpwrap -> ")

    def received_methods(self) -> list[str]:
        return [m["method"] for m in self.received() if "method" in m]

    def check_schemas(self) -> int:
        """Validate every message the server wrote against the schema of its request's era."""
        requests: dict[Any, tuple[str, str]] = {}
        legacy_rev = "2025-11-25"
        for m in self.received():
            if "method" in m and "id" in m:
                meta = (m.get("params") or {}).get("_meta") or {}
                modern = "io.modelcontextprotocol/protocolVersion" in meta and m["method"] != "initialize"
                requests[m["id"]] = (m["method"], MODERN if modern else legacy_rev)
        checked = 0
        for m in self.sent():
            if "method" in m:
                params = m.get("params") or {}
                related = params.get("progressToken", params.get("requestId"))
                rev = requests.get(related, (None, legacy_rev))[1] if m["method"].startswith("notifications/") \
                    else legacy_rev
                mcpschema.check(rev, m)
            else:
                method, rev = requests.get(m.get("id"), (None, legacy_rev))
                mcpschema.check(rev, m, method)
            checked += 1
        return checked

    def stderr(self) -> str:
        self._flush()
        return self.log_path.read_text()


def processes_with(marker: str) -> list[int]:
    """This run's live processes whose argv contains `marker` as a whole argument."""
    return [p.pid for p in procs.mine() if marker.encode() in p.read("cmdline").split(b"\0")]


def unique_seconds() -> str:
    return f"61.{os.getpid()}{random.randrange(10**6):06d}"


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def wait_until(predicate: Callable[[], bool], seconds: float = HANG_S) -> bool:
    """Poll until `predicate()` holds (True) or the hang guard runs out (False)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.02)
    return True


# --- 1. legacy basics ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_legacy_initialize_list_and_call(tmp_path: Path, backend: str) -> None:
    async def body() -> None:
        async with Client(server_params(tmp_path), mode="legacy", read_timeout_seconds=HANG_S) as c:
            assert c.protocol_version == "2025-11-25"
            assert c.server_info is not None
            assert c.server_info.name == "sdk-interop" and c.server_info.version == "0.9.1"
            assert c.instructions == "Tools for SDK interop tests."
            assert c.server_capabilities.tools is not None
            tools = await c.list_tools()
            assert [t.name for t in tools.tools] == TOOL_NAMES
            status = next(t for t in tools.tools if t.name == "status")
            assert status.output_schema and status.output_schema["required"] == ["ok"]

            echo = await c.call_tool("echo", {"msg": "hello; $(touch /nope)"})
            assert echo.is_error is False
            assert text_of(echo) == "hello; $(touch /nope)\n"

            structured = await c.call_tool("status", {})
            assert structured.is_error is False
            assert structured.structured_content == {"ok": True, "count": 3}
            assert json.loads(text_of(structured)) == {"ok": True, "count": 3}
    run(body, backend=backend)


def test_legacy_progress_callback(tmp_path: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def body() -> None:
        async with Client(server_params(tmp_path), mode="legacy", read_timeout_seconds=HANG_S) as c:
            await c.list_tools()
            result = await c.call_tool("slow", {}, progress_callback=on_progress)
            assert result.is_error is False and text_of(result) == "finished\n"
            assert await wait_until(lambda: len(seen) >= 5)
    run(body)
    values = [p for p, _, _ in seen]
    assert values == [1, 2, 3, 4, 5]
    assert all(b > a for a, b in zip(values, values[1:]))
    assert all(total == 5 for _, total, _ in seen)


def test_legacy_logging_forwards_tool_stderr(tmp_path: Path) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def body() -> None:
        async with Client(server_params(tmp_path), mode="legacy", read_timeout_seconds=HANG_S,
                          logging_callback=on_log) as c:
            await c.list_tools()
            await c.call_tool("slow", {})                 # default threshold (warning): nothing forwarded
            assert logs == []                             # (late ones would show in the count below)
            await c.set_logging_level("info")
            result = await c.call_tool("slow", {})
            assert result.is_error is False
            assert await wait_until(lambda: len(logs) >= 5)
    run(body)
    assert [entry.data for entry in logs] == [f"step {i}/5" for i in range(1, 6)]
    assert all(entry.level == "info" and entry.logger == "slow" for entry in logs)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("how", ["cancel-scope", "read-timeout"])
def test_cancel_kills_the_tool_processes(tmp_path: Path, mode: str, how: str) -> None:
    """`sh -c 'sleep N & sleep N'`: the shell, its foreground and its background child all go."""
    marker = unique_seconds()
    traced = Traced(tmp_path)
    started: list[list[int]] = []

    async def body() -> None:
        async with traced.client(mode) as c:
            await c.list_tools()
            async with anyio.create_task_group() as tg:
                async def call() -> None:
                    if how == "cancel-scope":
                        await c.call_tool("sleeper", {"secs": marker})
                        return
                    with pytest.raises(MCPError) as caught:
                        # The SDK's timer is the mechanism under test: it must outlast the tool's start.
                        await c.call_tool("sleeper", {"secs": marker}, read_timeout_seconds=10)
                    assert caught.value.error.code == -32001
                tg.start_soon(call)
                assert await wait_until(lambda: len(processes_with(marker)) >= 3), "the tool never started"
                started.append(processes_with(marker))
                if how == "cancel-scope":
                    tg.cancel_scope.cancel()
            gone = await wait_until(lambda: not processes_with(marker))
            assert gone, f"tool processes survive the cancellation: {processes_with(marker)}"
            # the connection is still usable, and the cancelled call never got a response
            assert text_of(await c.call_tool("echo", {"msg": "after"})) == "after\n"
            calls = [m for m in traced.received() if m.get("method") == "tools/call"
                     and m["params"]["name"] == "sleeper"]
            assert len(calls) == 1
            cancels = [m for m in traced.received() if m.get("method") == "notifications/cancelled"]
            assert [m["params"]["requestId"] for m in cancels] == [calls[0]["id"]]
            assert not any(m.get("id") == calls[0]["id"] and "method" not in m for m in traced.sent())
    run(body)
    assert len(started[0]) == 3
    assert traced.check_schemas() > 0


# --- 2./3. which handshake goes on the wire -----------------------------------------------------
def test_auto_connects_without_initialize(tmp_path: Path) -> None:
    traced = Traced(tmp_path)
    progress: list[float] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def body() -> None:
        async with traced.client("auto", logging_callback=on_log, log_level="info") as c:
            assert c.protocol_version == MODERN
            assert c.server_info is not None and c.server_info.name == "sdk-interop"
            tools = await c.list_tools()
            assert [t.name for t in tools.tools] == TOOL_NAMES
            echo = await c.call_tool("echo", {"msg": "modern"})
            assert echo.is_error is False and text_of(echo) == "modern\n"
            status = await c.call_tool("status", {})
            assert status.structured_content == {"ok": True, "count": 3}
            slow = await c.call_tool("slow", {}, progress_callback=on_progress)
            assert text_of(slow) == "finished\n"
            assert await wait_until(lambda: len(progress) >= 5 and len(logs) >= 5)
        methods = traced.received_methods()
        assert methods[0] == "server/discover"
        assert "initialize" not in methods and "notifications/initialized" not in methods
        first = traced.received()[0]
        assert first["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
    run(body)
    assert traced.check_schemas() > 0
    assert progress == [1, 2, 3, 4, 5]
    assert logs == [f"step {i}/5" for i in range(1, 6)]


def test_pinned_modern_sends_neither_discover_nor_initialize(tmp_path: Path) -> None:
    traced = Traced(tmp_path)

    async def body() -> None:
        async with traced.client(MODERN) as c:
            assert c.protocol_version == MODERN
            tools = await c.list_tools()
            assert [t.name for t in tools.tools] == TOOL_NAMES
            assert text_of(await c.call_tool("echo", {"msg": "pinned"})) == "pinned\n"
            assert (await c.call_tool("status", {})).structured_content == {"ok": True, "count": 3}
        methods = traced.received_methods()
        assert methods[0] == "tools/list"
        assert not {"initialize", "notifications/initialized", "server/discover"} & set(methods)
        answers = [m for m in traced.sent() if "result" in m]
        assert answers and all(m["result"]["resultType"] == "complete" for m in answers)
    run(body)
    assert traced.check_schemas() > 0


def test_legacy_mode_does_the_handshake(tmp_path: Path) -> None:
    traced = Traced(tmp_path)

    async def body() -> None:
        async with traced.client("legacy") as c:
            assert c.protocol_version == "2025-11-25"
            assert text_of(await c.call_tool("echo", {"msg": "old"})) == "old\n"
        methods = traced.received_methods()
        assert methods[:2] == ["initialize", "notifications/initialized"]
        assert "server/discover" not in methods
        init = traced.received()[0]
        assert init["params"]["protocolVersion"] == "2025-11-25"
        assert not any("_meta" in (m.get("params") or {}) and
                       "io.modelcontextprotocol/protocolVersion" in m["params"]["_meta"]
                       for m in traced.received() if "method" in m)
    run(body)
    assert traced.check_schemas() > 0


# --- 4. elicitation -----------------------------------------------------------------------------
def _elicit_answering(action: str, content: dict[str, Any] | None, seen: list[Any]):
    async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams
                        ) -> types.ElicitResult | types.ErrorData:
        seen.append(params)
        return types.ElicitResult(action=action, content=content)
    return on_elicit


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
def test_confirmation(tmp_path: Path, mode: str, action: str) -> None:
    target = tmp_path / "made.txt"
    traced = Traced(tmp_path)
    seen: list[Any] = []

    async def body() -> None:
        async with traced.client(mode, elicitation_callback=_elicit_answering(action, None, seen)) as c:
            await c.list_tools()
            result = await c.call_tool("create", {"path": str(target), "name": "thing"})
            if action == "accept":
                assert result.is_error is False, text_of(result)
            else:
                assert result.is_error is True
                verb = "declined" if action == "decline" else "cancelled"
                assert verb in text_of(result) and "nothing ran" in text_of(result)
    run(body)
    assert traced.check_schemas() > 0

    assert len(seen) == 1
    assert isinstance(seen[0], types.ElicitRequestFormParams)
    assert seen[0].message == "Really create thing?"
    if action == "accept":
        assert target.read_text() == "run\n"              # ran exactly once
    else:
        assert not target.exists()
    _assert_elicitation_wire(traced, mode, rounds=1)


def _assert_elicitation_wire(traced: Traced, mode: str, rounds: int) -> None:
    sent, received = traced.sent(), traced.received()
    asks = [m for m in sent if m.get("method") == "elicitation/create"]
    calls = [m for m in received if m.get("method") == "tools/call"]
    if mode == "legacy":
        assert len(asks) == rounds and len(calls) == 1
        answers = [m for m in received if m.get("id") == asks[0]["id"] and "method" not in m]
        assert len(answers) == 1 and "result" in answers[0]
    else:
        assert asks == []                                     # MRTR: no server-to-client request
        required = [m for m in sent if m.get("result", {}).get("resultType") == "input_required"]
        assert len(required) == rounds and len(calls) == rounds + 1
        for previous, retry in zip(required, calls[1:]):
            assert retry["params"]["requestState"] == previous["result"]["requestState"]
            assert set(retry["params"]["inputResponses"]) == set(previous["result"]["inputRequests"])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_elicited_missing_argument(tmp_path: Path, mode: str) -> None:
    target = tmp_path / "greeted.txt"
    traced = Traced(tmp_path)
    seen: list[Any] = []

    async def body() -> None:
        async with traced.client(mode, elicitation_callback=_elicit_answering("accept", {"name": "Ada"}, seen)) as c:
            tools = await c.list_tools()
            greet = next(t for t in tools.tools if t.name == "greet")
            assert greet.input_schema["required"] == ["path"]       # name is asked for when missing
            result = await c.call_tool("greet", {"path": str(target)})
            assert result.is_error is False, text_of(result)
            assert text_of(result) == "hello Ada\n"
    run(body)
    assert traced.check_schemas() > 0

    assert target.read_text() == "Ada\n"
    assert len(seen) == 1 and isinstance(seen[0], types.ElicitRequestFormParams)
    assert "name" in seen[0].message
    schema = seen[0].requested_schema
    assert schema["properties"]["name"]["type"] == "string"
    assert schema.get("required") == ["name"]
    _assert_elicitation_wire(traced, mode, rounds=1)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_elicited_argument_then_confirmation(tmp_path: Path, mode: str) -> None:
    """Two rounds: the missing argument first, then a confirmation that shows the elicited value."""
    target = tmp_path / "deployed.txt"
    traced = Traced(tmp_path)
    seen: list[Any] = []

    async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams
                        ) -> types.ElicitResult | types.ErrorData:
        seen.append(params)
        if "target" in params.requested_schema.get("properties", {}):
            return types.ElicitResult(action="accept", content={"target": "staging"})
        return types.ElicitResult(action="accept")

    async def body() -> None:
        async with traced.client(mode, elicitation_callback=on_elicit) as c:
            await c.list_tools()
            result = await c.call_tool("deploy", {"path": str(target)})
            assert result.is_error is False, text_of(result)
    run(body)
    assert target.read_text() == "staging\n"
    assert [p.message for p in seen] == ["'deploy' needs: target", "Deploy to staging?"]
    assert seen[0].requested_schema["properties"]["target"]["enum"] == ["staging", "production"]
    _assert_elicitation_wire(traced, mode, rounds=2)
    assert traced.check_schemas() > 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_concurrent_confirmations(tmp_path: Path, mode: str) -> None:
    traced = Traced(tmp_path)
    seen: list[Any] = []
    targets = [tmp_path / f"made-{i}.txt" for i in range(3)]

    async def body() -> None:
        async with traced.client(mode, elicitation_callback=_elicit_answering("accept", None, seen)) as c:
            await c.list_tools()
            results: dict[int, types.CallToolResult] = {}

            async def one(i: int) -> None:
                results[i] = await c.call_tool("create", {"path": str(targets[i]), "name": f"thing-{i}"})
            async with anyio.create_task_group() as tg:
                for i in range(len(targets)):
                    tg.start_soon(one, i)
            assert all(r.is_error is False for r in results.values())
    run(body)
    assert all(t.read_text() == "run\n" for t in targets)
    assert sorted(p.message for p in seen) == [f"Really create thing-{i}?" for i in range(3)]
    assert traced.check_schemas() > 0


def test_legacy_cancel_while_asking_never_runs_the_tool(tmp_path: Path) -> None:
    """The caller cancels tools/call while the user is being asked; a late accept must not run it."""
    target = tmp_path / "made.txt"
    traced = Traced(tmp_path)
    asked, release = anyio.Event(), anyio.Event()

    async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams
                        ) -> types.ElicitResult | types.ErrorData:
        asked.set()
        await release.wait()
        return types.ElicitResult(action="accept")

    async def body() -> None:
        async with traced.client("legacy", elicitation_callback=on_elicit) as c:
            await c.list_tools()
            async with anyio.create_task_group() as tg:
                tg.start_soon(c.call_tool, "create", {"path": str(target), "name": "thing"})
                await asked.wait()
                tg.cancel_scope.cancel()
            release.set()
            assert await wait_until(lambda: any("result" in m and isinstance(m.get("id"), str)
                                                for m in traced.received())), "the late answer never arrived"
            assert text_of(await c.call_tool("echo", {"msg": "after"})) == "after\n"
    run(body)
    assert not target.exists()
    call = next(m for m in traced.received() if m.get("method") == "tools/call")
    assert not any(m.get("id") == call["id"] for m in traced.sent())
    assert traced.check_schemas() > 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_accept_without_the_required_field_is_refused_not_asked_forever(tmp_path: Path, mode: str) -> None:
    """An `accept` whose content lacks the required elicited field ends the call after one question.

    The requested schema says `required: ["name"]` and ElicitResult.content "Contains values
    matching the requested schema", so such an answer is invalid: the call ends with an error
    result that nothing ran, instead of the same question again (which once looped forever with
    an auto-accepting client). The callback switches to `cancel` from the 5th question on, so a
    regression ends quickly instead of hanging."""
    target = tmp_path / "greeted.txt"
    traced = Traced(tmp_path)
    seen: list[Any] = []

    async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams
                        ) -> types.ElicitResult | types.ErrorData:
        seen.append(params)
        return types.ElicitResult(action="accept" if len(seen) < 5 else "cancel", content={})

    outcome: list[types.CallToolResult] = []

    async def body() -> None:
        async with traced.client(mode, elicitation_callback=on_elicit) as c:
            await c.list_tools()
            outcome.append(await c.call_tool("greet", {"path": str(target)}))
    run(body)
    assert not target.exists()
    assert len(seen) == 1, (f"the server asked {len(seen)} times for 'name' after accepts without it; "
                            f"questions: {[p.message for p in seen]}")
    assert outcome[0].is_error is True and "nothing ran" in text_of(outcome[0])
    assert "name" in text_of(outcome[0])


def test_request_state_resumes_on_another_process_sharing_the_secret(tmp_path: Path) -> None:
    """Manual MRTR: input_required from one server process, answered to a second one."""
    target = tmp_path / "made.txt"
    arguments = {"path": str(target), "name": "thing"}
    first_dir, second_dir = tmp_path / "one", tmp_path / "two"
    first_dir.mkdir()
    second_dir.mkdir()
    secret = ["--secret-file", str(tmp_path / "shared-secret")]
    caps = {"elicitation_callback": _elicit_answering("accept", None, [])}

    def params_in(where: Path) -> StdioServerParameters:
        p = server_params(where)
        args = list(p.args)
        at = args.index("--secret-file")
        args[at:at + 2] = secret
        return p.model_copy(update={"args": args})

    async def body() -> None:
        async with Client(params_in(first_dir), mode=MODERN, read_timeout_seconds=HANG_S, **caps) as c:
            await c.list_tools()
            first = await c.session.call_tool("create", arguments, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert list(first.input_requests) == ["confirm"]
        assert not target.exists()
        answer = {"confirm": types.ElicitResult(action="accept")}
        async with Client(params_in(second_dir), mode=MODERN, read_timeout_seconds=HANG_S, **caps) as c:
            await c.list_tools()
            with pytest.raises(MCPError) as caught:               # bound to the arguments
                await c.session.call_tool("create", {**arguments, "name": "other"}, allow_input_required=True,
                                          input_responses=answer, request_state=first.request_state)
            assert caught.value.error.code == -32602
            assert not target.exists()
            done = await c.call_tool("create", arguments, input_responses=answer, request_state=first.request_state)
            assert done.is_error is False, text_of(done)
    run(body)
    assert target.read_text() == "run\n"


# --- 5. no elicitation callback -----------------------------------------------------------------
def test_legacy_without_elicitation_callback_is_an_error_result(tmp_path: Path) -> None:
    target = tmp_path / "made.txt"
    traced = Traced(tmp_path)

    async def body() -> None:
        async with traced.client("legacy") as c:
            await c.list_tools()
            result = await c.call_tool("create", {"path": str(target), "name": "thing"})
            assert result.is_error is True
            assert "confirmation" in text_of(result) and "nothing ran" in text_of(result)
    run(body)
    assert traced.check_schemas() > 0
    assert not target.exists()
    assert not any(m.get("method") == "elicitation/create" for m in traced.sent())
    init = traced.received()[0]
    assert init["method"] == "initialize" and "elicitation" not in init["params"]["capabilities"]


@pytest.mark.parametrize("mode", ["auto", MODERN])
def test_modern_without_elicitation_callback_is_32021(tmp_path: Path, mode: str) -> None:
    target = tmp_path / "made.txt"
    traced = Traced(tmp_path)

    async def body() -> None:
        async with traced.client(mode) as c:
            await c.list_tools()
            with pytest.raises(MCPError) as caught:
                await c.call_tool("create", {"path": str(target), "name": "thing"})
            assert caught.value.error.code == -32021
            assert caught.value.error.data == {"requiredCapabilities": {"elicitation": {}}}
            assert "confirmation" in caught.value.error.message
            assert text_of(await c.call_tool("echo", {"msg": "still here"})) == "still here\n"
    run(body)
    assert traced.check_schemas() > 0
    assert not target.exists()
    calls = [m for m in traced.received() if m.get("method") == "tools/call"]
    assert len(calls) == 2                                    # no retry of the refused call
