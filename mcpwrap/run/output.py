"""A call's output: stdout and stderr as they are read, and the result made of them.

stdout is kept up to `max_output` while the rest is drained and counted (and, given a `spool`,
kept whole on disk with stderr and linked from the result); stderr is delivered line by line and
its tail kept for an error result.

Progress patterns see the first `PROGRESS_WINDOW` characters of a line; they,
and the prompt patterns of `run.questions`, are `GuardedPattern`s: on the main
thread each match is stopped by SIGALRM after `MATCH_LIMIT_S`, a match stopped
while it was merely preempted is tried again, and once stopped matches have
spent that much CPU (thread time) the pattern is reported once and dropped for
the call. JSON from
`output = "json"`/`"mcp"` nested deeper than `OUTPUT_DEPTH` is an error result.
"""

from __future__ import annotations

import base64
import math
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson
import trio

from mcpwrap.config.model import Tool
from mcpwrap.protocol import jsonrpc
from mcpwrap.result import Media, MalformedOutput, Resource, ResourceLink, Text, ToolResult, error_result, parse_mcp_output
from mcpwrap.state.durable import UnsafePathError

if TYPE_CHECKING:                   # annotations only: a call that keeps no output imports no spool
    from mcpwrap.run.spool import Sink, Spool

STDERR_TAIL = 8192          # bytes of stderr kept for an error result
LINE_CAP = 8192             # a longer stderr/stdout line is cut for logs and progress
READ_CHUNK = 256 * 1024
PROGRESS_WINDOW = 1024      # characters of a line a progress pattern sees
MATCH_LIMIT_S = 0.002       # one progress match may hold the loop this long
MATCH_TRIES = 5             # a match stopped while barely running (preempted) is tried again, this often
OUTPUT_DEPTH = 64           # nesting allowed in a command's JSON (it is written back a few levels down)
HELD_OUTPUT = 24 * 1024 * 1024   # stdout the running calls of a process keep in memory together

OnLine = Callable[[str], None]
OnProgress = Callable[[float, float | None, str | None], None]
OnOutput = Callable[[str, bytes | bytearray], None]     # (stream, chunk): all output as it is read


def stderr_warning(text: str) -> None:
    """The default for a call's warnings: a line on our stderr."""
    print(f"mcpwrap: {text}", file=sys.stderr)


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


class MatchTimeout(Exception):
    """A regular expression ran past its time limit."""


def _raise_match_timeout(signum: int, frame: Any) -> None:
    raise MatchTimeout


def bounded_search(pattern: re.Pattern[str], text: str, limit_s: float) -> re.Match[str] | None:
    """pattern.search(text), raising MatchTimeout after limit_s.

    `re` checks for signals every few thousand steps, so a SIGALRM whose handler
    raises stops a runaway match. Signals are the main thread's, and an ITIMER_REAL
    or a SIGALRM handler set outside Python is not ours to take: elsewhere the search
    runs unguarded.
    """
    if (threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_REAL)[0]
            or signal.getsignal(signal.SIGALRM) is None):
        return pattern.search(text)
    previous = signal.signal(signal.SIGALRM, _raise_match_timeout)
    try:
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        try:
            return pattern.search(text)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)     # a late alarm now meets the old handler


class GuardedPattern:
    """A pattern one call searches its output with, each search stopped by `bounded_search` after
    `MATCH_LIMIT_S`. The alarm is wall-clock: on a busy machine it also stops a match that was merely
    preempted, which is tried again (`MATCH_TRIES`). Once stopped matches add up to `MATCH_LIMIT_S` of
    CPU (thread time), which a fast pattern never reaches, the pattern is dropped for the rest of the
    call and `on_dropped` is called, once."""

    def __init__(self, pattern: re.Pattern[str], on_dropped: Callable[[], None]) -> None:
        self.pattern: re.Pattern[str] | None = pattern
        self.on_dropped = on_dropped
        self.overrun_cpu = 0.0            # CPU time spent in matches the alarm stopped

    @property
    def dropped(self) -> bool:
        return self.pattern is None

    def search(self, text: str) -> re.Match[str] | None:
        """The pattern's match in `text`; None also once dropped, or when every try was preempted."""
        for _ in range(MATCH_TRIES):
            if self.pattern is None:
                return None
            cpu = time.thread_time()
            try:
                return bounded_search(self.pattern, text, MATCH_LIMIT_S)
            except MatchTimeout:
                self.overrun_cpu += time.thread_time() - cpu
                if self.overrun_cpu >= MATCH_LIMIT_S:
                    self.pattern = None
                    self.on_dropped()
        return None


