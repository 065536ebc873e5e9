"""Starting a task's detached supervisor, and the supervisor itself (`python -m mcpwrap.tasks`).

Creation (`create_task`): take a running slot in the store, write the signed
record, spawn `python -m mcpwrap.tasks STORE_DIR TASK_ID SECRET_FILE [AUDIT]` in a
new session holding the slot's flock, and return; the request waits for nothing
else. The supervisor outlives `mcpwrap serve`. It claims the record (its pid
and start time), verifies the record's MAC, runs the command through
`runner.run` under trio (so process group, cgroup/tag sweep, timeout and
output cap are the runner's), polls the record every CANCEL_POLL_S (a cancel
there cancels the run, which kills the process group) and records progress
and the outcome, then runs the store's collection pass if one is due. With an
audit trail (the creating server's `[server] audit` or `--audit`, handed over as
AUDIT) it writes the task's own lines there: `call.start` before the spawn (when
`audit_required`, flushed, and the command refused if it cannot be), `question.asked` and
`question.answered` for each question asked, `call.end`, `task.finished` (the file is shared
with the server's writer under its flock). A record created with `asks` (MAC-bound) has what
the call lacks asked first, parked in input_required (`gather`: `asking.next_question` over the
record's arguments, which stay as given, and the answers kept in the record, each checked by
`asking.taken`). The command starts once that interpreter has imported trio and the runner. It
imports no jsonschema unless an answer fails the plain check: the snapshot it runs is MAC-bound
to what the server validated, so its schemas are not re-checked.

Imports: trio and the runner load only in the supervisor process, so creating
a task (`mcpwrap call --task`) loads neither.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpwrap.config import load as config_module
from mcpwrap.protocol import audit, identity, sealing
from mcpwrap.protocol.tasking import TaskRecord, new_id, valid_id
from mcpwrap.protocol.tools import result_error
from mcpwrap.state import signing
from mcpwrap.state.durable import UnsafePathError
from mcpwrap.tasks.store import MAX_RUNNING, Store, process_start, signed_by

if TYPE_CHECKING:
    import trio

    from mcpwrap.protocol.asking import Question

    from mcpwrap.result import ToolResult

CANCEL_POLL_S = 0.1          # how soon a cancel in the store stops the command
LOG_CAP = 1024 * 1024        # bytes of command stderr kept in <id>.log


# --- creating a task: record first, then the supervisor ------------------------------------
def _snapshot(config: config_module.Config) -> str | None:
    """The tools file's text if it is still what the server validated against."""
    try:
        raw = Path(config.path).read_bytes()
        return raw.decode() if config_module.digest_of(raw) == config.digest else None
    except (OSError, UnicodeDecodeError):
        return None


def spawn_supervisor(store: Store, task_id: str, secret_file: Path, slot: int,
                     trail: config_module.Audit | None = None) -> int:
    """Start a supervisor (`python -m mcpwrap.tasks`, detached), holding `slot` for its life; a
    thread reaps it."""
    log = store.open_file(store.path(task_id, ".log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    handed = [] if trail is None else [json.dumps({"path": str(Path(trail.path).absolute()), "required": trail.required,
                                                   "max_bytes": trail.max_bytes})]
    try:
        process = subprocess.Popen([sys.executable, "-m", "mcpwrap.tasks", str(store.root), task_id,
                                    str(Path(secret_file).absolute()), *handed],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                   start_new_session=True, close_fds=True, pass_fds=(slot,))
    finally:
        os.close(log)
    threading.Thread(target=process.wait, name=f"reap-{process.pid}", daemon=True).start()
    return process.pid


