"""Durable tasks: the store, the detached supervisor, both protocol eras, and the CLI.

End-to-end tests spawn `mcpwrap serve` over real pipes and validate every
message it writes against the official schema of the revision in force (plus
the tasks extension schema for 2026-07-28 task results). No sleeps: every wait
is a bounded poll against a deadline.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from mcpwrap.config import load as config
from mcpwrap.state import signing
from mcpwrap.tasks import index as task_index
from mcpwrap.tasks import store as tasks
from mcpwrap.tasks import supervisor
from mcpwrap.protocol import tasking
from mcpwrap.protocol.tasking import TaskLookupError, TaskRecord, TaskTerminalError
from tests import mcpschema, procs
from tests.harness import until
from tests.procs import group_alive

SCHEMAS = Path(__file__).parents[2] / "schemas"
OLDER = "2025-06-18"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
EXT = "ext-tasks"
EXT_ID = "io.modelcontextprotocol/tasks"
TIMEOUT = 30.0                            # a hang guard only: every wait ends on an event

TOOLS = """
[tools.gated]
shell = 'while [ ! -e "$MCP_ARG_GO" ]; do sleep 0.05; done; echo done'
task = "optional"
task_poll = "250ms"
args.go = { type = "string" }

[tools.long]
shell = 'sleep "$MCP_ARG_SECONDS" & sleep "$MCP_ARG_SECONDS"; wait'
task = "optional"
timeout = "5m"
args.seconds = { type = "string", pattern = "^[0-9.]+$" }

[tools.failing]
shell = 'echo broken >&2; exit 3'
task = "optional"

[tools.counting]
shell = 'for i in 1 2 3; do echo "$i/3"; sleep 0.3; done'
task = "optional"
progress = '(\\d+)/(\\d+)'

[tools.always]
shell = 'echo hi'
task = "always"