class ProgressTracker:
    """Finds progress in output lines and reports only strictly increasing values."""

    def __init__(self, tool: Tool, on_progress: OnProgress | None, on_warning: OnLine) -> None:
        self.on_progress, self.last = on_progress, -math.inf
        self.pattern = None if tool.progress is None else GuardedPattern(tool.progress, lambda: on_warning(
            f"{tool.name}: the progress pattern ran over {MATCH_LIMIT_S * 1000:g} ms of CPU; "
            "progress is off for the rest of this call"))

    def line(self, text: str) -> None:
        if self.pattern is None or self.on_progress is None:
            return
        match = self.pattern.search(text[:PROGRESS_WINDOW])
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


class Keeper:
    """A call's streams kept whole in the spool once they outgrow the cap (written off the event loop).

    stdout spills when it passes `max_output`; stderr is held in memory up to the same cap and spills
    past it, or at the end when stdout spilled, so a truncated call keeps both. A spool that fails
    (disk full, unsafe directory) costs the copy, never the call.
    """

    def __init__(self, spool: Spool | None, cap: int, on_warning: OnLine) -> None:
        self.spool = spool if spool is not None and spool.enabled else None
        self.cap, self.on_warning = cap, on_warning
        self.call = ""                                  # named once something spills (most calls: never)
        self.sinks: dict[str, Sink] = {}
        self.stderr_head = bytearray()

    def spilled(self, stream: str) -> bool:
        return stream in self.sinks

    async def write(self, stream: str, data: bytes | bytearray) -> None:
        if self.spool is None:
            return
        try:
            sink = self.sinks.get(stream)
            if sink is None:
                self.call = self.call or self.spool.new_call()     # both streams of a call share it
                sink = self.sinks[stream] = await trio.to_thread.run_sync(self.spool.open, self.call, stream)
            if sink.kept:
                await trio.to_thread.run_sync(sink.write, data)
        except (OSError, UnsafePathError) as exc:
            self.on_warning(f"cannot keep the output beyond max_output: {exc}")
            self.spool = None
            for kept in self.sinks.values():         # a stream kept in part is not linked: it goes
                await trio.to_thread.run_sync(kept.abandon)

    async def stderr(self, chunk: bytes | bytearray) -> None:
        if self.spilled("stderr"):
            await self.write("stderr", chunk)
        elif len(self.stderr_head) + len(chunk) > self.cap:
            await self.write("stderr", bytes(self.stderr_head) + chunk)
            self.stderr_head = bytearray()
        else:
            self.stderr_head += chunk

    async def finish(self, tool: Tool) -> tuple[ResourceLink, ...]:
        """Close the sinks; a link for each stream kept whole."""
        if not self.sinks:                              # nothing spilled: the common case
            return ()
        links = []
        with trio.CancelScope(shield=True):
            if self.spilled("stdout") and self.stderr_head:
                await self.write("stderr", bytes(self.stderr_head))
            for stream, sink in self.sinks.items():
                await trio.to_thread.run_sync(sink.close)
                if sink.kept:
                    links.append(ResourceLink(
                        sink.uri, f"{tool.name}-{stream}", "text/plain" if tool.output == "text" else None,
                        f"the whole {stream} of this call ({sink.size} bytes); read it in pages with "
                        f"{sink.uri}?offset=N&length=M", f"{tool.name} {stream} (full)"))
        return tuple(links)


