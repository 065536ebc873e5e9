"""A tool's `ask` rules as the loader reads them: prompts that cannot backtrack, answers that are
primitive forms, `send` that holds only `{value}` or one string per answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwrap.config import load as config
from mcpwrap.config.asking import backtracks
from mcpwrap.config.model import NO_DEFAULT, Tool


def tool(tmp_path: Path, ask: str, more: str = "") -> Tool:
    path = tmp_path / "t.toml"
    path.write_text(f'[tools.t]\nshell = "read v"\n{more}\nask = [{ask}]\n')
    found = config.load(path).tool("t")
    assert found is not None
    return found


def problems(tmp_path: Path, ask: str, more: str = "") -> str:
    with pytest.raises(config.ConfigError) as caught:
        tool(tmp_path, ask, more)
    return "\n".join(p.message for p in caught.value.problems)


def test_a_terraform_style_rule_is_read_with_its_defaults(tmp_path: Path) -> None:
    t = tool(tmp_path, "{ prompt = 'Enter a value: $', message = 'Apply this plan?', answer = { type = 'boolean' }, "
                       "send = { true = \"yes\\n\", false = \"no\\n\" }, default = false, show = 20 }")
    (rule,) = t.ask
    assert rule.prompt.search("  Enter a value: ") and rule.send == {"true": "yes\n", "false": "no\n"}
    assert (rule.default, rule.show, rule.show_stream, rule.answer) == (False, 20, "stdout", {"type": "boolean"})
    assert (t.ask_timeout_s, t.ask_quiet_s) == (t.timeout_s, 0.2)


def test_a_free_text_rule_defaults_to_a_string_sent_as_a_line(tmp_path: Path) -> None:
    t = tool(tmp_path, "{ prompt = 'Name: $', message = 'Which name?' }", 'ask_timeout = "5s"\nask_quiet = "50ms"')
    (rule,) = t.ask
    assert (rule.answer, rule.send, rule.default) == ({"type": "string"}, "{value}\n", NO_DEFAULT)
    assert (t.ask_timeout_s, t.ask_quiet_s) == (5.0, 0.05)


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a*)*b", r"(a|ab)*c", r"(\w+\s?)+:", r"(x)\1", r"(?:.*,){5}y"])
def test_a_prompt_that_can_backtrack_is_refused_at_load(tmp_path: Path, pattern: str) -> None:
    assert backtracks(pattern) is not None
    assert "could backtrack without bound" in problems(tmp_path, f"{{ prompt = '{pattern}', message = 'q' }}")


@pytest.mark.parametrize("pattern", [r"Enter a value: $", r"Do you want to continue\? \[Y/n\] ?$",
                                     r"^\s*(?:Environment|Env)\b.*: $", r"[a-z]{1,20}\?$"])
def test_ordinary_prompts_are_not_taken_for_backtracking_ones(pattern: str) -> None:
    assert backtracks(pattern) is None


@pytest.mark.parametrize(("ask", "words"), [
    ("{ prompt = 'x', message = 'q', send = '{value}{arg}' }", "send may hold only {value}, not {arg}"),
    ("{ prompt = 'x', message = 'q', send = { yes = 'y' } }", "a send table needs a boolean answer or an enum"),
    ("{ prompt = 'x', message = 'q', answer = { type = 'boolean' }, send = { true = 'y' } }",
     "one string for each answer: true, false"),
    ("{ prompt = 'x', message = 'q', answer = { type = 'object' } }", "answer needs a type"),
    ("{ prompt = 'x', message = 'q', answer = { type = 'string', pattern = 'a' } }", "unknown key"),
    ("{ prompt = 'x', message = 'q', answer = { type = 'boolean' }, default = 'no' }", "default does not match"),
    ("{ prompt = '(', message = 'q' }", "not a valid regular expression"),
    ("{ message = 'q' }", "needs a 'prompt'"),
    ("{ prompt = 'x' }", "needs a 'message'"),
    ("{ prompt = 'x', message = 'q', show = 1000 }", "show must be"),
    ("{ prompt = 'x', message = 'q', show = 5, show_stream = 'both' }", "show_stream is stdout or stderr, not 'both'"),
])
def test_a_rule_that_could_not_work_is_refused_at_load(tmp_path: Path, ask: str, words: str) -> None:
    assert words in problems(tmp_path, ask)


def test_ask_and_stdin_cannot_share_stdin(tmp_path: Path) -> None:
    assert "cannot also take 'stdin'" in problems(
        tmp_path, "{ prompt = 'x', message = 'q' }", 'stdin = "s"\nargs.s = { type = "string" }')