def create_task(store: Store, config: config_module.Config, tool: config_module.Tool,
                arguments: Mapping[str, Any], ttl_ms: int, keyring: sealing.Keys, secret_file: Path,
                max_running: int = MAX_RUNNING, principal: str = identity.LOCAL, askable: bool = False,
                asks: bool = False) -> TaskRecord:
    """Take a running slot (TooManyTasks past `max_running`), write the signed record, and start
    its supervisor, which claims it (with `asks`, it asks what the call still needs before the
    command runs). Returns once the record is durable and the supervisor spawned; nothing else is
    waited for."""
    task_id = new_id()
    slot = store.reserve(task_id, max_running)
    try:
        record = store.create(tool=tool.name, arguments=arguments, ttl_ms=ttl_ms,
                              poll_ms=max(1, int(tool.task_poll_s * 1000)), tools_file=Path(config.path),
                              digest=config.digest, snapshot=_snapshot(config), key=keyring.current,
                              task_id=task_id, principal=principal, askable=askable, asks=asks)
        try:
            spawn_supervisor(store, task_id, secret_file, slot, config.audit)
        except OSError:
            for suffix in (".json", ".log", ".lock"):
                store.path(task_id, suffix).unlink(missing_ok=True)
            raise
    except BaseException:
        store.release(task_id)
        raise
    finally:
        os.close(slot)                    # the supervisor holds it now
    return record



