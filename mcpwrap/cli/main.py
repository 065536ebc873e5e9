"""The CLI: resolves paths and options, calls plain functions, maps errors to exit codes.

Every command and option is declared once, in COMMANDS; `main` parses argv and
writes --help from it, and `build_app` turns it into a typer app for shell
completion only. Start-up time is the product (an MCP host starts `serve` for
every session, and a shell user waits on `call`), so nothing heavy is imported
at the top: not typer (with pydantic), not jsonschema, not platformdirs.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn, Optional

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_CONFIG, EXIT_PENDING = 0, 1, 2, 3, 4


def _colour(text: str, code: str) -> str:
    """ANSI colour on a terminal only, and never when NO_COLOR is set."""
    if os.environ.get("NO_COLOR") or not sys.stderr.isatty():
        return text
    return f"\033[{code}m{text}\033[0m"


def _fail(message: str, code: int) -> NoReturn:
    print(f"{_colour('mcpwrap:', '1;31')} {message}", file=sys.stderr)
    raise SystemExit(code)


class _ProgressLine:
    """One self-rewriting progress line on a terminal's stderr."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def update(self, progress: float, total: float | None, message: str | None) -> None:
        share = f" {progress / total:.0%}" if total else ""
        sys.stderr.write(f"\r\033[K{_colour(self.tool, '1')} {progress:g}{f'/{total:g}' if total else ''}{share}")
        sys.stderr.flush()

    def line(self, text: str) -> None:
        """stderr lines that are not progress still reach the user, above the progress line."""
        sys.stderr.write(f"\r\033[K{text}\n")

    def clear(self) -> None:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()


def _load(file: Path, validated_dir: Path | None = None) -> Any:
    """Load a tools file, remembering in `validated_dir` (default: the state dir's) files whose
    schemas passed, by digest and version: the same bytes are not checked again (jsonschema is
    the largest import there is). `serve --state-dir` passes its own."""
    from mcpwrap import __version__
    from mcpwrap.config import load as config
    from mcpwrap.state.durable import create_private, make_private_dir

    cache = validated_dir or _state_path(None) / "validated"

    def marker(digest: str) -> Path:
        return cache / f"{digest}-{__version__}"

    try:
        loaded = config.load(file, lambda digest: marker(digest).exists())
        try:
            make_private_dir(cache, parents=True)   # the state dir is the task store's too: 0700 from the start
            os.close(create_private(marker(loaded.digest)))
        except OSError:
            pass                           # only a cache: a read-only state dir costs start-up time, nothing else
        return loaded
    except config.ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def _loads_inline(text: str) -> Any:
    """The config of `--tool` options; a problem is shown with the TOML it was read from."""
    from mcpwrap.config import load as config

    try:
        return config.loads(text.encode(), INLINE_TOOLS)
    except config.ConfigError as exc:
        print(f"mcpwrap: the --tool options, as a tools file:\n{text}", file=sys.stderr)
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def _print_json(doc: Any) -> None:
    import orjson

    sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")


def _print_text(text: str) -> None:
    """A tool's text as `call` prints it: as is, with a final newline."""
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")  # stdout-ok


def _no_task(store: Any, task_id: str, reason: str) -> NoReturn:
    _fail(f"no task {task_id!r} in {store.root} ({reason.lower()})", EXIT_USAGE)


