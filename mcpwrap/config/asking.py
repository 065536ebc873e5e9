"""A tool's `ask` rules: the questions a running command may ask, and how each answer is written back.

`read_ask` turns the `ask`, `ask_timeout` and `ask_quiet` keys into `AskRule`s, reporting every
problem on the `Reader`. A prompt pattern is refused when it can backtrack without bound
(`backtracks`: a repeat inside a repeat, an alternation or a backreference under a repeat), so no
output a command prints can make matching it cost more than a scan; the runner also stops any one
match after a few milliseconds, and drops a pattern too slow for the rest of the call, as it does a
progress pattern (`run.output.GuardedPattern`). `show_stream` names the stream `show` quotes. An answer is a primitive
elicitation schema (`ANSWER_KEYS`), and `send` is either one template whose only placeholder is
`{value}`, or a table giving the bytes for each possible answer (a boolean's "true" and "false",
an enum's values), so what a command receives is what its author wrote, with the value as data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import re._parser as sre_parse       # type: ignore[import-not-found]   # the parser `re` itself compiles with

from mcpwrap.config.model import NO_DEFAULT, AskRule
from mcpwrap.config.reader import Reader, is_table, parse_duration

ASK_KEYS = {"prompt", "message", "answer", "send", "default", "show", "show_stream"}
SHOW_STREAMS = ("stdout", "stderr")
# What an answer schema may say: the primitive forms elicitation asks for (MCP PrimitiveSchemaDefinition).
ANSWER_KEYS = {"type", "title", "description", "enum", "enumNames", "minLength", "maxLength", "minimum", "maximum"}
ANSWER_TYPES = ("boolean", "string", "number", "integer")
MAX_SHOW = 200                       # lines of output a question may quote
SEND_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def backtracks(pattern: str) -> str | None:
    """Why matching `pattern` could backtrack without bound (None: it cannot, beyond what a
    sequence of simple repeats costs): a repeat inside a repeat ('(a+)+'), an alternation under a
    repeat ('(a|ab)*'), or a backreference. The pattern must compile."""
    return _risk(sre_parse.parse(pattern), under_repeat=False)


def _risk(items: Any, under_repeat: bool) -> str | None:
    for op, value in items:
        name = str(op)
        if name in REPEATS:
            low, high, body = value
            repeats = high is sre_parse.MAXREPEAT or high > 1
            if under_repeat and repeats:
                return "it repeats inside a repeat"
            if (found := _risk(body, under_repeat or repeats)) is not None:
                return found
        elif name == "BRANCH":
            if under_repeat:
                return "it has an alternation (|) inside a repeat"
            for branch in value[1]:
                if (found := _risk(branch, under_repeat)) is not None:
                    return found
        elif name == "SUBPATTERN":
            if (found := _risk(value[-1], under_repeat)) is not None:
                return found
        elif name in ("ASSERT", "ASSERT_NOT"):
            if (found := _risk(value[1], under_repeat)) is not None:
                return found
        elif name in ("GROUPREF", "GROUPREF_EXISTS"):
            return "it has a backreference"
        elif name == "ATOMIC_GROUP" and (found := _risk(value, under_repeat)) is not None:
            return found
    return None


def read_ask(r: Reader, t: Mapping[str, Any], key: tuple[str, ...]) -> tuple[AskRule, ...]:
    """The tool's `ask` rules, each checked; the problems reported on `r`."""
    entries = r.typed(t, key, "ask", list, [])
    rules = []
    for i, entry in enumerate(entries):
        akey = key + ("ask", str(i))
        if not is_table(r, akey, entry):
            continue
        r.keys(entry, akey, ASK_KEYS)
        rule = _read_rule(r, entry, akey)
        if rule is not None:
            rules.append(rule)
    return tuple(rules)