class HeldOutput:
    """The stdout bytes that running calls keep in memory, counted across the process.

    Each call may keep `max_output`, and `--max-calls` calls run at once: past `limit` together, a
    call keeps the rest of its stdout in a private unlinked file instead, read back for its result,
    so what calls hold in memory is bounded whatever their number and their output."""

    def __init__(self, limit: int = HELD_OUTPUT) -> None:
        self.limit, self.held = limit, 0

    def take(self, size: int) -> bool:
        """Whether `size` more bytes may stay in memory (they are counted if so)."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True


HELD = HeldOutput()


class Capture:
    """What a call's readers collect, bounded whatever the child writes: stdout up to the cap (the
    rest counted, and kept whole by the `Keeper` where there is a spool), stderr's tail; each line
    goes to the progress pattern and, for stderr, to `on_stderr`; all of it to `on_output` (a tool with
    `ask` rules: `run.questions`). The kept stdout stays in memory while `HELD` has room, and goes on in a private file
    (`overflow`) past it."""

    def __init__(self, tool: Tool, spool: Spool | None, on_stderr: OnLine | None, on_progress: OnProgress | None,
                 on_warning: OnLine, held: HeldOutput = HELD, on_output: OnOutput | None = None) -> None:
        self.tool, self.on_stderr, self.on_output = tool, on_stderr, on_output
        self.stdout = bytearray()
        self.held, self.in_memory = held, 0
        self.overflow: BinaryIO | None = None
        self.kept = 0                     # bytes of stdout kept, in memory and in the overflow file
        self.dropped = 0
        self.stderr_tail = b""
        self.keeper = Keeper(spool, tool.max_output, on_warning)
        self.progress = ProgressTracker(tool, on_progress, on_warning)

    def _stderr_line(self, line: str) -> None:
        self.progress.line(line)
        if self.on_stderr:
            self.on_stderr(line)

    async def read_stdout(self, stream: trio.abc.ReceiveStream) -> None:
        """stdout to EOF: kept up to the cap, the rest drained and counted."""
        cap, keeper = self.tool.max_output, self.keeper
        on_line = self.progress.line if self.tool.output == "text" and self.tool.progress else None
        splitter = _LineSplitter(on_line) if on_line else None
        while chunk := await stream.receive_some(READ_CHUNK):
            room = cap - self.kept
            if keeper.spilled("stdout"):
                await keeper.write("stdout", chunk)
            elif len(chunk) > room:
                await keeper.write("stdout", self.stdout_bytes() + chunk)
            if room > 0:
                await self._keep(chunk[:room])
            self.dropped += max(0, len(chunk) - max(room, 0))
            if self.on_output is not None:
                self.on_output("stdout", chunk)
            if splitter:
                splitter.feed(chunk)
        if splitter:
            splitter.close()

    async def read_stderr(self, stream: trio.abc.ReceiveStream) -> None:
        """stderr to EOF, line by line; its tail kept."""
        splitter = _LineSplitter(self._stderr_line)
        while chunk := await stream.receive_some(READ_CHUNK):
            self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL:]
            await self.keeper.stderr(chunk)
            if self.on_output is not None:
                self.on_output("stderr", chunk)
            splitter.feed(chunk)
        splitter.close()

    async def _keep(self, data: bytes | bytearray) -> None:
        """Kept stdout: in memory while the process's budget has room, in the overflow file after."""
        self.kept += len(data)
        if self.overflow is None and self.held.take(len(data)):
            self.in_memory += len(data)
            self.stdout += data
            return
        if self.overflow is None:
            self.overflow = tempfile.TemporaryFile(prefix="mcpwrap-output-")    # 0600, and unlinked at once
        await trio.to_thread.run_sync(self.overflow.write, data)

    def stdout_bytes(self) -> bytes:
        """The kept stdout, from memory and then from the overflow file."""
        if self.overflow is None:
            return bytes(self.stdout)
        self.overflow.flush()
        self.overflow.seek(0)
        data = bytes(self.stdout) + self.overflow.read()
        self.overflow.seek(0, 2)
        return data

    @property
    def stderr_text(self) -> str:
        return self.stderr_tail.decode("utf-8", "replace")

    async def finish(self) -> tuple[ResourceLink, ...]:
        """Close what the spool keeps: a link for each stream kept whole. The call's share of the
        process's budget is given back here, where every call ends however it ends."""
        self.held.held -= self.in_memory
        self.in_memory = 0
        return await self.keeper.finish(self.tool)

    def result(self, exit_code: int | None, timed_out: bool, duration_s: float, links: tuple[ResourceLink, ...],
               limit_hit: str | None, prompts: Sequence[tuple[int, int]] = ()) -> ToolResult:
        """The call's result, from what was read (`prompts`: see `make_result`)."""
        stdout = self.stdout_bytes()
        if self.overflow is not None:
            self.overflow.close()
            self.overflow = None
        return make_result(self.tool, stdout, self.dropped, exit_code, timed_out, self.stderr_text,
                           duration_s, links, limit_hit, prompts)


