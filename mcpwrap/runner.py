"""Running one tool call: the child process and its result.

Argv and environment come from `templating`. `run` owns the child: its own
session and process group, stdin from /dev/null or an argument, stdout kept
up to `max_output` while the rest is drained and counted, stderr delivered
line by line. On timeout, cancellation
or when the leader exits, the whole group gets SIGTERM, a grace period, then
SIGKILL, inside a shielded scope, so no descendant outlives the call.
"""

from __future__ import annotations

import base64
import functools
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import trio

from mcpwrap.config import Tool
from mcpwrap.result import Media, MalformedOutput, Text, ToolResult, error_result, parse_mcp_output
from mcpwrap.templating import ArgumentError, build_argv, build_env, with_defaults

STDERR_TAIL = 8192          # bytes of stderr kept for an error result
LINE_CAP = 8192             # a longer stderr/stdout line is cut for logs and progress
READ_CHUNK = 256 * 1024

OnLine = Callable[[str], None]
OnProgress = Callable[[float, float | None, str | None], None]


@dataclass
class _Capture:
    """What the readers collected; bounded whatever the child writes."""
    stdout: bytearray
    dropped: int = 0
    stderr_tail: bytes = b""


class _LineSplitter:
    def __init__(self, on_line: OnLine) -> None:
        self.on_line = on_line
        self.pending = b""

    def feed(self, chunk: bytes | bytearray) -> None:
        data = self.pending + chunk
        *lines, self.pending = data.split(b"\n")
        if len(self.pending) > LINE_CAP:
            lines.append(self.pending)
            self.pending = b""
        for line in lines:
            self.on_line(line[:LINE_CAP].decode("utf-8", "replace").rstrip("\r"))

    def close(self) -> None:
        if self.pending:
            self.feed(b"\n")


class _ProgressTracker:
    """Finds progress in output lines and reports only strictly increasing values."""

    def __init__(self, tool: Tool, on_progress: OnProgress | None) -> None:
        self.pattern, self.on_progress, self.last = tool.progress, on_progress, -math.inf

    def line(self, text: str) -> None:
        if self.pattern is None or self.on_progress is None:
            return
        match = self.pattern.search(text)
        if not match:
            return
        groups = match.groupdict()
        try:
            progress = float(groups["progress"] if "progress" in groups else match[1])
            total_text = groups.get("total") if "total" in groups else (
                match[2] if (match.re.groups >= 2 and not groups) else None)
            total = float(total_text) if total_text else None
        except (TypeError, ValueError):
            return
        if progress > self.last:
            self.last = progress
            self.on_progress(progress, total, text)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send sig to the group; False when no member is left."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def proc_stat(pid: int | str) -> list[bytes] | None:
    """/proc/<pid>/stat after the command name (index 0 = state, 2 = pgid, 19 = start time); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process is in the group.

    kill(0) alone counts zombies, and an orphaned zombie may wait long for a
    reaper that is not us; /proc tells them apart.
    """
    if not _signal_group(pgid, 0):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    return any(stat is not None and int(stat[2]) == pgid and stat[0] != b"Z"
               for stat in map(proc_stat, filter(str.isdigit, entries)))


async def _end_group(process: trio.Process, grace_s: float) -> None:
    """SIGTERM the whole group, wait up to grace_s for it to empty, then SIGKILL."""
    pgid = process.pid
    if _signal_group(pgid, signal.SIGTERM):
        with trio.move_on_after(grace_s):
            while process.poll() is None or group_alive(pgid):
                await trio.sleep(0.01)
        if group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
    await process.wait()


@functools.cache
def _spawn_slots() -> trio.CapacityLimiter:
    """Spawns in flight at once: more threads than cores only fight over the GIL."""
    return trio.CapacityLimiter(2 * (os.cpu_count() or 1))


@functools.cache
def _inherited_env() -> dict[str, str]:
    """The server's environment, copied once: it does not change while serving."""
    return dict(os.environ)


async def _drain_stdout(stream: trio.abc.ReceiveStream, capture: _Capture, cap: int,
                        on_line: OnLine | None) -> None:
    splitter = _LineSplitter(on_line) if on_line else None
    while chunk := await stream.receive_some(READ_CHUNK):
        room = cap - len(capture.stdout)
        if room > 0:
            capture.stdout += chunk[:room]
        capture.dropped += max(0, len(chunk) - max(room, 0))
        if splitter:
            splitter.feed(chunk)
    if splitter:
        splitter.close()


async def _drain_stderr(stream: trio.abc.ReceiveStream, capture: _Capture, on_line: OnLine) -> None:
    splitter = _LineSplitter(on_line)
    while chunk := await stream.receive_some(READ_CHUNK):
        capture.stderr_tail = (capture.stderr_tail + chunk)[-STDERR_TAIL:]
        splitter.feed(chunk)
    splitter.close()