def _read_rule(r: Reader, entry: Mapping[str, Any], key: tuple[str, ...]) -> AskRule | None:
    before = len(r.problems)
    prompt = _read_prompt(r, entry, key)
    message = r.typed(entry, key, "message", str)
    if message is None:
        r.problem(key, "an ask rule needs a 'message': the question the person sees")
    answer = _read_answer(r, entry, key)
    send = _read_send(r, entry, key, answer)
    show = r.typed(entry, key, "show", int, 0)
    if not 0 <= show <= MAX_SHOW:
        r.problem(key + ("show",), f"show must be 0-{MAX_SHOW} lines")
    show_stream = r.typed(entry, key, "show_stream", str, "stdout")
    if show_stream not in SHOW_STREAMS:
        r.problem(key + ("show_stream",), f"show_stream is {' or '.join(SHOW_STREAMS)}, not {show_stream!r}")
    default = entry.get("default", NO_DEFAULT)
    if default is not NO_DEFAULT and answer:
        r.schemas.add(key + ("answer",), {**answer, "default": default})   # the default must fit the answer
    if len(r.problems) > before or prompt is None or message is None or send is None:
        return None
    return AskRule(prompt=prompt, message=message, answer=answer, send=send, default=default, show=show,
                   show_stream=show_stream)


def _read_prompt(r: Reader, entry: Mapping[str, Any], key: tuple[str, ...]) -> re.Pattern[str] | None:
    text = r.typed(entry, key, "prompt", str)
    if text is None:
        r.problem(key, "an ask rule needs a 'prompt': a regular expression for the command's question")
        return None
    try:
        pattern = re.compile(text)
    except re.error as exc:
        r.problem(key + ("prompt",), f"prompt is not a valid regular expression: {exc}")
        return None
    if (risk := backtracks(text)) is not None:
        r.problem(key + ("prompt",), f"prompt {text!r} could backtrack without bound ({risk}); "
                  "write it without nested repeats, alternations under a repeat or backreferences")
        return None
    return pattern


def _read_answer(r: Reader, entry: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, Any]:
    answer = r.typed(entry, key, "answer", dict, {"type": "string"})
    akey = key + ("answer",)
    r.keys(answer, akey, ANSWER_KEYS)
    if answer.get("type") not in ANSWER_TYPES:
        r.problem(akey, f"answer needs a type: one of {', '.join(ANSWER_TYPES)}")
        return {}
    enum = answer.get("enum")
    if enum is not None and not (answer["type"] == "string" and isinstance(enum, list) and enum
                                 and all(isinstance(v, str) for v in enum)):
        r.problem(akey + ("enum",), "an answer's enum is a non-empty array of strings (type = \"string\")")
        return {}
    r.schemas.add(akey, answer)
    return dict(answer)


def _read_send(r: Reader, entry: Mapping[str, Any], key: tuple[str, ...],
               answer: Mapping[str, Any]) -> str | dict[str, str] | None:
    """`send`: a template with `{value}` only, or one string for each answer a boolean or an enum can have."""
    skey = key + ("send",)
    send = r.typed(entry, key, "send", (str, dict), "{value}\n")
    if isinstance(send, str):
        bad = [m[0] for m in SEND_PLACEHOLDER.finditer(send) if m[1] != "value"]
        if bad:
            r.problem(skey, f"send may hold only {{value}}, not {bad[0]}")
        return send
    choices = (["true", "false"] if answer.get("type") == "boolean"
               else [str(v) for v in answer["enum"]] if "enum" in answer else None)
    if choices is None:
        r.problem(skey, "a send table needs a boolean answer or an enum: give one string per answer, "
                  "or write send as a template such as \"{value}\\n\"")
        return None
    if sorted(send) != sorted(choices) or not all(isinstance(v, str) for v in send.values()):
        r.problem(skey, f"a send table gives one string for each answer: {', '.join(choices)}")
        return None
    return dict(send)


def read_ask_times(r: Reader, t: Mapping[str, Any], key: tuple[str, ...], timeout_s: float) -> tuple[float, float]:
    """`ask_timeout` (default: the tool's timeout) and `ask_quiet` (default 200 ms)."""
    return (r.converted(t, key, "ask_timeout", parse_duration, timeout_s),
            r.converted(t, key, "ask_quiet", parse_duration, 0.2))
