"""A running command's questions, with real scripts that prompt on stdin: each is recognised once the
command is quiet, its answer reaches stdin as the rule's bytes, and a question nobody answers ends
the call (the rule's default, an error quoting it, or `ask_timeout`), never a hang until the timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from mcpwrap.config import load as config
from mcpwrap.protocol.answers import Asked
from mcpwrap.run import process as runner
from mcpwrap.run.questions import Prompts, Unanswered
from tests.harness import HANG_S

TERRAFORM = """
[tools.apply]
shell = '''printf 'Plan: 1 to add, 0 to destroy.\\n\\nDo you want to perform these actions?\\n  Enter a value: '
IFS= read -r v; printf 'got [%s]\\n' "$v"'''
timeout = "{timeout}"
ask_timeout = "{ask_timeout}"
ask_quiet = "{quiet}"
ask = [{{ prompt = 'Enter a value: $', message = "Apply this plan?", answer = {{ type = "boolean" }}, send = {{ true = "yes\\n", false = "no\\n" }}, show = 3 {default} }}]
[tools.migrate]
shell = '''printf 'Environment: '; IFS= read -r env; printf 'Name: '; IFS= read -r name; printf 'got [%s] [%s]\\n' "$env" "$name"'''
ask = [{{ prompt = 'Environment: $', message = "Which environment?", answer = {{ type = "string", enum = ["dev", "prod"] }} }},
       {{ prompt = 'Name: $', message = "Which name?" }}]
ask_quiet = "50ms"
[tools.nag]
shell = '''while :; do printf 'Continue? [y/n] '; IFS= read -r v || exit 3; done'''
timeout = "1s"
ask_quiet = "20ms"
ask = [{{ prompt = '\\[y/n\\] $', message = "Continue?", answer = {{ type = "string" }} }}]
"""


def tools(tmp_path: Path, timeout: str = "30s", ask_timeout: str = "30s", quiet: str = "50ms",
          default: str = "") -> config.Config:
    path = tmp_path / "t.toml"
    path.write_text(TERRAFORM.format(timeout=timeout, ask_timeout=ask_timeout, quiet=quiet, default=default))
    return config.load(path)


def run(tool: config.Tool | None, answers: list[Any] | None) -> tuple[Any, list[Asked]]:
    """Run `tool`, answering its questions in turn from `answers` (None: nobody can be asked)."""
    asked: list[Asked] = []

    async def on_question(question: Asked) -> Any:
        asked.append(question)
        assert answers is not None
        answer = answers.pop(0)
        if answer is Ellipsis:
            await trio.sleep_forever()
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def main() -> Any:
        assert tool is not None
        with trio.fail_after(HANG_S):
            return await runner.run(tool, {}, on_question=on_question if answers is not None else None)
    return trio.run(main), asked


def test_a_terraform_style_question_is_asked_with_the_plan_and_its_answer_reaches_stdin(tmp_path: Path) -> None:
    result, asked = run(tools(tmp_path).tool("apply"), [True])
    assert not result.is_error and result.text.endswith("got [yes]\n")
    (question,) = asked
    assert question.prompt == "  Enter a value: "
    assert question.text == "Apply this plan?\n\nPlan: 1 to add, 0 to destroy.\n\nDo you want to perform these actions?"


def test_two_questions_in_turn_each_get_their_answer(tmp_path: Path) -> None:
    result, asked = run(tools(tmp_path).tool("migrate"), ["prod", "my app"])
    assert result.text.endswith("got [prod] [my app]\n")
    assert [q.rule.message for q in asked] == ["Which environment?", "Which name?"]


def test_a_caller_that_cannot_ask_gets_the_rules_default(tmp_path: Path) -> None:
    result, _ = run(tools(tmp_path, default=", default = false").tool("apply"), None)
    assert result.text.endswith("got [no]\n")


def test_without_a_default_the_call_ends_at_once_quoting_the_question(tmp_path: Path) -> None:
    result, _ = run(tools(tmp_path).tool("apply"), None)
    assert result.is_error and "got" not in result.text
    assert "the command asked 'Enter a value:' (Apply this plan?) and nobody could be asked" in result.text
    assert result.duration_s < 10


def test_an_answer_with_a_newline_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    result, _ = run(tools(tmp_path).tool("migrate"), ["prod", "x\nrm -rf ~"])
    assert result.is_error and "got" not in result.text
    assert "holds a newline or another control character; nothing was written" in result.text


def test_an_answer_outside_the_enum_is_refused(tmp_path: Path) -> None:
    result, _ = run(tools(tmp_path).tool("migrate"), ["staging"])
    assert result.is_error and "does not fit the question" in result.text and "got" not in result.text


def test_a_declined_question_ends_the_call(tmp_path: Path) -> None:
    result, _ = run(tools(tmp_path).tool("apply"), [Unanswered("the user declined the question")])
    assert result.is_error and "the user declined the question" in result.text and "got" not in result.text


def test_an_unanswered_question_ends_the_call_at_ask_timeout(tmp_path: Path) -> None:
    result, asked = run(tools(tmp_path, ask_timeout="300ms").tool("apply"), [...])
    assert len(asked) == 1 and result.is_error
    assert "no answer came within 0.3s; its process group was killed" in result.text


def test_a_command_that_asks_forever_ends_at_its_timeout(tmp_path: Path) -> None:
    result, asked = run(tools(tmp_path).tool("nag"), ["y"] * 10_000)
    assert result.timed_out and result.is_error and len(asked) > 1


def test_prompt_like_text_the_command_goes_on_from_is_no_question(tmp_path: Path) -> None:
    path = tmp_path / "q.toml"
    path.write_text("""[tools.t]