# --- the supervisor -----------------------------------------------------------------------
class _Supervision:
    """What the run shares with the store poller: progress to write, log budget, a stop signal."""

    def __init__(self, store: Store, task_id: str, trail: _Trail, askable: bool = False) -> None:
        self.store, self.task_id, self.trail, self.askable = store, task_id, trail, askable
        self.asked = 0                    # questions so far: each key is unique over the task's life
        self.keys: set[str] = set()       # the keys asked under so far
        self.pending: dict[str, Any] | None = None
        self.log_left = LOG_CAP
        self.signal: int | None = None

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.pending = {k: v for k, v in (("progress", progress), ("total", total), ("message", message))
                        if v is not None}

    def log(self, line: str) -> None:
        data = (line + "\n").encode()[:self.log_left]
        self.log_left -= len(data)
        if data:
            sys.stderr.buffer.write(data)
            sys.stderr.flush()

    async def poll(self, run: trio.CancelScope) -> None:
        """Every CANCEL_POLL_S: write new progress, and stop the run once the record is terminal or gone."""
        import trio

        while True:
            await trio.sleep(CANCEL_POLL_S)
            pending, self.pending = self.pending, None
            if pending is not None:
                record = await trio.to_thread.run_sync(   # the last progress line says what the task is doing
                    self.store.update, self.task_id, lambda r, p=pending: replace(
                        r, progress=p, status_message=p.get("message", r.status_message)))
            else:
                record = await trio.to_thread.run_sync(self.store.read, self.task_id)
            if record is None or record.terminal:
                run.cancel()
                return

    async def question(self, asked: Any) -> Any:
        """A question the command asked: the task parks in input_required with it in inputRequests until a
        tasks/update (from any process: `Store.answer`) brings the answer; None when its creator cannot be
        asked. The task is working again once the answer is taken, or the wait ends (ask_timeout)."""
        import trio

        from mcpwrap.protocol.answers import from_elicitation
        from mcpwrap.run.questions import Unanswered

        await self._audit(audit.question_asked, asked.prompt, asked.rule.message)
        if not self.askable:
            await self._audit(audit.question_answered, "nobody")
            return None
        self.asked += 1
        key, request = self._fresh(f"ask-{self.asked}"), asked.request()
        await self._park(asked.rule.message, {key: request})
        try:
            while (response := await self._response(key)) is None:
                await trio.sleep(CANCEL_POLL_S)
        finally:
            await self._unpark()
        await self._answered(response)
        answered, value = from_elicitation(response)
        if not answered:
            raise Unanswered(value)
        return value

    async def gather(self, tool: config_module.Tool, given: Mapping[str, Any]) -> dict[str, Any] | str:
        """What a task created with `asks` still needs, asked while it is parked in input_required: the
        decision is `asking.next_question` (the one `serve` and `mcpwrap call` make) over the arguments
        as given and the answers so far. The arguments as placed once nothing is missing, or why
        nothing runs (invalid arguments, a declined question, an answer `asking.taken` refuses)."""
        import trio

        from mcpwrap.protocol import asking
        from mcpwrap.run.arguments import resolve_paths

        answers: dict[str, Any] = {}
        confirmed, resolution = False, None
        while True:
            step = asking.next_question(tool, {**given, **answers}, confirmed, resolution)
            if isinstance(step, list):
                return f"invalid arguments for tool '{tool.name}': " + "; ".join(step)
            if isinstance(step, asking.Ready):
                return step.arguments
            if isinstance(step, asking.Resolve):
                resolution = await trio.to_thread.run_sync(resolve_paths, tool, step.arguments)
                continue
            got = await self._ask_all(step.message, asking.one_by_one(tool, step))
            if isinstance(got, str):
                return f"{got} for '{tool.name}'"
            answers.update({q.fields[0].name: value for q, value in got if q.fields})
            confirmed = confirmed or any(not q.fields for q, _ in got)
            resolution = None

    async def _ask_all(self, message: str, questions: tuple[Question, ...]) -> list[tuple[Question, Any]] | str:
        """Park the task on `questions` at once (each under a key unique over the task's life: its own
        when free); each answer, from any replica, is taken as it comes (`asking.taken`): the values,
        or why the first unusable one cannot be used."""
        import trio

        from mcpwrap.protocol import asking
        from mcpwrap.protocol.revisions import MODERN

        asked = {self._fresh(q.key): q for q in questions}
        for question in questions:
            await self._audit(audit.question_asked, question.purpose, question.message)
        await self._park(message, {key: q.request(MODERN) for key, q in asked.items()})
        values: dict[str, Any] = {}
        try:
            while len(values) < len(asked):
                record = await trio.to_thread.run_sync(self.store.read, self.task_id)
                for key, response in ((record.input_responses or {}) if record else {}).items():
                    if key in asked and key not in values:
                        await self._answered(response)
                        ok, values[key] = asking.taken(asked[key], response)
                        if not ok:
                            return str(values[key])
                if len(values) < len(asked):
                    await trio.sleep(CANCEL_POLL_S)
        finally:
            await self._unpark()
        return [(asked[key], value) for key, value in values.items()]

    async def _park(self, message: str, requests: dict[str, Any]) -> None:
        """The task in input_required on these questions, with no answer yet."""
        import trio

        await trio.to_thread.run_sync(self.store.update, self.task_id, lambda r: replace(
            r, status="input_required", status_message=message, input_requests=requests, input_responses=None))

    async def _unpark(self) -> None:
        """The task working again, its questions withdrawn; shielded, so a cancelled wait does it too."""
        import trio

        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self.store.update, self.task_id, lambda r: replace(
                r, status="working", status_message=None, input_requests=None, input_responses=None)
                if r.status == "input_required" or r.input_requests else None)

    async def _answered(self, response: Mapping[str, Any]) -> None:
        """`question.answered` in the trail: how the question was met, never the answer."""
        action = response.get("action")
        await self._audit(audit.question_answered, action if action in ("accept", "decline", "cancel") else "error")

    def _fresh(self, key: str) -> str:
        """`key`, or `key-N` when a question of this task was asked under it before (a late answer to
        an earlier question never answers a later one)."""
        fresh, n = key, len(self.keys)
        while fresh in self.keys:
            n += 1
            fresh = f"{key}-{n}"
        self.keys.add(fresh)
        return fresh

    async def _audit(self, event: Callable[..., audit.Record], *fields: Any) -> None:
        """`question.asked` / `question.answered` in the creator's trail (never the answer itself)."""
        import trio

        line = event(self.trail.caller, None, self.trail.tool, *fields)
        await trio.to_thread.run_sync(self.trail.write, line)

    async def _response(self, key: str) -> Any:
        import trio

        record = await trio.to_thread.run_sync(self.store.read, self.task_id)
        return None if record is None else (record.input_responses or {}).get(key)

    async def signals(self, run: trio.CancelScope, *, task_status: trio.TaskStatus[None]) -> None:
        """Started (not merely scheduled) before the command: a signal that comes once it runs is recorded."""
        import trio

        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as received:
            task_status.started()
            async for signum in received:
                self.signal = signum
                run.cancel()
                return