[tools.plain]
shell = 'echo plain'
"""


# --- schema validation --------------------------------------------------------------------
@functools.cache
def _registry() -> Registry:
    resources = []
    for name in (OLDER, LEGACY, MODERN, EXT):
        contents = json.loads((SCHEMAS / name / "schema.json").read_text())
        resource = Resource.from_contents(contents, default_specification=DRAFT202012)
        resources.append((resource.id() or f"urn:mcp:{name}", resource))
        resources.append((f"urn:mcp:{name}", resource))
    return Registry().with_resources(resources)


@functools.cache
def _validator(schema: str, definition: str) -> Draft202012Validator:
    contents = _registry()[f"urn:mcp:{schema}"].contents
    section = "$defs" if "$defs" in contents else "definitions"     # 2025-06-18 and older: draft-07
    return Draft202012Validator({"$ref": f"{contents.get('$id', f'urn:mcp:{schema}')}#/{section}/{definition}"},
                                registry=_registry())


def check(schema: str, definition: str, instance: Any) -> None:
    errors = sorted(_validator(schema, definition).iter_errors(instance), key=lambda e: list(e.path))
    assert not errors, f"{definition} ({schema}): {errors[0].message} in {json.dumps(instance)[:600]}"


# --- a real `mcpwrap serve` over pipes ------------------------------------------------------
class Server:
    """One `mcpwrap serve` process; every message it writes is schema-checked for `rev`.

    Two checks: the envelope against our registry of official schemas, and the
    project's per-method result check (`tests/mcpschema.py`). Its strict mode is
    off here: it closes each `allOf` branch on its own, so it rejects valid
    allOf-composed task shapes (ext CreateTaskResult/GetTaskResult, 2025-11-25
    TaskStatusNotificationParams).
    """

    def __init__(self, env: Env, rev: str) -> None:
        self.rev = rev
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpwrap", "serve", str(env.tools), "--state-dir", str(env.state),
             "--secret-file", str(env.secret), "--no-watch"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.held: list[dict[str, Any]] = []
        self.invalid: list[str] = []      # schema violations seen by the reader thread
        self.methods: dict[int, str] = {}
        self.ids = iter(range(1, 10**6))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        env.servers.append(self)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:                # closed at EOF, by the one thread that reads it
            for line in self.proc.stdout:
                message = json.loads(line)
                try:
                    check(self.rev, "JSONRPCMessage", message)
                    mcpschema.check(self.rev, message, self.methods.get(message.get("id", -1)), strict=False)
                except AssertionError as exc:
                    self.invalid.append(str(exc))
                self.inbox.put(message)
        self.inbox.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def next(self, match: Callable[[dict[str, Any]], bool], timeout: float = TIMEOUT) -> dict[str, Any]:
        assert not self.invalid, self.invalid
        for message in self.held:
            if match(message):
                self.held.remove(message)
                return message
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self.inbox.get(timeout=left)
            except queue.Empty:
                break
            assert message is not None, "the server closed stdout"
            if match(message):
                return message
            self.held.append(message)
        raise AssertionError(f"no matching message within {timeout}s (held: {self.held})")

    def start(self, method: str, params: dict[str, Any] | None = None, extension: bool = True) -> int:
        request_id = next(self.ids)
        params = dict(params or {})
        if self.rev == MODERN:
            caps = {"extensions": {EXT_ID: {}}} if extension else {}
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                               "io.modelcontextprotocol/clientCapabilities": caps}
        self.methods[request_id] = method
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def answer(self, request_id: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        return self.next(lambda m: m.get("id") == request_id and "method" not in m, timeout)

    def request(self, method: str, params: dict[str, Any] | None = None, extension: bool = True) -> dict[str, Any]:
        return self.answer(self.start(method, params, extension))

    def initialize(self) -> Server:
        reply = self.request("initialize", {"protocolVersion": self.rev, "capabilities": {},
                                            "clientInfo": {"name": "test", "version": "1"}})
        assert reply["result"]["protocolVersion"] == self.rev
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def close(self) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):      # a killed server cannot read its EOF
            self.proc.stdin.close()
        try:
            self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.reader.join(TIMEOUT)             # every message checked, stdout closed


class Env:
    def __init__(self, root: Path) -> None:
        self.tools, self.state, self.secret = root / "tools.toml", root / "state", root / "secret"
        self.tools.write_text(TOOLS)
        self.go = root / "go"             # `gated` tasks finish only once this file exists
        self.gated = {"go": str(self.go)}
        self.servers: list[Server] = []
        self.store = tasks.Store.for_tools_file(self.state, self.tools)

    def server(self, rev: str = LEGACY) -> Server:
        server = Server(self, rev)
        return server.initialize() if rev != MODERN else server

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mcpwrap", "tasks", *args[:1], str(self.tools), *args[1:],
                               "--state-dir", str(self.state)], capture_output=True, text=True, timeout=TIMEOUT,
                              check=False)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    for server in e.servers:
        server.close()
        assert not server.invalid, server.invalid
    for record in e.store.records():          # never leave a supervisor (or its command) behind
        if not record.terminal:
            with contextlib.suppress(TaskTerminalError, TaskLookupError):
                e.store.cancel(record.task_id)
    pids = [r.supervisor_pid for r in e.store.records() if r.supervisor_pid]
    until(lambda: all(tasks.process_start(p) is None for p in pids), what="supervisors to exit")


def unique_seconds() -> str:
    return f"{40 + random.random() * 10:.6f}"


def sleepers(seconds: str) -> list[procs.Proc]:
    """The `sleep SECONDS` processes of a `long` task (the marker is unique per test)."""
    return [p for p in procs.mine() if p.read("cmdline") == f"sleep\0{seconds}\0".encode()]


def legacy_create(server: Server, tool: str, arguments: dict[str, Any] | None = None, **extra: Any) -> str:
    reply = server.request("tools/call", {"name": tool, "arguments": arguments or {}, "task": {"ttl": 60000}, **extra})
    check(LEGACY, "CreateTaskResult", reply["result"])
    task = reply["result"]["task"]
    assert task["status"] == "working" and task["ttl"] == 60000
    return str(task["taskId"])


def legacy_get(server: Server, task_id: str) -> dict[str, Any]:
    reply = server.request("tasks/get", {"taskId": task_id})
    check(LEGACY, "GetTaskResult", reply["result"])
    return reply["result"]


def modern_get(server: Server, task_id: str) -> dict[str, Any]:
    reply = server.request("tasks/get", {"taskId": task_id})
    check(EXT, "GetTaskResult", reply["result"])
    check(MODERN, "JSONRPCResultResponse", reply)
    return reply["result"]


# --- the store ----------------------------------------------------------------------------
KEY = b"k" * 32                           # the store-level tests' secret key (supervisor tests use a file)


def new_record(store: tasks.Store, ttl_ms: int = 60_000, claim: bool = True) -> TaskRecord:
    record = store.create(tool="t", arguments={"a": 1}, ttl_ms=ttl_ms, poll_ms=100,
                          tools_file=Path("/nonexistent/tools.toml"), digest="0" * 64, snapshot=None, key=KEY)
    if claim:                             # this process stands in for a live supervisor
        record = store.claim(record.task_id, os.getpid(), tasks.process_start(os.getpid())) or record
    return record


CREATOR = """
import sys
from pathlib import Path
from mcpwrap.tasks.store import Store
store = Store(Path(sys.argv[1]))
for _ in range(25):
    r = store.create(tool="t", arguments={}, ttl_ms=60000, poll_ms=100, tools_file=Path("/x"),
                     digest="0" * 64, snapshot=None, key=b"k" * 32)
    print(r.task_id, flush=True)