shell = "printf 'Enter a value: '; printf 'not a question\\\\n'"
ask_quiet = "5s"
ask = [{ prompt = 'Enter a value: $', message = "?" }]
""")
    result, asked = run(config.load(path).tool("t"), [])
    assert asked == [] and result.text == "Enter a value: not a question\n" and not result.is_error


def test_with_tty_a_program_that_prompts_only_on_a_terminal_is_answered(tmp_path: Path) -> None:
    path = tmp_path / "tty.toml"
    path.write_text("""[tools.t]
shell = '''[ -t 0 ] && [ -t 1 ] || { echo 'not a terminal'; exit 9; }; printf 'Continue? '; IFS= read -r v; printf 'got [%s]\\n' "$v"'''
tty = true
ask_quiet = "50ms"
ask = [{ prompt = 'Continue\\? $', message = "Continue?", answer = { type = "boolean" }, send = { true = "y\\n", false = "n\\n" } }]
""")
    result, asked = run(config.load(path).tool("t"), [True])
    assert not result.is_error, result.text
    assert result.text == "Continue? got [y]\n"              # no echo of the answer, no CR before LF
    assert [q.prompt for q in asked] == ["Continue? "]


def test_the_next_prompt_is_seen_on_its_own_not_after_the_answered_one(tmp_path: Path) -> None:
    _, asked = run(tools(tmp_path).tool("migrate"), ["dev", "x"])
    assert [q.prompt for q in asked] == ["Environment: ", "Name: "]


JSON_AFTER_A_QUESTION = """[tools.t]
shell = '''printf 'Environment: '; IFS= read -r env; printf '{doc}\\n' "$env"'''
output = "{output}"
tty = {tty}
ask_quiet = "50ms"
ask = [{{ prompt = 'Environment: $', message = "Which environment?" }}]
"""
ENV = '{"env": "%s"}'


def test_the_prompt_of_a_json_tool_is_not_part_of_the_json_it_prints(tmp_path: Path) -> None:
    for tty in ("false", "true"):
        path = tmp_path / "json.toml"
        path.write_text(JSON_AFTER_A_QUESTION.format(output="json", tty=tty, doc=ENV))
        result, asked = run(config.load(path).tool("t"), ["prod"])
        assert [q.prompt for q in asked] == ["Environment: "]
        assert not result.is_error and result.structured == {"env": "prod"}, (tty, result.text)


def test_the_prompt_of_an_mcp_tool_is_not_part_of_the_result_it_prints(tmp_path: Path) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text(JSON_AFTER_A_QUESTION.format(output="mcp", tty="false",
                                                 doc='{"content": [{"type": "text", "text": "%s"}]}'))
    result, _ = run(config.load(path).tool("t"), ["dev"])
    assert not result.is_error and result.text == "dev", result.text


def test_a_text_tool_keeps_its_prompt_in_its_output(tmp_path: Path) -> None:
    path = tmp_path / "text.toml"
    path.write_text(JSON_AFTER_A_QUESTION.format(output="text", tty="false", doc=ENV))
    result, _ = run(config.load(path).tool("t"), ["prod"])
    assert result.text == 'Environment: {"env": "prod"}\n'


SHOWING = """[tools.t]
shell = '''echo 'plan 1'; echo 'warning: slow disk' >&2; echo 'plan 2'; printf 'Continue? ' {prompt_to}; IFS= read -r v; echo "got [$v]"'''
ask_quiet = "50ms"
ask = [{{ prompt = 'Continue\\? $', message = "Continue?", show = 3 {stream} }}]
"""


def test_show_quotes_stdout_not_stderr_interleaved_with_it(tmp_path: Path) -> None:
    for prompt_to in ("", ">&2"):                       # the prompt on stdout, or on stderr as `read -p` writes it
        path = tmp_path / "show.toml"
        path.write_text(SHOWING.format(prompt_to=prompt_to, stream=""))
        result, (question,) = run(config.load(path).tool("t"), ["y"])
        assert result.text.endswith("got [y]\n")
        assert question.text == "Continue?\n\nplan 1\nplan 2", prompt_to


def test_show_stream_stderr_quotes_stderr(tmp_path: Path) -> None:
    path = tmp_path / "show.toml"
    path.write_text(SHOWING.format(prompt_to=">&2", stream=', show_stream = "stderr"'))
    _, (question,) = run(config.load(path).tool("t"), ["y"])
    assert question.text == "Continue?\n\nwarning: slow disk"


def test_a_prompt_pattern_too_slow_warns_once_and_is_dropped_for_the_call(tmp_path: Path) -> None:
    path = tmp_path / "slow.toml"
    path.write_text("""[tools.t]