def _assignment(option: str, text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        _fail(f"{option} {text!r} must look like NAME=VALUE", EXIT_USAGE)
    return name, value


def _task_record(store: Any, task_id: str) -> Any:
    from mcpwrap.protocol.tasking import TaskLookupError

    try:
        return store.get(task_id)
    except TaskLookupError as exc:
        _no_task(store, task_id, exc.reason)


def _task_outcome(store: Any, task_id: str, wait: bool, output: Path | None, as_json: bool) -> NoReturn:
    """Print a task's outcome as `call` prints a result (waiting for it with `wait`), and exit:
    0 completed, 1 failed, cancelled or a tool error, 4 still running."""
    import time

    from mcpwrap.protocol.tasking import stored_result
    from mcpwrap.tasks import store as tasks

    record = _task_record(store, task_id)
    progress = _ProgressLine(record.tool) if wait and sys.stderr.isatty() else None
    while wait and not record.terminal:
        time.sleep(tasks.RESULT_POLL_S)
        record = _task_record(store, task_id)
        if progress and record.progress:
            progress.update(record.progress["progress"], record.progress.get("total"), None)
    if progress:
        progress.clear()
    if not record.terminal:
        _fail(f"task {task_id} is still {record.status}; use --wait to wait for it", EXIT_PENDING)
    if as_json:
        _print_json(record.result if record.result is not None else {"status": record.status, "error": record.error})
    elif record.result is not None:
        result = stored_result(record)
        _print_text(result.text)
        _write_binary(result, output)
    else:
        print(f"mcpwrap: task {task_id} {record.status}: {record.status_message}", file=sys.stderr)
    raise SystemExit(EXIT_OK if record.status == "completed" and not record.is_error else EXIT_TOOL_ERROR)


def _start_task(config: Any, tool: Any, args: dict[str, Any], state_dir: str | None, secret_file: str | None) -> tuple[Any, str]:
    """Create a durable task as `serve` would for a client (signed record, detached supervisor)."""
    import time

    from mcpwrap.state import signing
    from mcpwrap.tasks import store as tasks
    from mcpwrap.tasks.supervisor import create_task

    if tool.task == "never":
        _fail(f"{tool.name!r} has task = \"never\": it cannot run as a task (drop --task)", EXIT_USAGE)
    store = tasks.Store.for_tools_file(Path(option_value(state_dir, "--state-dir", default_state_dir)), config.path)
    secret = Path(option_value(secret_file, "--secret-file", _default_secret_file))
    try:
        keyring = signing.ensure_secret(secret, time.time())
        record = create_task(store, config, tool, args, int(tool.task_ttl_s * 1000), keyring, secret,
                             _positive(None, "--max-tasks", tasks.MAX_RUNNING))
    except signing.SecretFileError as exc:
        _fail(str(exc), EXIT_CONFIG)
    except tasks.TooManyTasks as exc:
        _fail(str(exc), EXIT_TOOL_ERROR)
    return store, record.task_id


def _typed_arg(tool: Any, text: str) -> tuple[str, Any]:
    """`--arg NAME=VALUE`, VALUE typed by NAME's schema (see `_typed_value`)."""
    name, value = _assignment("--arg", text)
    return name, _typed_value(tool, name, value)


def _typed_value(tool: Any, name: str, value: str) -> Any:
    """A shell word as the argument's schema wants it (see `_parsed`); a usage error if it cannot be."""
    arg = next((a for a in tool.args if a.name == name), None)
    if arg is None:
        known = ", ".join(a.name for a in tool.args) or "none"
        _fail(f"{tool.name!r} has no argument {name!r} (its arguments: {known}; nothing ran)", EXIT_USAGE)
    try:
        return _parsed(arg, value)
    except ValueError as exc:
        _fail(f"--arg {name}={value!r}: {exc} (nothing ran)", EXIT_USAGE)


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
    from mcpwrap.run.arguments import argument_problems

    schema = arg.schema
    while True:
        sys.stderr.write(_question(arg))
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            _fail(f"no answer for {arg.name!r}; nothing ran", EXIT_USAGE)
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
    default = f", default {_json_text(schema['default'])}" if "default" in schema else ""
    return f"{schema.get('description', arg.name)} [{shown}{several}{default}]: "


def _json_text(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()


def _streamed_text(result: Any) -> str:
    """A failed command's text without its stderr tail, which `call` has already copied to stderr."""
    tail = result.stderr_tail.strip()
    body, _, status = result.text.rpartition("\n")
    if not (result.is_error and tail and body.endswith(tail)):
        return result.text
    return "\n".join(p for p in (body[:-len(tail)].rstrip("\n"), status) if p)


def _binary_blocks(result: Any) -> list[tuple[str, bytes]]:
    """(MIME type, bytes) of each image, audio or binary-resource block, in order."""
    import base64

    from mcpwrap.result import Media, Resource

    blocks = []
    for block in result.content:
        if isinstance(block, Media):
            blocks.append((block.mime_type, base64.b64decode(block.data)))
        elif isinstance(block, Resource) and block.blob is not None:
            blocks.append((block.mime_type or "application/octet-stream", base64.b64decode(block.blob)))
    return blocks


def _write_binary(result: Any, output: Path | None) -> None:
    """Write binary content to files, never to stdout, and say on stderr where each went (or that none came).

    The first block goes to `output`, the n-th to `output` with "-n" before its suffix; without
    `output`, each goes to a new temporary file (0600, as mkstemp makes it) named after its type.
    """
    from mcpwrap.state.durable import write_private

    blocks = _binary_blocks(result)
    if output is not None and not blocks:
        print(f"mcpwrap: no binary content; nothing written to {output}", file=sys.stderr)
    for n, (mime, data) in enumerate(blocks, start=1):
        if output is None:
            import mimetypes      # here: a text-only call should not pay for them
            import tempfile

            fd, name = tempfile.mkstemp(prefix="mcpwrap-", suffix=mimetypes.guess_extension(mime) or ".bin")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            target = Path(name)
        else:
            target = output if n == 1 else output.with_name(f"{output.stem}-{n}{output.suffix}")
            try:
                write_private(target, data)
            except OSError as exc:
                _fail(f"cannot write {mime} to {target}: {exc.strerror}", EXIT_USAGE)
        print(f"wrote {mime}, {len(data)} bytes, to {target}", file=sys.stderr)


def _missing_programs(config: Any) -> list[str]:
    """What is wrong with each command whose program is not found as `runner` would look for it:
    on the PATH of the tool's environment, or relative to its cwd when it holds a slash."""
    import shutil

    missing = []
    for tool in config.tools:
        if tool.command is None:
            continue
        program = str(tool.command[0])                # config keeps the program a string
        if "/" in program:
            where = tool.cwd / program
            if not (where.is_file() and os.access(where, os.X_OK)):
                missing.append(f"tool {tool.name!r}: program {program!r} is not an executable file (in {tool.cwd})")
        elif shutil.which(program, path={**os.environ, **tool.env}.get("PATH", os.defpath)) is None:
            missing.append(f"tool {tool.name!r}: program {program!r} is not on PATH (an MCP host may start "
                           "`serve` with a shorter one: see `client-config --pin-path`)")
    return missing


def _check_secret(config: Any, secret_file: str | None) -> None:
    """Refuse what `serve` would: a secret file that exists but is unusable, when a tool needs it
    (a question to sign, or a task record to MAC). A missing one `serve` creates."""
    import time

    needs = [t.name for t in config.tools if t.confirm or t.task != "never" or any(a.elicit for a in t.args)]
    path = Path(option_value(secret_file, "--secret-file", _default_secret_file)) if needs else None
    if path is None or not os.path.lexists(path):
        return
    from mcpwrap.state import signing

    try:
        signing.load_secret(path, time.time())
    except signing.SecretFileError as exc:
        _fail(f"`serve` would refuse the secret file that {', '.join(map(repr, needs))} need: {exc}", EXIT_CONFIG)


def _self_command() -> tuple[str, list[str]]:
    """An absolute command that starts this mcpwrap, for client configs."""
    import shutil

    found = shutil.which("mcpwrap")
    if found:
        return str(Path(found).absolute()), []
    return sys.executable, ["-m", "mcpwrap"]


# --- the commands: plain functions, called with the parsed values by name ---------------------
def _serve(file: str | None, tool: list[str], state_dir: str | None, secret_file: str | None, log_level: str | None,
           max_calls: str | None, max_tasks: str | None, watch: bool, read_only: bool, only: list[str],
           exclude: list[str], http: str | None, token_file: str | None, allowed_origin: list[str],
           insecure_no_auth: bool, rate: str | None, certfile: str | None, keyfile: str | None,
           body_timeout: str | None, send_timeout: str | None) -> NoReturn:
    from mcpwrap.config.model import Toolset

    def names(values: list[str]) -> frozenset[str]:
        return frozenset(n.strip() for v in values for n in v.split(",") if n.strip())

    remote = None
    if http is None and (token_file or allowed_origin or insecure_no_auth or rate or certfile or keyfile
                         or body_timeout or send_timeout):
        _usage_error(("serve",), "--token-file, --allowed-origin, --insecure-no-auth, --rate, --certfile, "
                                 "--keyfile, --body-timeout and --send-timeout apply only with --http")
    if http is not None:
        from mcpwrap.serve import http as http_module
        try:
            remote = http_module.http_options(http, token_file, allowed_origin, insecure_no_auth, rate, certfile, keyfile,
                                              body_timeout, send_timeout)
        except ValueError as exc:
            _usage_error(("serve",), str(exc))
    raise SystemExit(serve_command(Path(file) if file else None, state_dir, secret_file, log_level, watch,
                                   max_calls, max_tasks, tool, Toolset(read_only, names(only), names(exclude)), remote))


def _init(file: str, force: bool, from_help: str | None) -> None:
    from importlib.resources import files

    from mcpwrap.state.durable import write_private

    path = Path(file)
    if path.exists() and not force:
        _fail(f"{path} already exists; use --force to overwrite it", EXIT_USAGE)
    if from_help is None:
        write_private(path, files("mcpwrap.config").joinpath("starter.toml").read_bytes())
        print(f"wrote {path}; next: mcpwrap check {path} && mcpwrap call {path} greet --arg name=you")  # stdout-ok
        return
    text = draft_from_help(from_help)
    config = _loads_draft(text, path)
    write_private(path, text.encode())
    print(f"wrote {path}: {len(config.tools)} tool(s) drafted from `{from_help} --help` (check: ok); "  # stdout-ok
          f"read it and keep what a model may run, then: mcpwrap list {path}")


# `init --from-help`: GNU-style help lines. An option: "  -x, --name[=VALUE]  text"; a subcommand
# (git's form): "   name     text". Good enough to draft; the author edits what it drafts.
HELP_OPTION = r"^\s{1,12}(?:-[A-Za-z0-9?],\s+)?--([A-Za-z0-9][A-Za-z0-9-]*)(\[?=[<A-Za-z][\w<>.-]*\]?| <[\w-]+>)?(?:,\s*--[\w-]+)*\s{2,}(\S.*)$"
HELP_SUBCOMMAND = r"^\s{2,4}([a-z][a-z0-9-]*)\s{2,}([A-Z]\S.*)$"
HELP_NUMBERS = {"N", "NUM", "NUMBER", "COUNT", "LEVEL"}


def draft_from_help(program: str) -> str:
    """A tools file drafted from `PROGRAM --help`: a tool per subcommand (operands only), or one tool
    whose arguments are the program's long options (a flag, or a value attached with "=")."""
    import re
    import subprocess

    import orjson

    try:
        done = subprocess.run([program, "--help"], capture_output=True, text=True, errors="replace", timeout=30,
                              stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C", "PAGER": "cat", "MANPAGER": "cat"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        _fail(f"cannot run `{program} --help`: {exc}", EXIT_USAGE)
    lines = (done.stdout or done.stderr).splitlines()
    quoted = lambda text: orjson.dumps(text).decode()   # noqa: E731  (a JSON string is a TOML basic string)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(program).name)
    head = [f"# Drafted by `mcpwrap init --from-help {program}`: read every tool, keep what a model may run,",
            "# and give the arguments better descriptions. Operands may not start with \"-\" (see mcpwrap-tools(5)).",
            "[server]", f"name = {quoted(name)}", ""]
    subcommands = [m for m in (re.match(HELP_SUBCOMMAND, line) for line in lines) if m]
    if len(subcommands) >= 3 and re.search(r"command", " ".join(lines[:8]), re.I):   # "usage: git ... <command>"
        tools = [[f"[tools.{quoted(f'{name}_{m[1]}')}]", f"description = {quoted(m[2])}",
                  f"command = {orjson.dumps([program, m[1], '{operands}']).decode()}",
                  'args.operands = { type = "array", items = { type = "string" }, optional = true }', ""]
                 for m in {m[1]: m for m in subcommands}.values()]
        return "\n".join(head + [line for tool in tools for line in tool])
    args: dict[str, str] = {}
    elements = [program]
    for m in (re.match(HELP_OPTION, line) for line in lines):
        arg = m[1].replace("-", "_") if m else ""
        arg = "opt_" + arg if arg[:1].isdigit() or arg == "operands" else arg
        if not m or m[1] in ("help", "version", "usage") or arg in args or len(arg) > 64:
            continue
        if m[2] is None:
            args[arg] = f"{{ type = \"boolean\", flag = {quoted('--' + m[1])}, default = false, description = {quoted(m[3])} }}"
            elements.append("{" + arg + "}")
        else:
            kind = "integer" if m[2].strip("[]=<> ").upper() in HELP_NUMBERS else "string"
            args[arg] = f"{{ type = \"{kind}\", optional = true, description = {quoted(m[3])} }}"
            elements.append(f"--{m[1]}={{{arg}}}")
    elements += ["--", "{operands}"]
    description = next((line.strip() for line in lines[1:4] if line.strip() and not line.startswith(" ")), "")
    return "\n".join(head + [f"[tools.{quoted(name)}]", f"description = {quoted(description)}",
                              f"command = {orjson.dumps(elements).decode()}",
                              'args.operands = { type = "array", items = { type = "string" }, optional = true }',
                              *(f"args.{arg} = {spec}" for arg, spec in args.items()), ""])


def _loads_draft(text: str, path: Path) -> Any:
    """A draft is written only if it checks; otherwise its problems are shown and nothing is written."""
    from mcpwrap.config import load as config

    try:
        return config.loads(text.encode(), path)
    except config.ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        _fail(f"the draft does not check, so {path} was not written", EXIT_CONFIG)


def _check(file: str, strict: bool, secret_file: str | None) -> None:
    config = _load(Path(file))
    missing = _missing_programs(config)
    for problem in missing:
        print(f"{_colour('mcpwrap:', '1;33')} {'error' if strict else 'warning'}: {problem}", file=sys.stderr)
    _check_secret(config, secret_file)
    if missing and strict:
        raise SystemExit(EXIT_CONFIG)
    more = "".join(f", {len(items)} {kind}(s)" for kind, items in (("resource", config.resources),
                                                                    ("prompt", config.prompts)) if items)
    print(f"{file}: ok, {len(config.tools)} tool(s){more}")  # stdout-ok
    for tool in config.tools:
        for line in confinement_report(tool):
            print(line)  # stdout-ok


def confinement_report(tool: Any) -> list[str]:
    """A tool's effective sandbox, limits and environment policy, and what this kernel enforces of them."""
    from mcpwrap.run import landlock, limits

    def verdict(gaps: list[str], required: bool) -> list[str]:
        return [f"    NOT ENFORCED HERE: {gap}" for gap in gaps] + (
            [f"    so its calls {'are refused (required = true)' if required else 'run anyway (required = false)'}"]
            if gaps else [])

    lines = []
    if (sandbox := tool.sandbox) is not None:
        policy = landlock.Policy(read=sandbox.read, write=sandbox.write, network=sandbox.network)
        abi = landlock.abi()
        lines += [f"{tool.name}: sandbox: read {' '.join(sandbox.read)}",
                  f"    write {' '.join(sandbox.write) or '(nothing)'} and a private TMPDIR; "
                  f"network {'allowed' if sandbox.network else 'denied (TCP)'}",
                  *(f"    {line}" for line in (landlock.describe(policy, abi) if abi else [])),
                  *verdict(landlock.missing(policy, abi), sandbox.required)]
    if (limited := tool.limits) is not None:
        how = limits.available()
        set_ = [name for name in ("memory", "cpu", "processes", "open_files", "file_size")
                if getattr(limited, "cpu_s" if name == "cpu" else name) is not None]
        lines += [f"{tool.name}: limits: " + "; ".join(
                      limits.sentence(limited, name).removeprefix("exceeded ").replace(" limit ", " ")
                      + f" ({how.get(name, 'not enforceable here')})" for name in set_),
                  *verdict(limits.missing(limited), limited.required)]
    if tool.env_inherit is not True:
        passed = ", ".join(("PATH", *tool.env_inherit)) if tool.env_inherit else "PATH"
        lines.append(f"{tool.name}: environment: only {passed} of the server's, plus its env table")
    return lines


def _list(file: str, as_json: bool) -> None:
    config = _load(Path(file))
    if as_json:      # as `serve` lists them (tools with the inputSchema each gets)
        from mcpwrap.protocol.prompts import render_prompt
        from mcpwrap.protocol.resources import render_resource
        from mcpwrap.protocol.revisions import LATEST_LEGACY

        _print_json({"tools": [{"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                               for t in config.tools],
                     "resources": [render_resource(r, LATEST_LEGACY) for r in config.resources],
                     "prompts": [render_prompt(p, LATEST_LEGACY) for p in config.prompts]})
        return
    for tool in config.tools:
        print(f"{tool.name}  {tool.description}".rstrip())  # stdout-ok
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


def _print_args(args: Any) -> None:
    for arg in args:
        kind = arg.schema.get("type", "any")
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        extra = ("" if arg.required else f" (default {_json_text(arg.schema['default'])})"
                 if "default" in arg.schema else " (optional)")
        print(f"    {arg.name}: {kind}{extra}  {arg.schema.get('description', '')}".rstrip())  # stdout-ok


def _call(file: str, tool: str, arguments: str | None, arg: list[str], output: str | None, yes: bool,
          task: bool, no_wait: bool, state_dir: str | None, secret_file: str | None, as_json: bool) -> NoReturn:
    """Run one tool as `serve` runs it for a client: the same checks and questions (asked here, on
    the terminal), then the command, or a durable task with `--task`."""
    if no_wait and not task:
        _fail("--no-wait goes with --task", EXIT_USAGE)
    gc.disable()        # what the imports and the tools file create lives until exit: no collection pass
    try:                # over it can free anything, and frozen, none walks it later
        from mcpwrap.protocol import asking  # noqa: F401
        from mcpwrap.run import process as runner  # noqa: F401  (trio too: imported before the freeze)

        config = _load(Path(file))
    finally:
        gc.freeze()
        gc.enable()
    spec = config.tool(tool)
    if spec is None:
        _fail(f"no tool named {tool!r} in {file} (tools: {', '.join(t.name for t in config.tools)})", EXIT_USAGE)
    args = _settled(spec, _given_arguments(spec, arguments, arg), yes)
    target = Path(output) if output else None
    if task:
        _call_as_task(config, spec, args, no_wait, state_dir, secret_file, target, as_json)
    _run_call(spec, args, target, as_json)


def _given_arguments(tool: Any, json_text: str | None, assignments: list[str]) -> dict[str, Any]:
    """The JSON object given, then each `--arg NAME=VALUE` over it (typed by NAME's schema)."""
    import orjson

    try:
        args = orjson.loads(json_text) if json_text else {}
    except orjson.JSONDecodeError as exc:
        _fail(f"the JSON arguments do not parse: {exc}", EXIT_USAGE)
    if not isinstance(args, dict):
        _fail("the JSON arguments must be an object, like '{\"name\": \"value\"}'", EXIT_USAGE)
    args.update(_typed_arg(tool, a) for a in assignments)
    return args


def _settled(tool: Any, args: dict[str, Any], yes: bool) -> dict[str, Any]:
    """The arguments once the call needs nothing more. What is missing is decided as for a client
    (`protocol.asking.next_question`) and asked on the terminal: the elicited arguments, then the
    confirmation (`--yes` gives it). Exits 2 on refused arguments or when stdin is no terminal to
    ask on, 1 when the user declines."""
    from mcpwrap.protocol.asking import next_question

    confirmed = yes
    while (step := next_question(tool, args, confirmed)) is not None:
        if isinstance(step, list):
            _fail(f"invalid arguments for {tool.name!r}: " + "; ".join(step) + " (nothing ran)", EXIT_USAGE)
        if step.key == "confirm":
            _confirm(tool, step.message)
            confirmed = True
        elif sys.stdin.isatty():
            args = _answers(tool, args, step.fields)
        else:
            _fail(f"{tool.name!r} needs {step.purpose} from the user, and stdin is not a terminal to ask on; "
                  "pass them with --arg (nothing ran)", EXIT_USAGE)
    return args


def _confirm(tool: Any, question: str) -> None:
    """Ask the tool's confirmation on the terminal; anything but y or yes declines."""
    if not sys.stdin.isatty():
        _fail(f"{tool.name!r} asks \"{question}\" before it runs; pass --yes to confirm (nothing ran)", EXIT_USAGE)
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        _fail("declined; nothing ran", EXIT_TOOL_ERROR)


def _call_as_task(config: Any, tool: Any, args: dict[str, Any], no_wait: bool, state_dir: str | None,
                  secret_file: str | None, target: Path | None, as_json: bool) -> NoReturn:
    """Start the call as a durable task; print its id with `no_wait`, else wait for its outcome
    and print it as a call's."""
    store, task_id = _start_task(config, tool, args, state_dir, secret_file)
    if no_wait:
        print(task_id)  # stdout-ok
        raise SystemExit(EXIT_OK)
    print(f"task {task_id} (mcpwrap tasks show|result|cancel {task_id})", file=sys.stderr)
    _task_outcome(store, task_id, True, target, as_json)


def _run_call(tool: Any, args: dict[str, Any], target: Path | None, as_json: bool) -> NoReturn:
    """Run the command here, its stderr (or progress) on ours, and print its result; exit 1 on a tool error."""
    import trio

    from mcpwrap.run import process as runner

    progress = _ProgressLine(tool.name) if sys.stderr.isatty() and tool.progress else None
    try:
        result = trio.run(lambda: runner.run(
            tool, args, on_stderr=progress.line if progress else lambda line: print(line, file=sys.stderr),
            on_progress=progress.update if progress else None))
    except runner.ArgumentError as exc:
        _fail(f"{exc} (nothing ran)", EXIT_USAGE)
    if progress:
        progress.clear()
    if as_json:
        _print_json(result.to_json())
    else:
        _print_text(_streamed_text(result))
        _write_binary(result, target)
    raise SystemExit(EXIT_TOOL_ERROR if result.is_error else EXIT_OK)


def _read(file: str, uri: str, output: str | None, state_dir: str | None, as_json: bool) -> NoReturn:
    """Read a resource as `serve` would; an output URI gives its whole stream (from `offset`, or
    `length` bytes of it). Text goes to stdout, binary contents to files as `call` writes them."""
    import trio

    from mcpwrap.protocol import resources
    from mcpwrap.protocol.revisions import LATEST_LEGACY
    from mcpwrap.protocol.tools import ProtocolError
    from mcpwrap.result import ToolResult
    from mcpwrap.serve import effects as sources

    config = _load(Path(file))
    spool = _spool(config, state_dir)
    try:
        target = resources.resolve(config, uri, LATEST_LEGACY)
        outcome = (_output_stream(spool, target, uri) if isinstance(target, resources.OutputPage)
                   else trio.run(sources.read, target, spool))
    except ProtocolError as exc:
        _content_failed(exc)
    contents = outcome if isinstance(outcome, list) else []
    if as_json:
        _print_json({"contents": [resources.contents_json(c) for c in contents]})
        raise SystemExit(EXIT_OK)
    for item in contents:
        if item.text is not None:
            _print_text(item.text)
    _write_binary(ToolResult(tuple(c for c in contents if c.blob is not None)), Path(output) if output else None)
    raise SystemExit(EXIT_OK)


def _spool(config: Any, state_dir: str | None) -> Any:
    """The tools file's output spool, where `serve` keeps output beyond the cap."""
    from mcpwrap.run.spool import Spool

    return Spool.for_tools_file(_state_path(state_dir), config.path, config.spool.quota, config.spool.ttl_s)


def _output_stream(spool: Any, target: Any, uri: str) -> list[Any]:
    """A kept stream read whole (or the `length` the URI asks for), as one text or blob contents."""
    import base64
    import urllib.parse

    from mcpwrap.protocol.resources import not_found
    from mcpwrap.protocol.revisions import LATEST_LEGACY
    from mcpwrap.protocol.tools import ProtocolError
    from mcpwrap.result import Resource

    wanted = target.length if "length" in urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query) else None
    chunks, offset = [], target.offset
    while wanted is None or offset < target.offset + wanted:
        page = spool.read(target.call, target.stream, offset, target.length)
        if page is None:
            raise not_found(uri, LATEST_LEGACY)
        if page.offset > page.total:
            raise ProtocolError(-32602, f"offset {page.offset} is past the end ({page.total} bytes)", {"uri": uri})
        if not page.data:
            break
        chunks.append(page.data)
        offset += len(page.data)
    data = b"".join(chunks)[:wanted]
    try:
        return [Resource(uri, "text/plain", text=data.decode("utf-8"))]
    except UnicodeDecodeError:
        return [Resource(uri, "application/octet-stream", blob=base64.b64encode(data).decode())]


def _content_failed(exc: Any) -> NoReturn:
    """A protocol error of a read or prompt: the caller's mistake (2), or the command behind it failed (1)."""
    where = f" ({exc.data['uri']})" if isinstance(exc.data, dict) and "uri" in exc.data else ""
    _fail(f"{exc.message}{where}", EXIT_TOOL_ERROR if exc.code == -32603 else EXIT_USAGE)


def _prompt(file: str, name: str, arg: list[str], state_dir: str | None, as_json: bool) -> NoReturn:
    """Get a prompt as `serve` would and print its messages."""
    import trio

    from mcpwrap.protocol import prompts
    from mcpwrap.protocol.revisions import LATEST_LEGACY
    from mcpwrap.protocol.tools import ProtocolError
    from mcpwrap.result import Resource, Text
    from mcpwrap.serve import effects as sources

    config = _load(Path(file))
    if config.prompt(name) is None:
        _fail(f"no prompt named {name!r} in {file} (prompts: {', '.join(p.name for p in config.prompts) or 'none'})",
              EXIT_USAGE)
    try:
        prompt, arguments = prompts.parse_get(config, {"name": name, "arguments": dict(
            _assignment("--arg", a) for a in arg)})
        blocks = trio.run(sources.prompt_blocks, config, prompt, arguments, _spool(config, state_dir), LATEST_LEGACY)
    except ProtocolError as exc:
        _content_failed(exc)
    if as_json:
        _print_json(prompts.get_result(prompt, blocks, LATEST_LEGACY))
        raise SystemExit(EXIT_OK)
    for n, (role, block) in enumerate(blocks):     # a message is text, or a resource it embeds
        if isinstance(block, Resource):
            head = f"[{role}] {block.uri}"
            body = block.text if block.text is not None else f"({block.mime_type or 'binary'} contents: see --json)"
        else:
            assert isinstance(block, Text)
            head, body = f"[{role}]", block.text
        _print_text(("\n" if n else "") + f"{head}\n{body}")
    raise SystemExit(EXIT_OK)


def _schema() -> None:
    from importlib.resources import files

    sys.stdout.write(files("mcpwrap.config").joinpath("tools-file.schema.json").read_text())  # stdout-ok


CLIENT_LAYOUTS = ("claude-desktop", "claude-code", "cursor", "vscode")
CLIENT_NAMES = {"claude-desktop": "Claude Desktop", "claude-code": "Claude Code", "cursor": "Cursor", "vscode": "VS Code"}


REMOTE_TOKEN_ENV = "MCPWRAP_TOKEN"        # where clients that expand variables in headers find the token
VSCODE_TOKEN_INPUT = "mcpwrap-token"
HEADER_NAME = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"


def _client_config(file: str | None, client: str, name: str | None, env: list[str], pin_path: bool, url: str | None,
                   header: list[str], token_file: str | None) -> None:
    if client not in CLIENT_LAYOUTS:
        _fail(f"--client must be one of {', '.join(CLIENT_LAYOUTS)} (got {client!r})", EXIT_USAGE)
    pinned = dict(_assignment("--env", text) for text in env)
    if pin_path:
        pinned["PATH"] = os.environ.get("PATH", os.defpath)
    if url is not None and file is None:
        _print_json(_remote_config(client, name or "mcpwrap", url, header, token_file, pinned))
        return
    if file is None or url is not None:
        _usage_error(("client-config",), "Give a tools FILE (a server the client starts) or --url (a remote one), "
                                         "not both.")
    if header or token_file:
        _usage_error(("client-config",), "--header and --token-file go with --url (a served FILE needs no header)")
    path = Path(file)
    _load(path)
    command, args = _self_command()
    entry: dict[str, Any] = {"command": command, "args": [*args, "serve", str(path.resolve())]}
    if pinned:
        entry["env"] = pinned
    key = name or path.stem
    stdio = {"type": "stdio", **entry}
    _print_json({"claude-desktop": {"mcpServers": {key: entry}}, "cursor": {"mcpServers": {key: entry}},
                 "claude-code": {"mcpServers": {key: stdio}}, "vscode": {"servers": {key: stdio}}}[client])


def _remote_config(client: str, key: str, url: str, header: list[str], token_file: str | None,
                   pinned: dict[str, str]) -> dict[str, Any]:
    """A client's entry for `serve --http` elsewhere: its own Streamable HTTP where it has one, else a bridge.

    A token read from --token-file is never printed where a client can read it from the environment or
    prompt for it; where it cannot (Claude Desktop's bridge), it is, and stderr says so.
    """
    import re
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        _usage_error(("client-config",), f"--url wants http(s)://HOST[:PORT]/mcp, got {url!r}")
    headers: dict[str, str] = {}
    for text in header:
        field, colon, value = text.partition(":")
        if not colon or not re.fullmatch(HEADER_NAME, field.strip()) or "\r" in value or "\n" in value:
            _usage_error(("client-config",), f"--header wants 'Name: value', got {text!r}")
        headers[field.strip()] = value.strip()
    token = None
    if token_file is not None:
        if any(field.lower() == "authorization" for field in headers):
            _usage_error(("client-config",), "--token-file writes the Authorization header: give it or a "
                                             "--header 'Authorization: ...', not both")
        token_file = str(Path(token_file).resolve())     # the notes name it wherever they are read
        token = _client_token(Path(token_file))
    if parts.scheme == "http" and parts.hostname not in ("localhost", "127.0.0.1", "::1") and (headers or token):
        _note(f"{url} is plain HTTP: the header crosses the network readable; serve with --certfile/--keyfile "
              "or behind a TLS proxy, and give an https:// URL")
    if client == "claude-desktop":
        return {"mcpServers": {key: _desktop_bridge(url, headers, token, token_file, pinned)}}
    if pinned:
        _usage_error(("client-config",), f"--env and --pin-path set the environment of a server the client starts; "
                                         f"{client} connects to --url itself")
    if token is not None:
        variable = {"claude-code": f"${{{REMOTE_TOKEN_ENV}}}", "cursor": f"${{env:{REMOTE_TOKEN_ENV}}}",
                    "vscode": f"${{input:{VSCODE_TOKEN_INPUT}}}"}[client]
        headers["Authorization"] = f"Bearer {variable}"
        if client == "vscode":
            _note(f"VS Code asks for the token the first time it connects and keeps it in its secret storage: "
                  f"paste the last token line of {token_file}")
        else:
            _note(f"the token is not written here: {CLIENT_NAMES[client]} reads it from {REMOTE_TOKEN_ENV} when it "
                  f"starts, e.g. export {REMOTE_TOKEN_ENV}=\"$(grep -v -e '^#' -e '^$' {token_file} | tail -n 1)\"")
    entry: dict[str, Any] = {"type": "http", "url": url} if client != "cursor" else {"url": url}
    if headers:
        entry["headers"] = headers
    if client == "vscode":
        inputs = [{"type": "promptString", "id": VSCODE_TOKEN_INPUT, "password": True,
                   "description": f"Bearer token for {key} (from {token_file})"}] if token is not None else []
        return {"servers": {key: entry}, **({"inputs": inputs} if inputs else {})}
    return {"mcpServers": {key: entry}}


def _desktop_bridge(url: str, headers: dict[str, str], token: str | None, token_file: str | None,
                    pinned: dict[str, str]) -> dict[str, Any]:
    """Claude Desktop starts only stdio servers from its config file: the documented mcp-remote bridge relays.

    Each header travels in an environment variable, `--header Name:${VAR}`, as mcp-remote documents (a
    space inside an argument is split on some systems).
    """
    import re
    import shutil

    if token is not None:
        headers = {**headers, "Authorization": f"Bearer {token}"}
    variables = {field: "MCPWRAP_HEADER_" + re.sub(r"[^A-Z0-9]", "_", field.upper()) for field in headers}
    args = ["-y", "mcp-remote", url]
    for field, variable in variables.items():
        args += ["--header", f"{field}:${{{variable}}}"]
    environment = {**pinned, **{variables[field]: value for field, value in headers.items()}}
    npx = shutil.which("npx")
    _note("Claude Desktop does not connect to a remote server with a header from claude_desktop_config.json (its "
          "Settings > Connectors take a URL with OAuth or no auth): this entry starts the mcp-remote bridge "
          "(npx, Node.js 18 or later)" + ("" if npx else "; npx is not on PATH here, install Node.js"))
    if token is not None:
        _note(f"the token from {token_file} is written into this entry's env: keep claude_desktop_config.json "
              "private (chmod 600)")
    return {"command": str(Path(npx).absolute()) if npx else "npx", "args": args,
            **({"env": environment} if environment else {})}


def _client_token(path: Path) -> str:
    """The newest (last) token of a token file, held to the server's rules: the user's own, mode 0600."""
    from mcpwrap.serve import http
    from mcpwrap.state import signing

    try:
        return http.TokenFile(path).current()[-1].decode()
    except (OSError, signing.SecretFileError) as exc:
        _fail(f"--token-file: {exc}", EXIT_CONFIG)


def _note(text: str) -> None:
    print(f"mcpwrap: {text}", file=sys.stderr)


def _secret_path(secret_file: str | None) -> None:
    print(option_value(secret_file, "--secret-file", _default_secret_file))  # stdout-ok


def _secret_init(secret_file: str | None) -> None:
    import time

    from mcpwrap.state import signing

    path = Path(option_value(secret_file, "--secret-file", _default_secret_file))
    try:
        _, created = signing.init_secret(path, time.time())
    except signing.SecretFileError as exc:
        _fail(str(exc), EXIT_CONFIG)
    print(f"{'created' if created else 'ok, already present:'} {path}")  # stdout-ok


def _secret_rotate(secret_file: str | None) -> None:
    import time

    from mcpwrap.state import signing

    path = Path(option_value(secret_file, "--secret-file", _default_secret_file))
    try:
        signing.rotate_secret(path, time.time())
    except signing.SecretFileError as exc:
        _fail(str(exc), EXIT_CONFIG)
    print(f"rotated {path}; the previous key verifies for {signing.ROTATION_GRACE_S / 3600:g} more hours")  # stdout-ok


def _state_path(state_dir: str | None) -> Path:
    return Path(option_value(state_dir, "--state-dir", default_state_dir))


def _task_store(file: str, state_dir: str | None) -> Any:
    from mcpwrap.tasks import store as tasks

    return tasks.Store.for_tools_file(_state_path(state_dir), Path(file))


def _find_task(where: str, task_id: str | None, state_dir: str | None) -> tuple[Any, str]:
    """The store holding the task and its id: FILE's store, or the one store under the state dir that has it."""
    from mcpwrap.protocol.tasking import valid_id
    from mcpwrap.tasks import store as tasks

    if task_id is not None:
        return _task_store(where, state_dir), task_id
    state = _state_path(state_dir)
    if not valid_id(where):
        _fail(f"{where!r} is not a task id (ids are 22 or 23 characters of A-Z a-z 0-9 _ -); "
              "to name a tools file, give the id after it", EXIT_USAGE)
    stores = [tasks.Store(d / "tasks") for d in sorted(state.iterdir())] if state.is_dir() else []
    found = next((s for s in stores if s.path(where).exists()), None)
    if found is None:
        _fail(f"no task {where!r} in any store under {state}", EXIT_USAGE)
    return found, where


def _tasks_list(file: str, state_dir: str | None, as_json: bool) -> None:
    from mcpwrap.tasks import store as tasks

    records = sorted(_task_store(file, state_dir).records(), key=lambda r: (r.created_at, r.task_id))
    if as_json:
        _print_json([tasks.public_json(r) for r in records])
        return
    if not records:
        print("no tasks")  # stdout-ok
        return
    rows = [["ID", "STATUS", "TOOL", "CREATED", "UPDATED", "MESSAGE"]] + [
        [r.task_id, tasks.display_status(r), r.tool, tasks.local_time(r.created_at),
         tasks.local_time(r.updated_at), r.status_message or ""] for r in records]
    print(tasks.table(rows))  # stdout-ok


def _tasks_show(where: str, task_id: str | None, state_dir: str | None, as_json: bool) -> None:
    from mcpwrap.tasks import store as tasks

    store, task_id = _find_task(where, task_id, state_dir)
    record = _task_record(store, task_id)
    if as_json:
        _print_json(tasks.public_json(record))
    else:
        print(tasks.describe(record, store))  # stdout-ok


def _tasks_result(where: str, task_id: str | None, state_dir: str | None, wait: bool, output: str | None,
                  as_json: bool) -> NoReturn:
    store, task_id = _find_task(where, task_id, state_dir)
    _task_outcome(store, task_id, wait, Path(output) if output else None, as_json)


def _tasks_cancel(where: str, task_id: str | None, state_dir: str | None, as_json: bool) -> None:
    from mcpwrap.protocol.tasking import TaskLookupError, TaskTerminalError
    from mcpwrap.tasks import store as tasks

    store, task_id = _find_task(where, task_id, state_dir)
    try:
        record = store.cancel(task_id)
    except TaskLookupError as exc:
        _no_task(store, task_id, exc.reason)
    except TaskTerminalError as exc:
        _fail(f"task {task_id} is already {tasks.display_status(exc.record)}", EXIT_TOOL_ERROR)
    if as_json:
        _print_json(tasks.public_json(record))
    else:
        print(f"cancelled {task_id}")  # stdout-ok


def _tasks_gc(file: str, state_dir: str | None, as_json: bool) -> None:
    store = _task_store(file, state_dir)
    removed = store.gc()
    if as_json:
        _print_json({"removed": removed, "store": str(store.root)})
    else:
        print(f"removed {removed} expired task(s) from {store.root}")  # stdout-ok


# --- the command line, declared once: parsed here, and built into a typer app for completion -----
REQUIRED: Any = ...


class Param(NamedTuple):
    """A positional (no flags) or an option; an option without a metavar is a flag. (The declarations
    are NamedTuples: a dataclass costs ~0.3 ms more to create, on the way to serve's first answer.)"""
    dest: str
    help: str
    flags: tuple[str, ...] = ()
    metavar: str = ""
    default: Any = None
    many: bool = False                 # repeatable: values collect in a list
    off: str = ""                      # the flag's negative form ("--no-watch"); the flag then defaults on
    hidden: bool = False


class Command(NamedTuple):
    """One command: its help, the function it runs and its parameters."""
    help: str
    run: Callable[..., Any]
    params: tuple[Param, ...] = ()
    loose: bool = False                # an unknown "-word" is a positional (old task ids start with "-")


def _file(help: str = "The tools file (TOML).") -> Param:
    return Param("file", help, metavar="FILE", default=REQUIRED)


def _opt(dest: str, flags: str, help: str, metavar: str = "", **more: Any) -> Param:
    return Param(dest, help, tuple(flags.split()), metavar, **more)


STATE_DIR = _opt("state_dir", "--state-dir", "Where durable task records live; env MCPWRAP_STATE_DIR; default: the user state dir.", "DIR")
SECRET_FILE = _opt("secret_file", "--secret-file", "The shared secret file; env MCPWRAP_SECRET_FILE; default: the user config dir.", "PATH")
AS_JSON = _opt("as_json", "--json", "Print JSON instead of text.")
WHERE = (Param("where", "The tools file (optional: without it, every store under the state dir is searched), then "
               "the task id, as `mcpwrap tasks list FILE` shows it.", metavar="[FILE] TASK_ID", default=REQUIRED),
         Param("task_id", "", metavar="TASK_ID", hidden=True))
OUTPUT = _opt("output", "--output -o", "Write image/audio/binary content here (default: a temporary file named on stderr).", "PATH")

GROUPS = {(): "Serve a TOML file of shell commands as an MCP server on stdio.",
          ("secret",): "The shared secret that signs requestState (modern confirmations) and task records.",
          ("tasks",): "List, show, fetch, cancel and collect durable tasks. Exit status: 0 ok; 1 the task failed, "
                      "was cancelled or its tool reported an error; 2 usage or unknown task id; 4 the task is "
                      "still running (`result` without --wait)."}
COMMANDS: dict[tuple[str, ...], Command] = {
    ("serve",): Command("Run the MCP server on stdio: MCP messages on stdout, logs on stderr.", _serve, (
        Param("file", "The tools file (TOML); or, without it, --tool options.", metavar="[FILE]"),
        _opt("tool", "--tool", "A tool with no file: NAME=COMMAND, the command split as a shell would, with "
             "placeholders {arg}, {arg:integer} (or number, boolean), {arg?} for an optional one; repeatable.",
             "NAME=COMMAND", many=True),
        STATE_DIR, SECRET_FILE,
        _opt("log_level", "--log-level", "What mcpwrap itself logs on stderr: debug (also every message in and out, and tool stderr), info (default), warning, error; env MCPWRAP_LOG_LEVEL.", "LEVEL"),
        _opt("max_calls", "--max-calls", "Tool calls running at once (default 64); up to 16 times as many wait for a slot, more are refused; env MCPWRAP_MAX_CALLS.", "N"),
        _opt("max_tasks", "--max-tasks", "Durable tasks running at once (default 16); past it, task creation is refused; env MCPWRAP_MAX_TASKS.", "N"),
        _opt("watch", "--watch", "Reload the tools file when it changes (--no-watch: do not).", default=True, off="--no-watch"),
        _opt("read_only", "--read-only", "Serve only the tools annotated readOnlyHint = true."),
        _opt("only", "--only", "Serve only these tools (comma-separated names; repeatable).", "NAME,...", many=True),
        _opt("exclude", "--exclude", "Do not serve these tools (comma-separated names; repeatable).", "NAME,...", many=True),
        _opt("http", "--http", "Serve Streamable HTTP on [HOST:]PORT (host default 127.0.0.1; port 0 picks one) at /mcp "
             "instead of stdio; needs the http extra.", "[HOST:]PORT"),
        _opt("token_file", "--token-file", "With --http: require a bearer token, one of this 0600 file's lines.", "PATH"),
        _opt("allowed_origin", "--allowed-origin", "With --http: a browser Origin that may call (e.g. https://app.example); "
             "repeatable; default: loopback origins only.", "ORIGIN", many=True),
        _opt("insecure_no_auth", "--insecure-no-auth", "With --http: allow a non-loopback address without --token-file "
             "(only behind a proxy that authenticates)."),
        _opt("rate", "--rate", "With --http: each client (a legacy session; else its bearer token, else its address) "
             "may send R requests a second, in bursts of B (default R, at least 10); past it, 429 with Retry-After. "
             "Default: no limit.", "R[/B]"),
        _opt("certfile", "--certfile", "With --http: serve HTTPS with this PEM certificate chain (with --keyfile); "
             "TLS does not replace --token-file.", "PATH"),
        _opt("keyfile", "--keyfile", "With --http: the PEM private key of --certfile.", "PATH"),
        _opt("body_timeout", "--body-timeout", "With --http: a request body must end, or bring 16 KiB more, within "
             "each such interval, else 408 and the connection is closed (default 30s).", "DURATION"),
        _opt("send_timeout", "--send-timeout", "With --http: a client that takes nothing of its response for this "
             "long (or leaves data unacknowledged) is cut off (default 60s).", "DURATION"))),
    ("init",): Command("Write a commented starter tools file that demonstrates each major feature.", _init, (
        Param("file", "Where to write the starter tools file.", metavar="[FILE]", default="tools.toml"),
        _opt("force", "--force", "Overwrite an existing file."),
        _opt("from_help", "--from-help", "Draft the file from PROGRAM --help instead: a tool per subcommand, or one "
             "whose arguments are its long options; written only if it checks.", "PROGRAM"))),
    ("check",): Command("Validate a tools file as `serve` would (problems are printed as FILE:LINE:COL: message), "
                        "look for each program on PATH, and check the secret file if a tool needs it.", _check, (
        _file(), _opt("strict", "--strict", "Make a program not found on PATH an error, not a warning."), SECRET_FILE)),
    ("list",): Command("List the tools, their arguments and the inputSchema each gets.", _list, (
        _file(), _opt("as_json", "--json", "Print tools and inputSchemas as JSON."))),
    ("call",): Command("Run one tool the way `serve` would; exit 1 when the result is an error.", _call, (
        _file(), Param("tool", "The tool to run.", metavar="TOOL", default=REQUIRED),
        Param("arguments", "Arguments as one JSON object.", metavar="[JSON]"),
        _opt("arg", "--arg -a", "The raw text for a string argument, JSON for any other type; repeatable.", "NAME=VALUE", many=True),
        OUTPUT,
        _opt("yes", "--yes -y", "Answer yes to the tool's confirmation (needed when stdin is not a terminal)."),
        _opt("task", "--task", "Run it as a durable task, as `serve` does for a client: the id goes to stderr, then the outcome as `tasks result --wait` prints it."),
        _opt("no_wait", "--no-wait", "With --task: print the task id on stdout and return at once."),
        STATE_DIR, SECRET_FILE, _opt("as_json", "--json", "Print the whole result as JSON."))),
    ("read",): Command("Read a resource the way `serve` would (a file, a command's output, or a call's output "
                       "beyond the cap, whole); exit 1 when its command failed, 2 when there is no such resource.", _read, (
        _file(), Param("uri", "The resource's URI, as `list` shows it (a template filled in).", metavar="URI",
                       default=REQUIRED),
        OUTPUT, STATE_DIR, _opt("as_json", "--json", "Print the contents as `resources/read` returns them."))),
    ("prompt",): Command("Get a prompt the way `serve` would and print its messages, each under its [role].", _prompt, (
        _file(), Param("name", "The prompt.", metavar="NAME", default=REQUIRED),
        _opt("arg", "--arg -a", "A prompt argument (prompt arguments are strings); repeatable.", "NAME=VALUE", many=True),
        STATE_DIR, _opt("as_json", "--json", "Print the messages as `prompts/get` returns them."))),
    ("schema",): Command("Print the JSON Schema of the tools-file format (for editors: taplo, Even Better TOML).", _schema),
    ("client-config",): Command("Print the JSON to paste into an MCP client's config: for this tools file, or for a "
                                "remote `serve --http` (--url).", _client_config, (
        Param("file", "The tools file (TOML); or, without it, --url.", metavar="[FILE]"),
        _opt("client", "--client -c", f"{', '.join(CLIENT_LAYOUTS[:-1])} or {CLIENT_LAYOUTS[-1]}.", "CLIENT", default="claude-desktop"),
        _opt("name", "--name", "The server's key in the config (default: the file's stem).", "NAME"),
        _opt("env", "--env -e", "Set this variable in the server's environment; repeatable.", "NAME=VALUE", many=True),
        _opt("pin_path", "--pin-path", "Set the server's PATH to this shell's (desktop hosts start servers with a minimal one)."),
        _opt("url", "--url", "A remote Streamable HTTP server (mcpwrap serve --http) instead of FILE; Claude Desktop "
             "gets the mcp-remote bridge.", "URL"),
        _opt("header", "--header -H", "With --url: send this header; repeatable.", "'NAME: VALUE'", many=True),
        _opt("token_file", "--token-file", "With --url: authenticate with the last token of this 0600 file, "
             "referenced as $MCPWRAP_TOKEN (Claude Code, Cursor) or a VS Code password prompt, not printed; "
             "Claude Desktop's bridge gets it written in (a note says so).", "PATH"))),
    ("secret", "path"): Command("Print where the secret file is (it may not exist yet).", _secret_path, (SECRET_FILE,)),
    ("secret", "init"): Command("Create the secret file (0600) if it does not exist; check it if it does.", _secret_init, (SECRET_FILE,)),
    ("secret", "rotate"): Command("Make a new key; the previous one still verifies for 24 hours.", _secret_rotate, (SECRET_FILE,)),
    ("tasks", "list"): Command("List the tasks of FILE, oldest first.", _tasks_list, (_file(), STATE_DIR, AS_JSON)),
    ("tasks", "show"): Command("Show one task: status, arguments, progress, supervisor, outcome.", _tasks_show,
                               (*WHERE, STATE_DIR, AS_JSON), loose=True),
    ("tasks", "result"): Command("Print a finished task's output like `mcpwrap call` does; exit 1 when it failed.", _tasks_result, (
        *WHERE, STATE_DIR, _opt("wait", "--wait", "Wait until the task has finished."), OUTPUT, AS_JSON), loose=True),
    ("tasks", "cancel"): Command("Cancel a running task (its command's process group is killed); exit 1 if it had finished.",
                                 _tasks_cancel, (*WHERE, STATE_DIR, AS_JSON), loose=True),
    ("tasks", "gc"): Command("Remove expired tasks (their ttl has passed) and stale leftovers.", _tasks_gc, (_file(), STATE_DIR, AS_JSON)),
}
TOP_OPTIONS = (("--version", "Print the version and exit."),
               ("--install-completion", "Install completion for the current shell."),
               ("--show-completion", "Show completion for the current shell, to copy it or customize it."),
               ("--help", "Show this message and exit."))


class UsageError(Exception):
    """A command line that does not fit the declaration; exit status 2, with the usage line."""


def parse(command: Command, words: list[str]) -> dict[str, Any]:
    """The values of `command`'s parameters, by dest, from its words."""
    values = {p.dest: [] if p.many else p.default for p in command.params}
    options = {flag: p for p in command.params for flag in (*p.flags, *([p.off] if p.off else []))}
    positionals = [p for p in command.params if not p.flags]
    free: list[str] = []
    rest = iter(words)
    for word in rest:
        if word == "--":
            free += rest
            break
        if not word.startswith("-") or word == "-":
            free.append(word)
            continue
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        param = options.get(name)
        if (param is None and not command.loose and not word.startswith("--")
                and options.get(word[:2], Param("", "")).metavar):
            param, name, eq, inline = options[word[:2]], word[:2], "=", word[2:]     # -oFILE (not for ids)
        if param is None:
            if command.loose:
                free.append(word)
                continue
            raise UsageError(f"No such option: {name}")
        if not param.metavar:
            if eq:
                raise UsageError(f"Option '{name}' does not take a value.")
            values[param.dest] = name != param.off
            continue
        value = inline if eq else next(rest, None)
        if value is None:
            raise UsageError(f"Option '{name}' requires an argument.")
        if param.many:
            values[param.dest].append(value)
        else:
            values[param.dest] = value
    if len(free) > len(positionals):
        raise UsageError(f"Got unexpected extra argument ({free[len(positionals)]})")
    values.update((p.dest, word) for p, word in zip(positionals, free))
    missing = next((p for p in positionals[len(free):] if p.default is REQUIRED), None)
    if missing is not None:
        raise UsageError(f"Missing argument '{missing.metavar}'.")
    return values


def _usage(path: tuple[str, ...]) -> str:
    command = COMMANDS.get(path)
    if command is None:
        return f"mcpwrap {' '.join((*path, 'COMMAND'))} [ARGS]...".replace("  ", " ")
    shown = [p.metavar for p in command.params if not p.flags and not p.hidden]
    return " ".join(["mcpwrap", *path, *(["[OPTIONS]"] if any(p.flags for p in command.params) else []), *shown])


def _help(path: tuple[str, ...]) -> str:
    """The --help text, from the same declarations the parser reads."""
    import shutil
    import textwrap

    width = min(shutil.get_terminal_size().columns, 100)
    command = COMMANDS.get(path)
    rows: list[tuple[str, list[tuple[str, str]]]] = []
    if command is None:
        subcommands = [(name[-1], COMMANDS[name].help if name in COMMANDS else GROUPS[name])
                       for name in [*COMMANDS, *GROUPS] if len(name) == len(path) + 1 and name[:-1] == path]
        rows = [("Options", list(TOP_OPTIONS if not path else TOP_OPTIONS[-1:])), ("Commands", subcommands)]
        about = GROUPS[path]
    else:
        about = command.help
        rows = [("Arguments", [(p.metavar, p.help) for p in command.params if not p.flags and not p.hidden]),
                ("Options", [(", ".join(sorted(p.flags, key=len)) + (f" {p.metavar}" if p.metavar else "")
                              + (f" / {p.off}" if p.off else ""),
                              p.help + (f" [default: {p.default}]" if isinstance(p.default, str) else ""))
                             for p in command.params if p.flags] + [TOP_OPTIONS[-1]])]
    lines = [f"Usage: {_usage(path)}", "", *textwrap.wrap(about, width, initial_indent="  ", subsequent_indent="  ")]
    for title, entries in rows:
        if not entries:
            continue
        left = min(max(len(name) for name, _ in entries) + 4, 32)
        lines += ["", f"{title}:"]
        for name, text in entries:
            wrapped = [" " * left + w for w in textwrap.wrap(text, max(20, width - left), break_on_hyphens=False)]
            if len(name) + 4 <= left and wrapped:         # the help starts on the name's line
                wrapped[0] = f"  {name}".ljust(left) + wrapped[0][left:]
            else:
                lines.append(f"  {name}")
            lines += wrapped
    return "\n".join(lines) + "\n"


def build_app() -> Any:
    """The typer app of the same declarations: shell completion (`--install-completion`) runs on it."""
    import inspect

    import typer

    apps: dict[tuple[str, ...], Any] = {(): typer.Typer(name="mcpwrap", no_args_is_help=True, add_completion=True, help=GROUPS[()])}
    for path, about in GROUPS.items():
        if path:
            apps[path] = typer.Typer(name=path[-1], no_args_is_help=True, help=about)
            apps[()].add_typer(apps[path], name=path[-1])

    def version(value: bool) -> None:
        if value:
            _print_version()
            raise typer.Exit()

    @apps[()].callback()
    def common(show_version: bool = typer.Option(False, "--version", callback=version, is_eager=True,
                                                 help=TOP_OPTIONS[0][1])) -> None:
        """Serve a TOML file of shell commands as an MCP server on stdio."""

    for path, command in COMMANDS.items():
        params = []
        for p in command.params:
            if not p.flags:
                info = typer.Argument(p.default, metavar=p.metavar, help=p.help or None, hidden=p.hidden)
                kind: Any = str if p.default is REQUIRED else Optional[str]
            else:
                names = [f"{p.flags[0]}/{p.off}" if p.off else p.flags[0], *p.flags[1:]]
                kind = bool if not p.metavar else list[str] if p.many else Optional[str]
                info = typer.Option([] if p.many else p.default if p.metavar or p.off else False, *names,
                                    help=p.help, metavar=p.metavar or None)
            params.append(inspect.Parameter(p.dest, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=info, annotation=kind))

        apps[path[:-1]].command(path[-1], context_settings={"ignore_unknown_options": command.loose})(
            _typer_callback(command, inspect.Signature(params)))
    return apps[()]


def _typer_callback(command: Command, signature: Any) -> Callable[..., None]:
    """A function typer reads as `command` (by its signature) and that runs it."""
    def callback(**values: Any) -> None:
        command.run(**values)

    callback.__signature__ = signature  # type: ignore[attr-defined]
    callback.__doc__ = command.help
    return callback


def _print_version() -> None:
    from mcpwrap import __version__

    print(f"mcpwrap {__version__}")  # stdout-ok


SERVE_OPTIONS = {"--state-dir": "MCPWRAP_STATE_DIR", "--secret-file": "MCPWRAP_SECRET_FILE",
                 "--log-level": "MCPWRAP_LOG_LEVEL", "--max-calls": "MCPWRAP_MAX_CALLS",
                 "--max-tasks": "MCPWRAP_MAX_TASKS"}


def _default_secret_file() -> Path:
    """platformdirs' user config dir + "secret", written out on Linux as `default_state_dir` is:
    `serve` resolves it before its first answer."""
    if sys.platform == "linux":
        return _xdg_home("XDG_CONFIG_HOME", "~/.config") / "mcpwrap" / "secret"
    from mcpwrap.state.signing import default_secret_path

    return default_secret_path()


def default_state_dir() -> Path:
    """platformdirs' user state dir; on Linux its XDG rule is written out here, because importing
    platformdirs costs more than every other step of `mcpwrap list`."""
    if sys.platform == "linux":
        return _xdg_home("XDG_STATE_HOME", "~/.local/state") / "mcpwrap"
    import platformdirs

    return platformdirs.user_state_path("mcpwrap")


def _xdg_home(variable: str, fallback: str) -> Path:
    """An XDG base directory as platformdirs takes it: the variable when it is an absolute path, else ~/..."""
    value = os.environ.get(variable, "")
    return Path(value if os.path.isabs(value) else os.path.expanduser(fallback))


def option_value(given: str | None, name: str, default: Callable[[], Any]) -> Any:
    """A flag beats its MCPWRAP_* variable, which beats the default."""
    if given:
        return given
    return os.environ.get(SERVE_OPTIONS[name]) or default()


def _positive(given: str | None, name: str, default: int) -> int:
    text = option_value(given, name, lambda: str(default))
    if not text.isdigit() or int(text) < 1:
        _fail(f"{name} must be a whole number of at least 1 (got {text!r})", EXIT_USAGE)
    return int(text)


INLINE_TOOLS = Path("(--tool)")          # where problems of the inline form point
INLINE_PLACEHOLDER = r"\{([A-Za-z_][A-Za-z0-9_]*)(?::([a-z]+))?(\?)?\}"
INLINE_TYPES = ("string", "integer", "number", "boolean")


def inline_tools(specs: list[str]) -> str:
    """The tools file that `--tool NAME=COMMAND` options stand for, as TOML text.

    COMMAND is split into words as a shell would (quotes, no expansion, no shell at run time);
    a placeholder may say its type and whether it is optional: {path}, {n:integer}, {since?}.
    The text then goes through `config.loads` like any tools file, so every rule applies.
    """
    import re
    import shlex

    import orjson

    def quoted(text: str) -> str:
        return orjson.dumps(text).decode()         # a JSON string is a TOML basic string

    blocks = []
    for spec in specs:
        name, eq, command = spec.partition("=")
        try:
            words = shlex.split(command)
        except ValueError as exc:
            _fail(f"--tool {spec!r}: {exc}", EXIT_USAGE)
        if not eq or not name or not words:
            _fail(f"--tool {spec!r} must look like NAME=COMMAND, e.g. 'log=git log -n {{n:integer}} -- {{path?}}'", EXIT_USAGE)
        args: dict[str, tuple[str, bool]] = {}

        def declare(match: re.Match[str]) -> str:
            kind, optional = match[2] or "string", bool(match[3])
            if kind not in INLINE_TYPES or args.setdefault(match[1], (kind, optional)) != (kind, optional):
                _fail(f"--tool {spec!r}: {match[0]} must be one of {', '.join(INLINE_TYPES)}, the same "
                      "each time the argument appears", EXIT_USAGE)
            return "{" + match[1] + "}"

        argv = [re.sub(INLINE_PLACEHOLDER, declare, word) for word in words]
        blocks.append("\n".join([f"[tools.{quoted(name)}]", f"command = {orjson.dumps(argv).decode()}", *(
            f"args.{arg} = {{ type = {quoted(kind)}{', optional = true' if optional else ''} }}"
            for arg, (kind, optional) in args.items())]))
    return "\n\n".join(['[server]\nname = "mcpwrap"', *blocks]) + "\n"


def serve_command(file: Path | None, state_dir: str | None, secret_file: str | None, log_level: str | None,
                  watch: bool, max_calls: str | None = None, max_tasks: str | None = None,
                  tools: list[str] | None = None, toolset: Any = None, remote: Any = None) -> int:
    gc.disable()        # until `front.prepare` freezes them: the imports, the tools file and the core live as long
    from mcpwrap.config.model import Toolset
    from mcpwrap.serve import front   # as the server, and no collection pass over them need delay its first answer

    level = option_value(log_level, "--log-level", lambda: "info")
    if level not in front.LEVELS:
        _fail(f"--log-level must be one of {', '.join(front.LEVELS)} (got {level!r})", EXIT_USAGE)
    state = Path(option_value(state_dir, "--state-dir", default_state_dir))
    calls = _positive(max_calls, "--max-calls", front.Options.max_calls)
    running_tasks = _positive(max_tasks, "--max-tasks", front.Options.max_tasks)
    if (file is None) == (not tools):
        _usage_error(("serve",), "Give a tools FILE or --tool NAME=COMMAND options (not both).")
    toolset = toolset or Toolset()
    options = front.Options(
        secret_file=Path(option_value(secret_file, "--secret-file", _default_secret_file)),
        state_dir=state, watch=watch and file is not None, log_level=level, max_calls=calls, max_tasks=running_tasks,
        toolset=toolset)

    config = (_load(file, state / "validated") if file is not None
              else _loads_inline(inline_tools(tools or [])))
    if unknown := toolset.unknown(config):
        _usage_error(("serve",), f"--only/--exclude name tools {config.path} does not define: {', '.join(unknown)}")
    config = toolset.apply(config)
    if not config.tools and (toolset.read_only or toolset.only):
        _fail("--read-only/--only leave no tool to serve", EXIT_USAGE)
    if sys.stdin.isatty() and remote is None:
        print(f"mcpwrap: serving {len(config.tools)} tool(s) of {file or '--tool'} over stdio, waiting for an MCP client "
              "(an MCP host starts this command itself; to try a tool: mcpwrap call). Ctrl-D ends.", file=sys.stderr)
    try:
        if remote is not None:
            from mcpwrap.serve import http
            return http.run(config, options, remote)
        return front.run(config, options)
    except Exception as exc:              # signing is imported only once a secret is needed: not for the first answer
        from mcpwrap.state.signing import SecretFileError

        if not isinstance(exc, SecretFileError):
            raise
        _fail(str(exc), EXIT_CONFIG)


def main() -> None:
    """Dispatch on the declarations above; typer is imported only for shell completion."""
    argv = sys.argv[1:]
    if os.environ.get("_MCPWRAP_COMPLETE") or argv[:1] in (["--install-completion"], ["--show-completion"]):
        build_app()(prog_name="mcpwrap")
        return
    path: tuple[str, ...] = ()
    while path in GROUPS and argv and not argv[0].startswith("-"):
        if path + (argv[0],) not in COMMANDS and path + (argv[0],) not in GROUPS:
            _usage_error(path, f"No such command '{argv[0]}'.")
        path, argv = path + (argv[0],), argv[1:]
    words = argv[:argv.index("--")] if "--" in argv else argv
    command = COMMANDS.get(path)
    if command is None:
        if path == () and words[:1] == ["--version"]:
            _print_version()
        elif "--help" in words:
            sys.stdout.write(_help(path))  # stdout-ok
        elif not argv:                    # a bare group: what it has, and a usage status
            sys.stderr.write(_help(path))
            raise SystemExit(EXIT_USAGE)
        else:
            _usage_error(path, f"No such option: {argv[0]}")
        return
    if "--help" in words:
        sys.stdout.write(_help(path))  # stdout-ok
        return
    try:
        values = parse(command, argv)
    except UsageError as exc:
        _usage_error(path, str(exc))
    try:
        command.run(**values)
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:   # Ctrl-C, raised alone or out of a trio nursery
        if isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is None:
            raise
        print(file=sys.stderr)            # what ran was stopped on the way out (the runner kills its group)
        _fail("interrupted", 128 + 2)
    except BrokenPipeError:               # the reader left (`| head`): stop quietly, as `cat` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # nor complain at exit's flush
        raise SystemExit(EXIT_TOOL_ERROR) from None
    except Exception as exc:
        from mcpwrap.state.durable import UnsafePathError   # here: only a failure pays for the import

        if isinstance(exc, UnsafePathError):          # the task store (or a file in it) is not private to us
            _fail(str(exc), EXIT_CONFIG)
        raise


def entry() -> NoReturn:
    """The `mcpwrap` command: `main`, then, for the shell commands, an exit that skips tearing down
    the interpreter's modules (about 10 ms for trio's alone, a third of what `call` adds to
    importing trio). Exit handlers still run (the runner's cgroup cleanup is one) and stdio is
    flushed; a finished command needs nothing else. `serve` ends the ordinary way."""
    try:
        main()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    if sys.argv[1:2] == ["serve"]:
        raise SystemExit(code)
    if code is None:                               # as Python treats SystemExit(None) and SystemExit("text")
        code = EXIT_OK
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = EXIT_TOOL_ERROR
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):     # a reader that left, or a closed stream: nothing to flush to
            code = code or EXIT_TOOL_ERROR
    os._exit(code)


def _usage_error(path: tuple[str, ...], message: str) -> NoReturn:
    """As click words it: the usage line, where help is, and what is wrong; exit status 2."""
    sys.stderr.write(f"Usage: {_usage(path)}\nTry '{' '.join(('mcpwrap', *path, '--help'))}' for help.\n")
    if message:
        sys.stderr.write(f"\nError: {message}\n")
    raise SystemExit(EXIT_USAGE)


if __name__ == "__main__":
    main()