store.gc()
"""


def test_concurrent_creation_from_several_processes(tmp_path: Path) -> None:
    root = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, "-c", CREATOR, str(root)], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    ids = [line.strip() for p in procs for line in p.communicate(timeout=60)[0].splitlines()]
    assert all(p.returncode == 0 for p in procs)
    assert len(ids) == 100 and len(set(ids)) == 100
    store = tasks.Store(root)
    assert sorted(store.ids()) == sorted(ids)
    assert all(store.read(i) is not None for i in ids)


def test_creation_writes_the_record_once_and_the_supervisor_claims_it(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    tools, keyring = config.load(env.tools), signing.ensure_secret(env.secret, time.time())
    written: list[str] = []
    write = tasks.write_atomic
    monkeypatch.setattr(tasks, "write_atomic", lambda path, data, exclusive=False: (
        written.append(path.name), write(path, data, exclusive))[1])
    record = supervisor.create_task(env.store, tools, tools.tool("gated"), env.gated, 60_000,  # type: ignore[arg-type]
                                    keyring, env.secret)
    assert written == [f"{record.task_id}.json"] and record.supervisor_pid is None
    monkeypatch.undo()
    until(lambda: (r := env.store.read(record.task_id)) and r.supervisor_pid, what="the supervisor's claim")
    env.go.touch()
    until(lambda: env.store.get(record.task_id).status == "completed", what="completion")


# --- 2025-11-25 over real pipes -------------------------------------------------------------
def test_acceptance_task_outlives_its_server_and_any_process_answers(env: Env) -> None:
    a = env.server()
    tools = a.request("tools/list")["result"]["tools"]
    assert {t["name"]: t.get("execution") for t in tools}["gated"] == {"taskSupport": "optional"}
    task_id = legacy_create(a, "gated", env.gated)
    a.close()
    assert a.proc.returncode == 0
    b = env.server()
    assert legacy_get(b, task_id)["status"] == "working"
    env.go.touch()
    done = until(lambda: (r := legacy_get(b, task_id))["status"] == "completed" and r, what="completion")
    assert done["taskId"] == task_id
    payload = b.request("tasks/result", {"taskId": task_id})["result"]
    check(LEGACY, "CallToolResult", payload)
    assert payload["content"] == [{"type": "text", "text": "done\n"}]
    assert payload["_meta"][tasking.RELATED_TASK] == {"taskId": task_id}
    cli = env.cli("result", task_id)
    assert (cli.returncode, cli.stdout) == (0, "done\n")


def test_tasks_result_blocks_then_returns_with_related_task(env: Env) -> None:
    server = env.server()
    task_id = legacy_create(server, "gated", env.gated)
    waiting = server.start("tasks/result", {"taskId": task_id})
    status = legacy_get(server, task_id)                    # answered while tasks/result is blocked
    assert status["status"] == "working" and not [m for m in server.held if m.get("id") == waiting]
    env.go.touch()
    reply = server.answer(waiting)
    check(LEGACY, "JSONRPCResultResponse", reply)
    check(LEGACY, "GetTaskPayloadResult", reply["result"])
    assert reply["result"]["_meta"][tasking.RELATED_TASK] == {"taskId": task_id}
    assert reply["result"]["content"][0]["text"] == "done\n" and reply["result"]["isError"] is False
    note = server.next(lambda m: m.get("method") == "notifications/tasks/status")
    check(LEGACY, "TaskStatusNotification", note)
    assert note["params"]["taskId"] == task_id and note["params"]["status"] == "completed"
    listing = server.request("tasks/list")["result"]
    check(LEGACY, "ListTasksResult", listing)
    assert [t["taskId"] for t in listing["tasks"]] == [task_id]
    bad = server.request("tasks/list", {"cursor": "bogus"})
    assert bad["error"]["code"] == -32602
    terminal = server.request("tasks/cancel", {"taskId": task_id})
    check(LEGACY, "JSONRPCErrorResponse", terminal)
    assert terminal["error"] == {"code": -32602, "message": "Cannot cancel task: already in terminal status 'completed'"}


def test_legacy_task_support_rules_and_errors(env: Env) -> None:
    server = env.server()
    required = server.request("tools/call", {"name": "always", "arguments": {}})
    check(LEGACY, "JSONRPCErrorResponse", required)
    assert required["error"]["code"] == -32601
    forbidden = server.request("tools/call", {"name": "plain", "arguments": {}, "task": {}})
    assert forbidden["error"]["code"] == -32601
    malformed = server.request("tools/call", {"name": "gated", "arguments": env.gated, "task": {"ttl": "soon"}})
    assert malformed["error"]["code"] == -32602
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        for task_id in ("../../../../etc/passwd", secrets.token_urlsafe(16)):
            reply = server.request(method, {"taskId": task_id})
            check(LEGACY, "JSONRPCErrorResponse", reply)
            assert reply["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    assert not list(env.state.rglob("*.lock"))


def test_tool_error_is_failed_in_2025_and_result_still_returned(env: Env) -> None:
    server = env.server()
    task_id = legacy_create(server, "failing")
    failed = until(lambda: (r := legacy_get(server, task_id))["status"] == "failed" and r, what="failure")
    assert "broken" in failed["statusMessage"]
    payload = server.request("tasks/result", {"taskId": task_id})
    check(LEGACY, "JSONRPCResultResponse", payload)
    assert payload["result"]["isError"] is True
    assert env.cli("result", task_id).returncode == 1


def test_progress_of_a_task_reaches_the_original_token(env: Env) -> None:
    server = env.server()
    legacy_create(server, "counting", _meta={"progressToken": "tok"})
    note = server.next(lambda m: m.get("method") == "notifications/progress")
    check(LEGACY, "ProgressNotification", note)
    assert note["params"]["progressToken"] == "tok" and note["params"]["total"] == 3
    assert tasking.RELATED_TASK in note["params"]["_meta"]
    server.next(lambda m: m.get("method") == "notifications/tasks/status")


def test_cancel_kills_the_process_group_and_stays_cancelled(env: Env) -> None:
    server = env.server()
    seconds = unique_seconds()
    task_id = legacy_create(server, "long", {"seconds": seconds})
    pgid = until(lambda: len(found := sleepers(seconds)) == 2 and found, what="the command")[0].pgid
    assert group_alive(pgid)
    reply = server.request("tasks/cancel", {"taskId": task_id})
    check(LEGACY, "CancelTaskResult", reply["result"])
    assert reply["result"]["status"] == "cancelled"
    until(lambda: not group_alive(pgid), what="the process group to die")
    record = until(lambda: (r := env.store.read(task_id)) and r.supervisor_pid
                   and tasks.process_start(r.supervisor_pid) is None and r, what="the supervisor to exit")
    assert record.status == "cancelled"
    for _ in range(3):
        assert legacy_get(server, task_id)["status"] == "cancelled"
    payload = server.request("tasks/result", {"taskId": task_id})
    assert payload["error"]["code"] == -32603
    assert env.cli("result", task_id).returncode == 1


def test_client_cancelling_tasks_result_stops_the_wait(env: Env) -> None:
    server = env.server()
    task_id = legacy_create(server, "long", {"seconds": unique_seconds()})
    waiting = server.start("tasks/result", {"taskId": task_id})
    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": waiting}})
    assert "result" in server.request("ping")
    # The same id again: accepted (no "already in use"), so the blocked wait is gone.
    server.send({"jsonrpc": "2.0", "id": waiting, "method": "tasks/get", "params": {"taskId": task_id}})
    assert server.answer(waiting)["result"]["status"] == "working"
    assert server.request("tasks/cancel", {"taskId": task_id})["result"]["status"] == "cancelled"
    assert "result" in server.request("ping")
    assert not [m for m in server.held if m.get("id") == waiting]      # the cancelled wait never answered


def test_server_killed_right_after_create_task_still_resolves(env: Env) -> None:
    a = env.server()
    task_id = legacy_create(a, "gated", env.gated)
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(TIMEOUT)
    b = env.server()
    assert legacy_get(b, task_id)["taskId"] == task_id
    env.go.touch()
    until(lambda: legacy_get(b, task_id)["status"] == "completed", what="completion")


def test_killed_supervisor_is_reported_failed_and_its_command_killed(env: Env) -> None:
    server = env.server()
    seconds = unique_seconds()
    task_id = legacy_create(server, "long", {"seconds": seconds})
    until(lambda: len(sleepers(seconds)) == 2, what="the command")
    record = until(lambda: (r := env.store.read(task_id)) and r.supervisor_pid and r, what="the pid")
    os.kill(record.supervisor_pid, signal.SIGKILL)
    failed = until(lambda: (r := legacy_get(server, task_id))["status"] == "failed" and r, what="failed")
    assert failed["statusMessage"] == (f"the task's supervisor (pid {record.supervisor_pid}) "
                                       "died without recording a result")
    until(lambda: not sleepers(seconds), what="the orphaned command to be killed")
    assert server.request("tasks/result", {"taskId": task_id})["error"]["code"] == -32603


def test_supervisor_stopped_by_sigterm_records_failure_and_kills_the_group(env: Env) -> None:
    server = env.server()
    seconds = unique_seconds()
    task_id = legacy_create(server, "long", {"seconds": seconds})
    pgid = until(lambda: sleepers(seconds), what="the command")[0].pgid
    record = until(lambda: (r := env.store.read(task_id)) and r.supervisor_pid and r, what="the pid")
    os.kill(record.supervisor_pid, signal.SIGTERM)
    failed = until(lambda: (r := legacy_get(server, task_id))["status"] == "failed" and r, what="failed")
    assert failed["statusMessage"] == "the task's supervisor was stopped by SIGTERM"
    until(lambda: not group_alive(pgid), what="the process group to die")


def test_a_tasks_supervisor_is_a_detached_interpreter_of_its_own(env: Env) -> None:
    """One way to start a supervisor: `python -m mcpwrap.tasks STORE ID SECRET` in a session of its
    own; a server with task tools starts no other process of its own (no fork server)."""
    server = env.server()
    task_id = legacy_create(server, "gated", env.gated)
    pid = int(until(lambda: (r := env.store.read(task_id)) and r.supervisor_pid, what="the supervisor's claim"))
    argv = [sys.executable, "-m", "mcpwrap.tasks", str(env.store.root), task_id, str(env.secret.absolute())]
    assert procs.Proc(pid, 0, 0).read("cmdline") == "\0".join([*argv, ""]).encode()
    assert os.getsid(pid) == pid != os.getsid(server.proc.pid)
    assert [p.pid for p in procs.mine() if p.ppid == server.proc.pid and b"mcpwrap" in p.read("cmdline")] == [pid]
    env.go.touch()
    until(lambda: legacy_get(server, task_id)["status"] == "completed", what="completion")


def test_expired_tasks_are_collected_once_a_later_task_ends(env: Env) -> None:
    """The collection pass runs in a supervisor after its task's outcome: no request waits for it."""
    past = tasks.Store(env.store.root, clock=lambda: time.time() - 10)
    expired = [new_record(past, ttl_ms=1_000, claim=False).task_id for _ in range(3)]
    live = new_record(env.store, claim=False).task_id
    server = env.server()
    task_id = legacy_create(server, "always")
    until(lambda: legacy_get(server, task_id)["status"] == "completed", what="completion")
    until(lambda: not any(env.store.path(i).exists() for i in expired), what="the expired tasks to go")
    index = env.store.root / task_index.INDEX
    until(lambda: index.read_bytes().count(b"\n") == 2, what="the index to lose them too")
    assert env.store.path(live).exists() and env.store.path(task_id).exists()


