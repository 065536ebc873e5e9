"""A running command's question and its answer, whoever is asked (a client, a terminal).

`Asked` is the question a command asked (an `ask` rule whose prompt matched its output): the text a
person sees, and the elicitation form it becomes. `answer_bytes` is what an answer writes to the
command's stdin: the answer is checked against the rule's schema (`arguments.value_problems`), a
string holding a newline or any other control character is refused (no answer becomes extra lines
or a terminal escape sequence), and the bytes are the rule's own, with the value as data: the
`send` table's string for that answer, or the template with its `{value}`s replaced.
`from_elicitation` turns an ElicitResult into the answer value, or the reason there is none.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mcpwrap.config.model import NO_DEFAULT, AskRule
from mcpwrap.protocol.arguments import value_problems

# C0 controls (newline, carriage return, ESC...), DEL and C1 controls (CSI is U+009B).
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# What `show` removes from quoted output: terminal escape sequences first, then any control left but tab.
ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])")
FIELD = "answer"                          # the one field of the elicitation form


class Refused(Exception):
    """An answer that cannot be written: the message says why; nothing was written."""


@dataclass(frozen=True)
class Asked:
    """A question a running command asked: the rule that recognised it, the prompt line, the output quoted."""
    rule: AskRule
    prompt: str
    shown: str = ""
    tool: str = ""                        # the tool whose command asked

    @property
    def text(self) -> str:
        """What the person reads: the rule's message, then the quoted output."""
        return f"{self.rule.message}\n\n{self.shown}" if self.shown else self.rule.message

    @property
    def has_default(self) -> bool:
        return self.rule.default is not NO_DEFAULT

    def request(self) -> dict[str, Any]:
        """The `elicitation/create` request that asks it: a form of one field, `answer`."""
        field = dict(self.rule.answer)
        if self.has_default:
            field["default"] = self.rule.default
        return {"method": "elicitation/create",
                "params": {"message": self.text,
                           "requestedSchema": {"type": "object", "properties": {FIELD: field}, "required": [FIELD]}}}

    def unanswered(self, why: str) -> str:
        """Why the call ends without an answer, quoting the question."""
        return f"the command asked {self.prompt.strip()!r} ({self.rule.message}) and {why}"


def shown(output: str, lines: int) -> str:
    """The last `lines` lines of output as a question quotes them: escape sequences and control characters removed."""
    if lines <= 0:
        return ""
    kept = output.splitlines()[-lines:]
    return "\n".join(CONTROL.sub("", ESCAPES.sub("", line).replace("\t", "    ")) for line in kept).strip("\n")


def answer_bytes(rule: AskRule, value: Any) -> bytes:
    """What answering `value` writes to stdin; `Refused` when the value does not fit the rule."""
    problems = value_problems(rule.answer, value)
    if problems:
        raise Refused(f"the answer {_quoted(value)} does not fit the question: {'; '.join(problems)}")
    if isinstance(value, str) and CONTROL.search(value):
        raise Refused(f"the answer {_quoted(value)} holds a newline or another control character; nothing was written")
    text = value if isinstance(value, str) else orjson.dumps(value).decode()   # true/false, 3, 2.5
    if isinstance(rule.send, Mapping):
        return rule.send[text].encode()
    return rule.send.replace("{value}", text).encode()     # the template's own occurrences: a value is not rescanned


def typed(kind: Any, text: str) -> Any:
    """An answer typed as text (a terminal, a command line), as its schema's type: y/yes/true and
    n/no/false for a boolean, a number for a number; left as text when it is not one (the check refuses it)."""
    if kind == "boolean" and text.strip().lower() in ("y", "yes", "true", "n", "no", "false"):
        return text.strip().lower() in ("y", "yes", "true")
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            return text
    return text


def from_elicitation(result: Mapping[str, Any]) -> tuple[bool, Any]:
    """An ElicitResult to this question: (True, the answer), or (False, why there is none)."""
    action = result.get("action")
    if action in ("decline", "cancel"):
        return False, f"the user {'declined' if action == 'decline' else 'cancelled'} the question"
    content = result.get("content")
    if action != "accept" or not isinstance(content, Mapping) or FIELD not in content:
        return False, "the answer to the question was malformed"
    return True, content[FIELD]


def _quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
