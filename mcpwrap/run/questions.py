"""A running command's questions: its prompts recognised in its output, their answers written to its stdin.

`Prompts` watches the output of a call whose tool has `ask` rules. Once the command has written
nothing for `ask_quiet` after a line it did not finish, that line (its last `PROMPT_WINDOW`
characters) is searched with each rule's prompt, a `output.GuardedPattern` as a progress pattern
is (one too slow is reported once and no longer matched in this call); a match is a question
(`answers.Asked`), asked once per piece of output, quoting the last `show` lines of the rule's
`show_stream` (the prompt's own line left out). Where a prompt on stdout begins (its pattern's
match) and ends (the end of output when it was asked) is kept in `prompts_at`: a result parsed
from stdout is made without them (`output.make_result`). `converse`
hands a question to `on_question`, which returns the answer, None when nobody can be asked (then the
rule's default answers, or the call ends), or raises `Unanswered`; the answer's bytes
(`answers.answer_bytes`) go to stdin. A question with no answer within `ask_timeout`, an answer
refused, a question declined: the call ends as on a timeout, and its result says which question.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from mcpwrap.config.model import Tool
from mcpwrap.protocol.answers import Asked, Refused, answer_bytes, shown
from mcpwrap.run.output import MATCH_LIMIT_S, GuardedPattern, OnLine

PROMPT_WINDOW = 256          # characters of the unfinished line a prompt pattern sees
SHOWN_BYTES = 64 * 1024      # output of each stream kept for a question's `show`
STREAMS = ("stdout", "stderr")

OnQuestion = Callable[[Asked], Awaitable[Any]]   # the answer; None: nobody can be asked


class Unanswered(Exception):
    """The question was declined, cancelled or answered with nothing usable: the message says how."""


class Prompts:
    """The output a call's questions are recognised in: each stream's unfinished line and recent output."""

    def __init__(self, tool: Tool, on_question: OnQuestion | None, on_warning: OnLine) -> None:
        self.tool, self.on_question, self.on_warning = tool, on_question, on_warning
        self.patterns = [GuardedPattern(rule.prompt, functools.partial(self._dropped, i))
                         for i, rule in enumerate(tool.ask)]
        self.unfinished = dict.fromkeys(STREAMS, b"")
        self.recent = dict.fromkeys(STREAMS, b"")
        self.seen = 0                 # bytes of output so far
        self.asked_at = -1            # `seen` when the last question was recognised
        self.stdout_seen = 0          # bytes of stdout so far
        self.prompts_at: list[tuple[int, int]] = []   # the byte ranges of stdout that were a question's prompt
        self.output = trio.Event()    # set by output since the last look

    def _dropped(self, index: int) -> None:
        self.on_warning(f"{self.tool.name}: the prompt pattern of ask rule {index} ran over "
                        f"{MATCH_LIMIT_S * 1000:g} ms of CPU; its question is not recognised for the rest of this call")

    def feed(self, stream: str, chunk: bytes | bytearray) -> None:
        end = chunk.rfind(b"\n")
        line = bytes(chunk[end + 1:]) if end >= 0 else self.unfinished[stream] + bytes(chunk)
        self.unfinished[stream] = line[-4 * PROMPT_WINDOW:]
        self.recent[stream] = (self.recent[stream] + bytes(chunk))[-SHOWN_BYTES:]
        if stream == "stdout":
            self.stdout_seen += len(chunk)
        self.seen += len(chunk)
        self.output.set()

    def question(self) -> Asked | None:
        """The question the output now ends with, if a rule recognises one. On stdout, the prompt (from
        where the pattern matched to the end of the line) is put in `prompts_at`."""
        for stream in STREAMS:
            text = self.unfinished[stream].decode("utf-8", "surrogateescape")[-PROMPT_WINDOW:]   # bytes kept exactly
            if not text:
                continue
            for rule, pattern in zip(self.tool.ask, self.patterns):
                if (found := pattern.search(text)) is None:
                    continue
                if stream == "stdout":
                    size = len(text[found.start():].encode("utf-8", "surrogateescape"))
                    self.prompts_at.append((self.stdout_seen - size, self.stdout_seen))
                line = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                return Asked(rule, line, shown(self._before(rule.show_stream, stream), rule.show), self.tool.name)
        return None

    def _before(self, quoted: str, asked_on: str) -> str:
        """The recent output of stream `quoted`, without the prompt's line when it is the stream asked on."""
        text = self.recent[quoted].decode("utf-8", "replace")
        return text[:text.rfind("\n") + 1] if quoted == asked_on else text

    def _answered(self) -> None:
        """The answer ends the line it answered, as on a terminal: the next prompt is seen on its own."""
        self.unfinished = dict.fromkeys(STREAMS, b"")
        self.recent = {stream: kept + b"\n" if kept and not kept.endswith(b"\n") else kept
                       for stream, kept in self.recent.items()}

    async def _quiet(self) -> None:
        """Until output came and then none for `ask_quiet`."""
        await self.output.wait()
        while self.output.is_set():
            self.output = trio.Event()
            with trio.move_on_after(self.tool.ask_quiet_s):
                await self.output.wait()

    async def _answer(self, asked: Asked) -> bytes:
        """The bytes that answer `asked`; `Unanswered` (saying why) when there are none."""
        value = None
        if self.on_question is not None:
            with trio.move_on_after(self.tool.ask_timeout_s) as waited:
                value = await self.on_question(asked)
            if waited.cancelled_caught:
                raise Unanswered(f"no answer came within {self.tool.ask_timeout_s:g}s; its process group was killed")
        if value is None:
            if not asked.has_default:
                raise Unanswered("nobody could be asked, and the rule has no default answer")
            value = asked.rule.default
        try:
            return answer_bytes(asked.rule, value)
        except Refused as exc:
            raise Unanswered(str(exc)) from None

    async def converse(self, stdin: trio.abc.SendStream, stopped: list[str], call: trio.CancelScope,
                       watching: trio.CancelScope) -> None:
        """Answer each question the command asks until `watching` is cancelled; a question without an
        answer is put in `stopped` and cancels `call`."""
        with watching:
            while True:
                await self._quiet()
                asked = self.question() if self.seen != self.asked_at else None
                if asked is None:
                    continue
                self.asked_at = self.seen
                try:
                    data = await self._answer(asked)
                except Unanswered as exc:
                    stopped.append(asked.unanswered(str(exc)))
                    call.cancel()
                    return
                try:
                    await stdin.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return                              # the command closed its stdin: no more answers
                if self.seen == self.asked_at:          # nothing since: the answered line ends here
                    self._answered()