async def run(tool: Tool, args: Mapping[str, Any], *, on_stderr: OnLine | None = None,
              on_progress: OnProgress | None = None, kill_grace_s: float | None = None) -> ToolResult:
    """Run one validated call to completion; cancellation kills the process group."""
    args = with_defaults(tool, args)
    argv = build_argv(tool, args)
    env = build_env(tool, args, _inherited_env())
    stdin: Any = subprocess.DEVNULL
    stdin_data: bytes | None = None
    if tool.stdin_arg is not None and tool.stdin_arg in args:
        value = args[tool.stdin_arg]
        stdin_data = (value if isinstance(value, str) else orjson.dumps(value).decode()).encode()
        stdin = subprocess.PIPE
    grace = tool.kill_grace_s if kill_grace_s is None else kill_grace_s
    progress = _ProgressTracker(tool, on_progress)

    def stderr_line(line: str) -> None:
        progress.line(line)
        if on_stderr:
            on_stderr(line)

    stdout_lines = progress.line if tool.output == "text" and tool.progress else None
    capture = _Capture(bytearray())
    started = time.monotonic()
    try:
        async with _spawn_slots():
            process = await trio.lowlevel.open_process(
                argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=str(tool.cwd), env=env, start_new_session=True, close_fds=True)
    except OSError as exc:
        return error_result(f"cannot start {argv[0]!r}: {exc.strerror or exc}")
    timed_out = False
    assert process.stdout is not None and process.stderr is not None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain_stdout, process.stdout, capture, tool.max_output, stdout_lines)
            nursery.start_soon(_drain_stderr, process.stderr, capture, stderr_line)
            if stdin_data is not None and process.stdin is not None:
                nursery.start_soon(_feed_stdin, process.stdin, stdin_data)
            with trio.move_on_after(tool.timeout_s) as deadline:
                await process.wait()
            timed_out = deadline.cancelled_caught
            # The leader is gone (or overran): nothing of the call may outlive it.
            with trio.CancelScope(shield=True):
                await _end_group(process, grace)
    finally:
        if process.returncode is None or _signal_group(process.pid, 0):   # cancelled before the end above
            with trio.CancelScope(shield=True):
                await _end_group(process, min(grace, 0.5))
    return make_result(tool, bytes(capture.stdout), capture.dropped, process.returncode,
                       timed_out, capture.stderr_tail.decode("utf-8", "replace"),
                       time.monotonic() - started)


async def _feed_stdin(stream: trio.abc.SendStream, data: bytes) -> None:
    try:
        async with stream:
            await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass                                            # the child closed stdin early: its choice


def make_result(tool: Tool, stdout: bytes, dropped: int, exit_code: int | None, timed_out: bool,
                stderr_tail: str, duration_s: float) -> ToolResult:
    """Turn what the child produced into a ToolResult according to tool.output."""
    meta: dict[str, Any] = dict(exit_code=exit_code, duration_s=duration_s, truncated=dropped > 0,
                                timed_out=timed_out, stderr_tail=stderr_tail)
    failed = timed_out or exit_code not in tool.success_codes
    if failed:
        why = (f"timed out after {tool.timeout_s:g}s; its process group was killed" if timed_out
               else f"exited with status {exit_code}" if exit_code is not None and exit_code >= 0
               else f"killed by signal {-(exit_code or 0)}")
        parts = [stdout.decode("utf-8", "replace") if tool.output in ("text", "json") else "",
                 stderr_tail.strip(), f"[{tool.name} {why}]"]
        return error_result("\n".join(p for p in parts if p), **meta)
    if tool.output == "text":
        text = stdout.decode("utf-8", "replace")
        if dropped:
            text += f"\n[output truncated: {dropped} more bytes were discarded (max_output {tool.max_output})]"
        return ToolResult(content=(Text(text),), **meta)
    if dropped:
        return error_result(f"output exceeded max_output ({tool.max_output} bytes) and was cut; "
                            f"{tool.output} output cannot be used partially", **meta)
    if tool.output.startswith(("image/", "audio/")):
        kind = tool.output.split("/")[0]
        return ToolResult(content=(Media(kind, base64.b64encode(stdout).decode(), tool.output),), **meta)
    try:
        doc = orjson.loads(stdout)
    except orjson.JSONDecodeError as exc:
        return error_result(f"the command's output is not valid JSON: {exc}", **meta)
    if tool.output == "json":
        if tool.output_schema is not None:
            from jsonschema import Draft202012Validator

            problem = next(Draft202012Validator(tool.output_schema).iter_errors(doc), None)
            if problem is not None:
                return error_result(f"the command's JSON does not match output_schema: {problem.message}", **meta)
        return ToolResult(content=(Text(stdout.decode()),), structured=doc, **meta)
    try:
        content, structured, is_error = parse_mcp_output(doc)
    except MalformedOutput as exc:
        return error_result(f"the command's output is not a valid mcp result: {exc}", **meta)
    return ToolResult(content=content, structured=structured, is_error=is_error, **meta)


__all__ = ["ArgumentError", "run"]