command = ["true"]
ask = [{ prompt = 'a*a*a*a*a*c', message = "slow" }, { prompt = 'a: $', message = "fast" }]
""")
    warnings: list[str] = []
    prompts = Prompts(config.load(path).tool("t"), None, warnings.append)
    for _ in range(5):
        prompts.feed("stdout", b"a" * 300)
        assert prompts.question() is None
    prompts.feed("stdout", b"a: ")
    question = prompts.question()
    assert question is not None and question.rule.message == "fast"
    assert len(warnings) == 1 and "rest of this call" in warnings[0], warnings


def test_each_prompt_of_a_json_tool_is_left_out_of_its_json(tmp_path: Path) -> None:
    path = tmp_path / "two.toml"
    path.write_text("""[tools.t]
shell = '''echo '{"log": ['; printf 'Environment: '; IFS= read -r env; printf '"%s",' "$env"; printf 'Name: '; IFS= read -r name; printf '"%s"]}\\n' "$name"'''
output = "json"
ask_quiet = "50ms"
ask = [{ prompt = 'Environment: $', message = "Which environment?" }, { prompt = 'Name: $', message = "Which name?" }]
""")
    result, asked = run(config.load(path).tool("t"), ["dev", "x"])
    assert [q.prompt for q in asked] == ["Environment: ", '"dev",Name: ']
    assert result.structured == {"log": ["dev", "x"]}, result.text       # from where the prompt matched, no more