def without(data: bytes, spans: Sequence[tuple[int, int]]) -> bytes:
    """`data` without the byte ranges [start, end) in `spans` (in order, not overlapping; past its end: ignored)."""
    kept, at = [], 0
    for start, end in spans:
        kept.append(data[at:start])
        at = max(at, end)
    kept.append(data[at:])
    return b"".join(kept)


def make_result(tool: Tool, stdout: bytes, dropped: int, exit_code: int | None, timed_out: bool,
                stderr_tail: str, duration_s: float, links: tuple[ResourceLink, ...] = (),
                limit_hit: str | None = None, prompts: Sequence[tuple[int, int]] = ()) -> ToolResult:
    """Turn what the child produced into a ToolResult according to tool.output (an exit status in
    `protocol_error_codes` marks the error result a protocol error).

    `links` name the streams kept whole in the spool: they follow the result's other blocks. `prompts`
    are the ranges of stdout that were a question's prompt (`run.questions`): output other than text
    (JSON, an MCP result, bytes) is made of stdout without them; text keeps them, as a terminal shows."""
    meta: dict[str, Any] = dict(exit_code=exit_code, duration_s=duration_s, truncated=dropped > 0,
                                timed_out=timed_out, stderr_tail=stderr_tail, bytes_out=len(stdout) + dropped)
    if prompts and tool.output != "text":
        stdout = without(stdout, prompts)
    kept = next((link.uri for link in links if link.uri.endswith("/stdout")), None)
    where = f"; the whole output is kept at {kept}" if kept else ""
    failed = timed_out or limit_hit is not None or exit_code not in tool.success_codes
    if failed:
        why = (f"stopped: {limit_hit}" if limit_hit
               else f"timed out after {tool.timeout_s:g}s; its process group was killed" if timed_out
               else f"exited with status {exit_code}" if exit_code is not None and exit_code >= 0
               else f"killed by signal {-(exit_code or 0)}")
        parts = [stdout.decode("utf-8", "replace") if tool.output in ("text", "json") else "",
                 stderr_tail.strip(), f"[{tool.name} {why}]"]
        return ToolResult(content=(Text("\n".join(p for p in parts if p)), *links), is_error=True,
                          protocol_error=not timed_out and limit_hit is None and exit_code in tool.protocol_error_codes,
                          **meta)
    if tool.output == "text":
        text = stdout.decode("utf-8", "replace")
        if dropped:
            text += (f"\n[output truncated: {dropped} more bytes were discarded (max_output {tool.max_output})"
                     f"{where}]")
        return ToolResult(content=(Text(text), *links), **meta)
    if dropped:
        return ToolResult(content=(Text(f"output exceeded max_output ({tool.max_output} bytes) and was cut; "
                                        f"{tool.output} output cannot be used partially{where}"), *links),
                          is_error=True, **meta)
    if tool.output == "blob":                       # a resource's bytes (no tool can ask for this)
        return ToolResult(content=(Resource("", blob=base64.b64encode(stdout).decode()),), **meta)
    if tool.output.startswith(("image/", "audio/")):
        kind = tool.output.split("/")[0]
        return ToolResult(content=(Media(kind, base64.b64encode(stdout).decode(), tool.output),), **meta)
    try:
        doc = orjson.loads(stdout)
    except orjson.JSONDecodeError as exc:
        return error_result(f"the command's output is not valid JSON: {exc}", **meta)
    if jsonrpc.too_deep(doc, OUTPUT_DEPTH):
        return error_result(f"the command's JSON is nested deeper than {OUTPUT_DEPTH} levels", **meta)
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