class _Trail:
    """The task's lines in its creator's audit trail (none without one). A write that fails is a
    line in the task's log; when the trail is required, a `call.start` that cannot be written
    refuses the command."""

    def __init__(self, settings: config_module.Audit | None, record: TaskRecord, tool: str) -> None:
        from mcpwrap.state.audit_log import AuditLog

        self.log = None if settings is None else AuditLog(settings.path, max_bytes=settings.max_bytes)
        self.required = settings is not None and settings.required
        self.record, self.tool = record, tool
        self.caller = audit.Caller(record.principal or identity.LOCAL, "task")
        self.started: float | None = None
        self.result: ToolResult | None = None     # the command's, once it ran

    def write(self, line: audit.Record) -> str | None:
        """Append `line`; why it could not be, or None."""
        from mcpwrap.state.audit_log import AuditError

        if self.log is None:
            return None
        try:
            self.log.append(line)
        except AuditError as exc:
            sys.stderr.write(f"mcpwrap: audit trail: {exc}\n")
            return str(exc)
        return None

    async def start(self, argv: list[str], cwd: str, tool: config_module.Tool,
                    arguments: Mapping[str, Any]) -> str | None:
        """`runner.run`'s `before_spawn`: `call.start`, or the refusal when it is required and failed."""
        import trio

        from mcpwrap.run import process as runner

        line = audit.call_start(self.caller, None, tool, arguments, argv, cwd, runner.containment(),
                                audit.sandbox_words(tool))
        failure = await trio.to_thread.run_sync(self.write, line)
        if failure is not None and self.required:
            return f"not run: the audit log could not be written: {failure}"
        self.started = time.monotonic()
        return None

    def finished(self, store: Store, result: ToolResult | None) -> None:
        """`call.end` (when the command started) and `task.finished` with the status the store holds."""
        if self.log is None:
            return
        if self.started is not None:
            self.write(audit.call_ended(self.caller, None, self.tool, result, time.monotonic() - self.started))
        final = store.read(self.record.task_id)
        self.write(audit.task_finished(self.record.task_id, self.tool, final.status if final else "gone",
                                       result.exit_code if result else None, result.is_error if result else True))


def _load_tool(record: TaskRecord) -> tuple[config_module.Tool, config_module.Spool]:
    """The tool as validated at creation (from the snapshot), else as the file now defines it,
    and where its output beyond max_output is kept.

    The snapshot's schemas are not checked again: the MAC vouches that these are the bytes the
    server checked (and this way the supervisor never imports jsonschema)."""
    from mcpwrap.protocol.arguments import argument_problems

    path = Path(record.tools_file)
    try:
        config = (config_module.loads(record.snapshot.encode(), path, lambda digest: digest == record.digest)
                  if record.snapshot is not None else config_module.load(path))
    except config_module.ConfigError as exc:
        raise LookupError(f"the tools file {path} cannot be loaded: {exc.problems[0]}") from None
    tool = config.tool(record.tool)
    if tool is None:
        raise LookupError(f"tool '{record.tool}' is no longer defined in {path}")
    problems = [] if record.snapshot is not None or record.asks else argument_problems(tool, record.arguments)
    if problems:
        raise LookupError(f"the arguments no longer fit tool '{record.tool}' in the changed {path}: "
                          + "; ".join(problems))
    return tool, config.spool


def _check_signature(store: Store, record: TaskRecord, secret_file: Path) -> None:
    """LookupError unless the record's MAC is one of this user's keys over what the creator wrote."""
    now = time.time()
    try:
        keyring = signing.load_secret(secret_file, now)
    except signing.SecretFileError as exc:
        raise LookupError(f"{exc}; nothing ran") from None
    if not signed_by(record, keyring, now):
        raise LookupError(f"the task record {store.path(record.task_id)} does not carry a valid MAC under "
                          f"the secret {secret_file} (it was changed or forged after creation); nothing ran")


async def supervise(store: Store, task_id: str, secret_file: Path,
                    trail: config_module.Audit | None = None) -> int:
    me = os.getpid()
    record = store.claim(task_id, me, process_start(me))
    if record is None or record.terminal or record.supervisor_pid != me:
        return 0                          # gone, finished, or someone else's
    lines = _Trail(trail, record, record.tool)
    try:
        return await _run(store, record, secret_file, lines)
    finally:
        store.release(task_id)            # the slot's flock dies with this process; its name goes now
        lines.finished(store, lines.result)


