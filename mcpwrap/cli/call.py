"""`mcpwrap call` and `mcpwrap list`: run one tool, and show what there is to run, as `serve` would.

`call` asks the same decision as `serve` (`protocol.asking.next_question`) what the call still
needs, and asks a human on the terminal instead of the client: the elicited arguments, then the
confirmation; and while the command runs, the questions its `ask` rules recognise (`--answer`
answers them in turn, `--yes` answers a yes/no one yes; without a terminal or those, the rule's
default answers, else the call ends). A user waits on it, so it imports trio and the runner only to
run the command.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

from mcpwrap.cli.common import (EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, UsageError, assignment, fail, json_text, note,
                                output_spool, print_json, print_text)
from mcpwrap.cli.inline import tools_config, without_file
from mcpwrap.cli.output import ProgressLine, write_binary
from mcpwrap.cli.tasks import start_task, task_outcome


def call(file: str | None, tool: str | None, arguments: str | None, arg: list[str], output: str | None, yes: bool,
         task: bool, no_wait: bool, state_dir: str | None, secret_file: str | None, as_json: bool, inline: list[str],
         describe: list[str], answer: list[str] | None = None) -> NoReturn:
    """Run one tool as `serve` runs it for a client: the same checks and questions (asked here, on
    the terminal), then the command, or a durable task with `--task` or for a tool that `serve`
    runs only as one (task = "always"); output beyond max_output is kept in the same spool."""
    file, tool, arguments = without_file(inline, [file, tool, arguments])
    if tool is None:
        raise UsageError("Missing argument 'TOOL'.")
    gc.disable()        # what the imports and the tools file create lives until exit: no collection pass
    try:                # over it can free anything, and frozen, none walks it later
        from mcpwrap.protocol import asking  # noqa: F401
        from mcpwrap.run import process  # noqa: F401  (trio too: imported before the freeze)

        config = tools_config(file, inline, describe)
    finally:
        gc.freeze()
        gc.enable()
    spec = config.tool(tool)
    if spec is None:
        fail(f"no tool named {tool!r} in {file or '--tool'} (tools: {', '.join(t.name for t in config.tools)})"
             + ("; with --tool options there is no tools FILE: give one or the other" if inline else ""), EXIT_USAGE)
    if spec.task == "always" and not task:
        note(f"{tool!r} has task = \"always\": it runs as a durable task, as `serve` runs it for a client")
        task = True
    if no_wait and not task:
        fail("--no-wait goes with --task", EXIT_USAGE)
    args = _settled(spec, _given_arguments(spec, arguments, arg), yes)
    target = Path(output) if output else None
    if task:
        _call_as_task(config, spec, args, no_wait, state_dir, secret_file, target, as_json,
                      _task_question(list(answer or []), yes))
    import shlex

    source = [file] if file else [w for spec in inline for w in ("--tool", spec)]
    state = ["--state-dir", state_dir] if state_dir else []
    _run_call(spec, args, output_spool(config, state_dir), lambda uri: shlex.join(["mcpwrap", "read", *source, uri, *state]),
              target, as_json, _on_question(list(answer or []), yes))


def list_tools(file: str | None, as_json: bool, inline: list[str], describe: list[str]) -> None:
    """The tools, resources and prompts of a tools file (or of --tool options), as text or as
    `serve` lists them; what mcpwrap does around a tool (confirm, elicit) under "mcpwrap"."""
    config = tools_config(file, inline, describe)
    if as_json:      # as `serve` lists them (tools with the inputSchema each gets)
        from mcpwrap.protocol.prompts import render_prompt
        from mcpwrap.protocol.resources import render_resource
        from mcpwrap.protocol.revisions import LATEST_LEGACY
        from mcpwrap.protocol.tools import render_tool

        print_json({"tools": [{**render_tool(t, LATEST_LEGACY), **_behaviour(t)} for t in config.tools],
                    "resources": [render_resource(r, LATEST_LEGACY) for r in config.resources],
                    "prompts": [render_prompt(p, LATEST_LEGACY) for p in config.prompts]})
        return
    for tool in config.tools:
        print(f"{tool.name}  {tool.description}".rstrip())  # stdout-ok
        if tool.confirm:
            print(f"    asks first: {json_text(tool.confirm)}")  # stdout-ok
        if tool.task != "never":
            print(f"    runs {'only ' if tool.task == 'always' else 'also '}as a task (task = \"{tool.task}\")")  # stdout-ok
        _print_args(tool.args)
    for resource in config.resources:
        print(f"resource {resource.name}  {resource.uri or resource.uri_template}  "  # stdout-ok
              f"{resource.description or resource.title or ''}".rstrip())
        _print_args(resource.tool.args if resource.tool and resource.uri_template else ())
    for prompt in config.prompts:
        print(f"prompt {prompt.name}  {prompt.description or prompt.title or ''}".rstrip())  # stdout-ok
        for parg in prompt.args:
            choices = f" ({'/'.join(parg.enum)})" if parg.enum else ""
            print(f"    {parg.name}: {'required' if parg.required else 'optional'}{choices}  "  # stdout-ok
                  f"{parg.description or ''}".rstrip())


def _behaviour(tool: Any) -> dict[str, Any]:
    """What mcpwrap does around a tool that its MCP listing does not say: the confirmation it asks,
    the arguments it elicits when missing (under "mcpwrap"; nothing when there is neither)."""
    extra = {"confirm": tool.confirm, "elicit": [a.name for a in tool.args if a.elicit]}
    extra = {key: value for key, value in extra.items() if value}
    return {"mcpwrap": extra} if extra else {}


def _print_args(args: Any) -> None:
    """Each argument: its type, its choices, whether the user is asked for it, its default."""
    for arg in args:
        kind = arg.schema.get("type", "any")
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        choices = _choices(arg.schema)
        kind += f", one of {'/'.join(map(str, choices))}" if choices else ""
        kind += " (asked of the user when missing)" if arg.elicit else ""
        extra = ("" if arg.required else f" (default {json_text(arg.schema['default'])})"
                 if "default" in arg.schema else " (optional)")
        print(f"    {arg.name}: {kind}{extra}  {arg.schema.get('description', '')}".rstrip())  # stdout-ok


def _choices(schema: Any) -> list[Any] | None:
    """The values an argument (or each item of an array argument) may take, when its schema lists them."""
    from mcpwrap.config.model import string_consts

    items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
    titled: Any = schema.get("oneOf") if schema.get("type") == "string" else items.get("anyOf")
    return schema.get("enum") or items.get("enum") or ([v["const"] for v in titled] if string_consts(titled) else None)


def _given_arguments(tool: Any, json_args: str | None, assignments: list[str]) -> dict[str, Any]:
    """The JSON object given, then each `--arg NAME=VALUE` over it (typed by NAME's schema)."""
    import orjson

    try:
        args = orjson.loads(json_args) if json_args else {}
    except orjson.JSONDecodeError as exc:
        fail(f"the JSON arguments do not parse: {exc}", EXIT_USAGE)
    if not isinstance(args, dict):
        fail("the JSON arguments must be an object, like '{\"name\": \"value\"}'", EXIT_USAGE)
    args.update(_typed_arg(tool, a) for a in assignments)
    return args


def _typed_arg(tool: Any, text: str) -> tuple[str, Any]:
    """`--arg NAME=VALUE`, VALUE typed by NAME's schema (see `_parsed`); a usage error if it cannot be."""
    name, value = assignment("--arg", text)
    arg = next((a for a in tool.args if a.name == name), None)
    if arg is None:
        known = ", ".join(a.name for a in tool.args) or "none"
        fail(f"{tool.name!r} has no argument {name!r} (its arguments: {known}; nothing ran)", EXIT_USAGE)
    try:
        return name, _parsed(arg, value)
    except ValueError as exc:
        fail(f"--arg {name}={value!r}: {exc} (nothing ran)", EXIT_USAGE)


def _parsed(arg: Any, value: str) -> Any:
    """The raw text for a string argument, else JSON.

    Without a type, or with a type list allowing "string", text that is not JSON stays text;
    otherwise ValueError names the expected type (`--arg branch=1.0` must stay "1.0").
    """
    import orjson

    kind = arg.schema.get("type")
    if kind == "string":
        return value
    kinds = [kind] if isinstance(kind, str) else list(kind or [])
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        if not kinds or "string" in kinds:
            return value
        raise ValueError(f"{arg.name!r} takes {' or '.join(kinds)}, written as JSON") from None


def _settled(tool: Any, args: dict[str, Any], yes: bool) -> dict[str, Any]:
    """The arguments once the call needs nothing more, as placed (defaults filled in, paths resolved).
    What is missing is decided as for a client (`protocol.asking.next_question`) and asked on the
    terminal: the elicited arguments, then the confirmation (`--yes` gives it). Exits 2 on refused
    arguments or when stdin is no terminal to ask on, 1 when the user declines."""
    from mcpwrap.protocol.asking import Ready, Resolve, next_question
    from mcpwrap.run.arguments import resolve_paths

    confirmed, resolution = yes, None
    while not isinstance(step := next_question(tool, args, confirmed, resolution), Ready):
        resolution = None
        if isinstance(step, list):
            fail(f"invalid arguments for {tool.name!r}: " + "; ".join(step) + " (nothing ran)", EXIT_USAGE)
        if isinstance(step, Resolve):
            resolution = resolve_paths(tool, step.arguments)
        elif step.key == "confirm":
            _confirm(tool, step.message)
            confirmed = True
        elif sys.stdin.isatty():
            args = _answers(tool, args, step.fields)
        else:
            fail(f"{tool.name!r} needs {step.purpose} from the user, and stdin is not a terminal to ask on; "
                 "pass them with --arg (nothing ran)", EXIT_USAGE)
    return step.arguments


def _confirm(tool: Any, question: str) -> None:
    """Ask the tool's confirmation on the terminal; anything but y or yes declines."""
    if not sys.stdin.isatty():
        fail(f"{tool.name!r} asks \"{question}\" before it runs; pass --yes to confirm (nothing ran)", EXIT_USAGE)
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        fail("declined; nothing ran", EXIT_TOOL_ERROR)


def _answers(tool: Any, known: dict[str, Any], fields: tuple[Any, ...]) -> dict[str, Any]:
    """`known` with an answer for each of the elicited `fields`, asked one by one on the terminal."""
    gathered = dict(known)
    for at, arg in enumerate(fields):
        later = {a.name for a in fields[at + 1:]}
        gathered[arg.name] = _ask(tool, arg, gathered, later)
    return gathered


def _ask(tool: Any, arg: Any, known: dict[str, Any], later: set[str]) -> Any:
    """Prompt for an elicited argument until the answer passes the call's own check
    (`arguments.argument_problems`, with the arguments asked for `later` not yet required)."""
    from mcpwrap.protocol.arguments import argument_problems

    schema = arg.schema
    while True:
        sys.stderr.write(_question(arg))
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            fail(f"no answer for {arg.name!r}; nothing ran", EXIT_USAGE)
        text = line.rstrip("\n")
        if not text and "default" in schema:
            return schema["default"]
        if schema.get("type") == "array" and not text.lstrip().startswith("["):   # a,b as the prompt offers it
            value: Any = [part.strip() for part in text.split(",") if part.strip()]
        else:
            try:
                value = _parsed(arg, text)
            except ValueError as exc:
                print(f"  {exc}; try again", file=sys.stderr)
                continue
        problems = argument_problems(tool, {**known, arg.name: value}, ignore_missing=later)
        if not problems:
            return value
        print(f"  {'; '.join(problems)}; try again", file=sys.stderr)


def _question(arg: Any) -> str:
    """The prompt for an elicited argument: its description, what it accepts, its default."""
    from mcpwrap.config.model import string_consts

    schema = arg.schema
    kind = schema.get("type", "any")
    items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
    titled: Any = schema.get("oneOf") if kind == "string" else items.get("anyOf")
    allowed = schema.get("enum") or items.get("enum") or (
        [f"{v['const']} ({v.get('title', v['const'])})" for v in titled] if string_consts(titled) else None)
    shown = "/".join(map(str, allowed)) if allowed else "true/false" if kind == "boolean" else kind
    several = " (several: a,b)" if kind == "array" else ""
    default = f", default {json_text(schema['default'])}" if "default" in schema else ""
    return f"{schema.get('description', arg.name)} [{shown}{several}{default}]: "


def _call_as_task(config: Any, tool: Any, args: dict[str, Any], no_wait: bool, state_dir: str | None,
                  secret_file: str | None, target: Path | None, as_json: bool,
                  ask: Callable[[dict[str, Any]], dict[str, Any]]) -> NoReturn:
    """Start the call as a durable task; print its id with `no_wait` (its questions wait for `mcpwrap
    tasks answer`), else wait for its outcome, answering its questions with `ask`, and print it as a call's."""
    store, task_id = start_task(config, tool, args, state_dir, secret_file)
    if no_wait:
        print(task_id)  # stdout-ok
        raise SystemExit(EXIT_OK)
    print(f"task {task_id} (mcpwrap tasks show|result|cancel {task_id})", file=sys.stderr)
    task_outcome(store, task_id, True, target, as_json, ask)


def _on_question(answers: list[str], yes: bool) -> Callable[[Any], Awaitable[Any]]:
    """The running command's questions: `_answer` (None: the rule's default, or the call ends)."""
    async def on_question(asked: Any) -> Any:
        import trio

        return await trio.to_thread.run_sync(_answer, asked.text, asked.prompt.strip(), asked.rule.answer,
                                             answers, yes, abandon_on_cancel=True)
    return on_question


def _task_question(answers: list[str], yes: bool) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A parked task's question (its elicitation/create request) answered as a running command's
    (`_answer`), else with the form's default; without one it is declined and the task ends quoting it."""
    def ask(request: dict[str, Any]) -> dict[str, Any]:
        from mcpwrap.protocol.answers import FIELD

        params = request["params"]
        schema = params["requestedSchema"]["properties"][FIELD]
        value = _answer(params["message"], "", schema, answers, yes)
        value = schema.get("default") if value is None else value
        return {"action": "decline"} if value is None else {"action": "accept", "content": {FIELD: value}}
    return ask


def _answer(text: str, prompt: str, schema: dict[str, Any], answers: list[str], yes: bool) -> Any:
    """A question's answer: the next `--answer`, yes to a yes/no one with `--yes`, else asked on the
    terminal; None without one."""
    from mcpwrap.protocol.answers import typed

    kind = schema.get("type")
    if answers:
        return typed(kind, answers.pop(0))
    if yes and kind == "boolean":
        return True
    if not sys.stdin.isatty():
        return None
    return _ask_running(text, prompt, schema)


def _ask_running(text: str, prompt: str, schema: dict[str, Any]) -> Any:
    """Ask a question on the terminal until the answer fits its form; None at end of input."""
    from mcpwrap.protocol.answers import typed
    from mcpwrap.protocol.arguments import value_problems

    choices = "y/n" if schema["type"] == "boolean" else "/".join(schema.get("enum", ())) or schema["type"]
    while True:
        sys.stderr.write(f"{text}\n[{prompt + ' ' if prompt else ''}{choices}]: ")
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            return None
        value = typed(schema["type"], line.rstrip("\n"))
        problems = value_problems(schema, value)
        if not problems:
            return value
        print(f"  {'; '.join(problems)}; try again", file=sys.stderr)


def _run_call(tool: Any, args: dict[str, Any], spool: Any, read_command: Callable[[str], str],
              target: Path | None, as_json: bool, on_question: Callable[[Any], Awaitable[Any]]) -> NoReturn:
    """Run the command here, its stderr (or progress) on ours, and print its result; exit 1 on a tool error.
    Output beyond max_output is kept in `spool`, as `serve` keeps it, and stderr says the `mcpwrap read`
    that reads it (`read_command` of its URI)."""
    import trio

    from mcpwrap.result import ResourceLink
    from mcpwrap.run import process

    progress = ProgressLine(tool.name) if sys.stderr.isatty() and tool.progress else None
    try:
        result = trio.run(lambda: process.run(
            tool, args, on_stderr=progress.line if progress else lambda line: print(line, file=sys.stderr),
            on_progress=progress.update if progress else None, spool=spool, on_question=on_question))
    except process.ArgumentError as exc:
        fail(f"{exc} (nothing ran)", EXIT_USAGE)
    if progress:
        progress.clear()
    for link in result.content:
        if isinstance(link, ResourceLink):
            note(f"the whole {link.uri.rpartition('/')[2]} is kept for {spool.ttl_s:g}s: "
                 + read_command(link.uri))
    if as_json:
        print_json(result.to_json())
    else:
        print_text(_streamed_text(result))
        write_binary(result, target)
    raise SystemExit(EXIT_TOOL_ERROR if result.is_error else EXIT_OK)


def _streamed_text(result: Any) -> str:
    """A failed command's text without its stderr tail, which `call` has already copied to stderr."""
    tail = result.stderr_tail.strip()
    body, _, status = result.text.rpartition("\n")
    if not (result.is_error and tail and body.endswith(tail)):
        return result.text
    return "\n".join(p for p in (body[:-len(tail)].rstrip("\n"), status) if p)