def run_supervisor(store: tasks.Store, task_id: str, secret: Path) -> None:
    subprocess.run([sys.executable, "-m", "mcpwrap.tasks", str(store.root), task_id, str(secret)],
                   timeout=TIMEOUT, check=False)


def test_supervisor_runs_the_snapshot_and_fails_clearly_without_the_tool(tmp_path: Path) -> None:
    tools, secret = tmp_path / "tools.toml", tmp_path / "secret"
    tools.write_text("[tools.other]\nshell = 'echo other'\n")
    key = signing.ensure_secret(secret, time.time()).current
    store = tasks.Store.for_tools_file(tmp_path / "state", tools)
    snapshot = "[tools.gone]\nshell = 'echo from the snapshot'\n"
    snap = store.create(tool="gone", arguments={}, ttl_ms=60_000, poll_ms=100, tools_file=tools,
                        digest=config.digest_of(snapshot.encode()), snapshot=snapshot, key=key)
    run_supervisor(store, snap.task_id, secret)
    record = store.get(snap.task_id)
    assert record.status == "completed" and tasking.stored_result(record).text == "from the snapshot\n"
    missing = store.create(tool="gone", arguments={}, ttl_ms=60_000, poll_ms=100, tools_file=tools,
                           digest="0" * 64, snapshot=None, key=key)
    run_supervisor(store, missing.task_id, secret)
    record = store.get(missing.task_id)
    assert record.status == "failed" and record.error is not None
    assert record.error["message"] == f"tool 'gone' is no longer defined in {tools.resolve()}"
    assert tasking.modern_detailed(record, _rev(MODERN))["error"]["code"] == -32603
    run_supervisor(store, missing.task_id, secret)                  # a finished task is never re-run
    assert store.get(missing.task_id) == record