async def _command(store: Store, record: TaskRecord, tool: config_module.Tool, kept: config_module.Spool,
                   placed: Mapping[str, Any], watch: _Supervision, trail: _Trail) -> ToolResult:
    """Run the task's command with the arguments as placed; its output beyond max_output kept in the spool."""
    from mcpwrap.result import error_result
    from mcpwrap.run import process as runner
    from mcpwrap.run.spool import Spool

    try:
        kept_by = Spool(store.root.parent / "output", kept.quota, kept.ttl_s,
                        owner=record.principal or identity.LOCAL)   # read back by its creator only
        trail.result = await runner.run(tool, placed, on_stderr=watch.log, on_progress=watch.progress, spool=kept_by,
                                        before_spawn=lambda argv, cwd: trail.start(argv, cwd, tool, placed),
                                        on_question=watch.question)
        return trail.result
    except runner.ArgumentError as exc:
        return error_result(f"{exc}; nothing ran")


async def _run(store: Store, record: TaskRecord, secret_file: Path, trail: _Trail) -> int:
    import trio

    from mcpwrap.result import error_result
    from mcpwrap.run import process as runner

    task_id = record.task_id
    try:
        _check_signature(store, record, secret_file)
        tool, kept = _load_tool(record)
    except LookupError as exc:
        store.finish(task_id, error={"code": -32603, "message": str(exc)})
        return 1
    os.environ[runner.TASK_ENV] = task_id  # inherited by the command and all it starts
    watch = _Supervision(store, task_id, trail, record.askable)
    result: ToolResult | None = None
    try:
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as run:
                nursery.start_soon(watch.poll, run)
                await nursery.start(watch.signals, run)
                placed = await watch.gather(tool, record.arguments) if record.asks else record.arguments
                result = (error_result(f"{placed}; nothing ran") if isinstance(placed, str)
                          else await _command(store, record, tool, kept, placed, watch, trail))
            nursery.cancel_scope.cancel()
    except Exception as exc:  # a bug must end as a failed task, not a task working forever
        store.finish(task_id, error={"code": -32603, "message": f"internal error while running the task: {exc}"})
        raise
    if watch.signal is not None:
        name = signal.Signals(watch.signal).name
        store.finish(task_id, error={"code": -32603, "message": f"the task's supervisor was stopped by {name}"})
        return 1
    if result is not None:
        error = result_error(result)          # an exit status the tools file maps to a protocol error: failed
        if error is not None:
            store.finish(task_id, error=error.to_json())
        else:
            store.finish(task_id, result=result.to_json())
    return 0


USAGE = "usage: python -m mcpwrap.tasks STORE_DIR TASK_ID SECRET_FILE [AUDIT]\n(started by mcpwrap serve)\n"


def main(argv: list[str] | None = None) -> int:
    """A supervisor: run the task, then the store's collection pass if one is due."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (3, 4) or not valid_id(args[1]):
        sys.stderr.write(USAGE)
        return 2
    try:
        import trio

        store = Store(Path(args[0]))
        trail = _handed_trail(args[3]) if len(args) == 4 else None
        code = trio.run(supervise, store, args[1], Path(args[2]), trail)
        _collect(store)
        return code
    except UnsafePathError as exc:        # nothing in an unsafe store is trusted, not even to record this
        print(f"mcpwrap: task store: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _handed_trail(text: str) -> config_module.Audit:
    """The creating server's audit settings, as `spawn_supervisor` hands them over."""
    fields = json.loads(text)
    return config_module.Audit(Path(fields["path"]), bool(fields["required"]), fields["max_bytes"])


def _collect(store: Store) -> None:
    """A supervisor's last step, once its task's outcome is recorded: `maybe_gc`. A failure is one
    line in the task's log."""
    try:
        store.maybe_gc()
    except OSError as exc:
        sys.stderr.write(f"mcpwrap: collecting expired tasks in {store.root}: {exc}\n")