TEARDOWN_PROBE = """
import atexit, runpy, sys
class Probe:
    def __del__(self) -> None:            # runs when the interpreter tears its modules down
        sys.stderr.write("interpreter teardown ran\\n")
sys.modules["mcpwrap_probe"] = Probe()
atexit.register(lambda: sys.stderr.write("exit handlers ran\\n"))
sys.argv[0] = "mcpwrap.tasks"
runpy.run_module("mcpwrap.tasks", run_name="__main__")
"""


def test_a_supervisor_leaves_without_the_interpreters_teardown(tmp_path: Path) -> None:
    """Its teardown (every module trio and the runner loaded) ran right after the terminal status was
    visible and stalled the fsyncs of the next task's creation: the process ends with os._exit once
    its exit handlers ran (the runner's cgroup clean-up is one) and what it wrote is out (its stderr
    is the task's log: a line logged last is still there)."""
    tools, secret = tmp_path / "tools.toml", tmp_path / "secret"
    tools.write_text("[tools.t]\nshell = 'echo out; echo last words >&2'\n")
    key = signing.ensure_secret(secret, time.time()).current
    store = tasks.Store.for_tools_file(tmp_path / "state", tools)
    record = store.create(tool="t", arguments={}, ttl_ms=60_000, poll_ms=100, tools_file=tools,
                          digest="0" * 64, snapshot=None, key=key)
    done = subprocess.run([sys.executable, "-c", TEARDOWN_PROBE, str(store.root), record.task_id, str(secret)],
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert (done.returncode, done.stderr) == (0, "last words\nexit handlers ran\n")
    assert store.get(record.task_id).status == "completed"


def _rev(version: str) -> Any:
    from mcpwrap.protocol.revisions import REVISIONS

    return REVISIONS[version]


def test_earlier_revisions_run_task_tools_synchronously(env: Env) -> None:
    server = env.server(OLDER)
    reply = server.request("tools/call", {"name": "always", "arguments": {}, "task": {}})
    check(OLDER, "CallToolResult", reply["result"])
    assert reply["result"]["content"][0]["text"] == "hi\n"
    assert server.request("tasks/get", {"taskId": secrets.token_urlsafe(16)})["error"]["code"] == -32601
    assert "execution" not in server.request("tools/list")["result"]["tools"][0]
    assert env.store.ids() == []


# --- 2026-07-28 extension -------------------------------------------------------------------
def test_modern_task_flow_with_result_inlined(env: Env) -> None:
    server = env.server(MODERN)
    reply = server.request("tools/call", {"name": "gated", "arguments": env.gated})
    check(MODERN, "JSONRPCResultResponse", reply)
    check(EXT, "CreateTaskResult", reply["result"])
    result = reply["result"]
    assert result["resultType"] == "task" and result["status"] == "working" and result["pollIntervalMs"] == 250
    assert "io.modelcontextprotocol/serverInfo" in result["_meta"] and "task" not in result and "ttl" not in result
    task_id = result["taskId"]
    env.go.touch()
    done = until(lambda: (r := modern_get(server, task_id))["status"] == "completed" and r, what="completion")
    assert done["resultType"] == "complete"
    assert done["result"]["content"] == [{"type": "text", "text": "done\n"}]
    update = server.request("tasks/update", {"taskId": task_id, "inputResponses": {"nope": {"action": "accept"}}})
    check(EXT, "UpdateTaskResult", update["result"])
    cancel = server.request("tasks/cancel", {"taskId": task_id})  # terminal: still just an ack
    check(EXT, "CancelTaskResult", cancel["result"])
    assert modern_get(server, task_id)["status"] == "completed"
    for method in ("tasks/list", "tasks/result"):
        assert server.request(method, {"taskId": task_id})["error"]["code"] == -32601


def test_modern_tool_error_is_completed_and_cancel_is_acknowledged(env: Env) -> None:
    server = env.server(MODERN)
    failing = server.request("tools/call", {"name": "failing", "arguments": {}})["result"]["taskId"]
    done = until(lambda: (r := modern_get(server, failing))["status"] == "completed" and r, what="completion")
    assert done["result"]["isError"] is True
    long_id = server.request("tools/call", {"name": "long", "arguments": {"seconds": unique_seconds()}})["result"]["taskId"]
    ack = server.request("tasks/cancel", {"taskId": long_id})
    assert ack["result"]["resultType"] == "complete" and set(ack["result"]) == {"resultType", "_meta"}
    assert modern_get(server, long_id)["status"] == "cancelled"
    unknown = server.request("tasks/get", {"taskId": secrets.token_urlsafe(16)})
    check(MODERN, "JSONRPCErrorResponse", unknown)
    assert unknown["error"]["code"] == -32602


def test_modern_without_the_extension(env: Env) -> None:
    server = env.server(MODERN)
    always = server.request("tools/call", {"name": "always", "arguments": {}}, extension=False)
    check(MODERN, "JSONRPCErrorResponse", always)
    assert always["error"]["code"] == -32021
    assert always["error"]["data"] == {"requiredCapabilities": {"extensions": {EXT_ID: {}}}}
    env.go.touch()                        # run synchronously: the call answers only once the tool is done
    sync = server.request("tools/call", {"name": "gated", "arguments": env.gated}, extension=False)
    assert sync["result"]["resultType"] == "complete" and sync["result"]["content"][0]["text"] == "done\n"
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        reply = server.request(method, {"taskId": secrets.token_urlsafe(16), "inputResponses": {}}, extension=False)
        assert reply["error"]["code"] == -32021


# --- the command line -----------------------------------------------------------------------
def test_cli_list_show_result_cancel_gc(env: Env) -> None:
    server = env.server()
    seconds = unique_seconds()
    gated, long = legacy_create(server, "gated", env.gated), legacy_create(server, "long", {"seconds": seconds})
    listing = env.cli("list")
    assert listing.returncode == 0
    header, *rows = listing.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "TOOL", "CREATED", "UPDATED", "MESSAGE"]
    assert {r.split()[0] for r in rows} == {gated, long}
    assert all(r.index(r.split()[1]) == header.index("STATUS") for r in rows)   # aligned columns
    assert json.loads(env.cli("list", "--json").stdout)[0]["taskId"] in (gated, long)
    show = env.cli("show", long)
    assert show.returncode == 0 and "working" in show.stdout and seconds in show.stdout
    assert env.cli("result", long).returncode == 4
    assert env.cli("result", gated).returncode == 4
    env.go.touch()
    waited = env.cli("result", gated, "--wait")
    assert (waited.returncode, waited.stdout) == (0, "done\n")
    assert env.cli("cancel", long).returncode == 0
    assert env.cli("cancel", long).returncode == 0         # already what was asked
    assert env.cli("result", long).returncode == 1
    assert legacy_get(server, long)["status"] == "cancelled"
    for bad in ("nope", "../../etc/passwd", secrets.token_urlsafe(16)):
        assert env.cli("show", bad).returncode == 2
    gc = env.cli("gc", "--json")
    assert gc.returncode == 0 and json.loads(gc.stdout)["removed"] == 0
