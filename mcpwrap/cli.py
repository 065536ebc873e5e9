"""The typer CLI: resolves paths and options, calls plain functions, maps errors to exit codes.

`mcpwrap serve` is dispatched before typer is imported (see `main`): an MCP
host starts it for every session, so its start-up time is the product.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any, NoReturn, Optional

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
    """Load a tools file; with `validated_dir`, remember files whose schemas passed, by digest."""
    from mcpwrap import __version__, config

    def marker(digest: str) -> Path:
        return validated_dir / f"{digest}-{__version__}"  # type: ignore[operator]

    try:
        if validated_dir is None:
            return config.load(file)
        loaded = config.load(file, lambda digest: marker(digest).exists())
        try:
            validated_dir.mkdir(parents=True, exist_ok=True)
            marker(loaded.digest).touch()
        except OSError:
            pass                           # only a cache: a read-only state dir costs start-up time, nothing else
        return loaded
    except config.ConfigError as exc:
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

    from mcpwrap import tasks
    from mcpwrap.protocol.tasking import stored_result

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

    from mcpwrap import signing, tasks

    if tool.task == "never":
        _fail(f"{tool.name!r} has task = \"never\": it cannot run as a task (drop --task)", EXIT_USAGE)
    store = tasks.Store.for_tools_file(Path(option_value(state_dir, "--state-dir", default_state_dir)), config.path)
    secret = Path(option_value(secret_file, "--secret-file", _default_secret_file))
    try:
        keyring = signing.ensure_secret(secret, time.time())
        record = tasks.create_task(store, config, tool, args, int(tool.task_ttl_s * 1000), keyring, secret,
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


def _ask(arg: Any) -> Any:
    """Prompt on the terminal for an elicited argument, showing what it accepts, until an answer fits."""
    from jsonschema import Draft202012Validator   # only when a human is asked

    schema = arg.schema
    items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
    allowed = schema.get("enum") or items.get("enum")
    kind = schema.get("type", "any")
    shown = "/".join(map(str, allowed)) if allowed else "true/false" if kind == "boolean" else kind
    several = " (several: a,b)" if kind == "array" else ""
    default = f", default {_json_text(schema['default'])}" if "default" in schema else ""
    while True:
        sys.stderr.write(f"{schema.get('description', arg.name)} [{shown}{several}{default}]: ")
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            _fail(f"no answer for {arg.name!r}; nothing ran", EXIT_USAGE)
        text = line.rstrip("\n")
        if not text and "default" in schema:
            return schema["default"]
        try:
            value = _parsed(arg, text)
        except ValueError as exc:
            print(f"  {exc}; try again", file=sys.stderr)
            continue
        if kind == "array" and not isinstance(value, list):
            value = [part.strip() for part in text.split(",") if part.strip()]
        problem = next(Draft202012Validator(schema).iter_errors(value), None)
        if problem is None:
            return value
        print(f"  {problem.message}; try again", file=sys.stderr)


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
                target.write_bytes(data)
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


def _check_secret(config: Any, path: Path) -> None:
    """Refuse what `serve` would: a secret file that exists but is unusable, when a tool needs it
    (a question to sign, or a task record to MAC). A missing one `serve` creates."""
    import time

    from mcpwrap import signing

    needs = [t.name for t in config.tools if t.confirm or t.task != "never" or any(a.elicit for a in t.args)]
    if not needs or not os.path.lexists(path):
        return
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


def build_app() -> Any:
    import typer

    app = typer.Typer(
        name="mcpwrap", no_args_is_help=True, add_completion=True,
        help="Serve a TOML file of shell commands as an MCP server on stdio.")
    file_arg = typer.Argument(..., exists=False, dir_okay=False, help="The tools file (TOML).")

    def version_callback(value: bool) -> None:
        if value:
            from mcpwrap import __version__

            print(f"mcpwrap {__version__}")  # stdout-ok
            raise typer.Exit()

    @app.callback()
    def common(version: bool = typer.Option(False, "--version", callback=version_callback,
                                            is_eager=True, help="Print the version and exit.")) -> None:
        """Serve a TOML file of shell commands as an MCP server on stdio."""

    @app.command()
    def serve(file: Path = file_arg,
              state_dir: Optional[str] = typer.Option(None, "--state-dir", help="Where durable task records live; env MCPWRAP_STATE_DIR; default: the user state dir."),
              secret_file: Optional[str] = typer.Option(None, "--secret-file", help="The shared requestState secret; env MCPWRAP_SECRET_FILE; default: the user config dir."),
              log_level: Optional[str] = typer.Option(None, "--log-level", help="What mcpwrap itself logs on stderr: debug (also every message in and out, and tool stderr), info (default), warning, error; env MCPWRAP_LOG_LEVEL."),
              max_calls: Optional[str] = typer.Option(None, "--max-calls", help="Tool calls running at once (default 64); up to 16 times as many wait for a slot, more are refused; env MCPWRAP_MAX_CALLS."),
              max_tasks: Optional[str] = typer.Option(None, "--max-tasks", help="Durable tasks running at once (default 16); past it, task creation is refused; env MCPWRAP_MAX_TASKS."),
              watch: bool = typer.Option(True, "--watch/--no-watch", help="Reload the tools file when it changes.")) -> None:
        """Run the MCP server on stdio: MCP messages on stdout, logs on stderr."""
        raise SystemExit(serve_command(file, state_dir, secret_file, log_level, watch, max_calls, max_tasks))

    @app.command()
    def init(file: Path = typer.Argument(Path("tools.toml"), help="Where to write the starter tools file."),
             force: bool = typer.Option(False, "--force", help="Overwrite an existing file.")) -> None:
        """Write a commented starter tools file that demonstrates each major feature."""
        from importlib.resources import files

        if file.exists() and not force:
            _fail(f"{file} already exists; use --force to overwrite it", EXIT_USAGE)
        file.write_text(files("mcpwrap").joinpath("starter.toml").read_text())
        print(f"wrote {file}; next: mcpwrap check {file} && mcpwrap call {file} greet --arg name=you")  # stdout-ok

    @app.command()
    def check(file: Path = file_arg,
              strict: bool = typer.Option(False, "--strict", help="Make a program not found on PATH an error, not a warning."),
              secret_file: Optional[str] = typer.Option(None, "--secret-file", help="The secret file `serve` would use; env MCPWRAP_SECRET_FILE; default: the user config dir.")) -> None:
        """Validate a tools file as `serve` would, and look for each program on PATH.

        Problems are printed as FILE:LINE:COL: message.
        """
        config = _load(file)
        missing = _missing_programs(config)
        for problem in missing:
            print(f"{_colour('mcpwrap:', '1;33')} {'error' if strict else 'warning'}: {problem}", file=sys.stderr)
        _check_secret(config, Path(option_value(secret_file, "--secret-file", _default_secret_file)))
        if missing and strict:
            raise SystemExit(EXIT_CONFIG)
        print(f"{file}: ok, {len(config.tools)} tool(s)")  # stdout-ok

    @app.command("list")
    def list_tools(file: Path = file_arg,
                   as_json: bool = typer.Option(False, "--json", help="Print tools and inputSchemas as JSON.")) -> None:
        """List the tools, their arguments and the inputSchema each gets."""
        config = _load(file)
        if as_json:
            doc = [{"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                   for t in config.tools]
            _print_json(doc)
            return
        for tool in config.tools:
            print(f"{tool.name}  {tool.description}".rstrip())  # stdout-ok
            for arg in tool.args:
                kind = arg.schema.get("type", "any")
                kind = " or ".join(kind) if isinstance(kind, list) else kind
                extra = "" if arg.required else f" (default {_json_text(arg.schema['default'])})" if "default" in arg.schema else " (optional)"
                print(f"    {arg.name}: {kind}{extra}  {arg.schema.get('description', '')}".rstrip())  # stdout-ok

    @app.command()
    def call(file: Path = file_arg,
             tool: str = typer.Argument(..., help="The tool to run."),
             arguments: Optional[str] = typer.Argument(None, help="Arguments as one JSON object."),
             arg: list[str] = typer.Option([], "--arg", "-a", help="NAME=VALUE: the raw text for a string argument, JSON for any other type; repeatable."),
             output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write image/audio/binary content here (default: a temporary file named on stderr)."),
             yes: bool = typer.Option(False, "--yes", "-y", help="Answer yes to the tool's confirmation (needed when stdin is not a terminal)."),
             task: bool = typer.Option(False, "--task", help="Run it as a durable task (as `serve` does for a client): the id goes to stderr, then its result, as `tasks result --wait` prints it."),
             no_wait: bool = typer.Option(False, "--no-wait", help="With --task: print the task id on stdout and return at once."),
             state_dir: Optional[str] = typer.Option(None, "--state-dir", help="With --task: where the task record lives; env MCPWRAP_STATE_DIR."),
             secret_file: Optional[str] = typer.Option(None, "--secret-file", help="With --task: the secret that signs the record; env MCPWRAP_SECRET_FILE."),
             as_json: bool = typer.Option(False, "--json", help="Print the whole result as JSON.")) -> None:
        """Run one tool the way `serve` would; exit 1 when the result is an error."""
        import orjson
        import trio

        from mcpwrap import runner
        from mcpwrap.protocol.asking import render_confirm
        from mcpwrap.validation import argument_problems

        config = _load(file)
        spec = config.tool(tool)
        if spec is None:
            _fail(f"no tool named {tool!r} in {file} (tools: {', '.join(t.name for t in config.tools)})", EXIT_USAGE)
        try:
            args = orjson.loads(arguments) if arguments else {}
        except orjson.JSONDecodeError as exc:
            _fail(f"the JSON arguments do not parse: {exc}", EXIT_USAGE)
        if not isinstance(args, dict):
            _fail("the JSON arguments must be an object, like '{\"name\": \"value\"}'", EXIT_USAGE)
        args.update(_typed_arg(spec, a) for a in arg)
        interactive = sys.stdin.isatty()
        for missing in (a for a in spec.args if a.elicit and a.name not in args and interactive):
            args[missing.name] = _ask(missing)
        problems = argument_problems(spec, args)
        if problems:
            _fail(f"invalid arguments for {tool!r}: " + "; ".join(problems) + " (nothing ran)", EXIT_USAGE)
        if spec.confirm and not yes:
            question = render_confirm(spec.confirm, runner.with_defaults(spec, args))
            if not interactive:
                _fail(f"{tool!r} asks \"{question}\" before it runs; pass --yes to confirm (nothing ran)", EXIT_USAGE)
            if not typer.confirm(question, default=False, err=True):
                _fail("declined; nothing ran", EXIT_TOOL_ERROR)
        if no_wait and not task:
            _fail("--no-wait goes with --task", EXIT_USAGE)
        if task:
            store, task_id = _start_task(config, spec, args, state_dir, secret_file)
            if no_wait:
                print(task_id)  # stdout-ok
                raise SystemExit(EXIT_OK)
            print(f"task {task_id} (mcpwrap tasks show|result|cancel {task_id})", file=sys.stderr)
            _task_outcome(store, task_id, True, output, as_json)
        progress = _ProgressLine(tool) if sys.stderr.isatty() and spec.progress else None
        try:
            result = trio.run(lambda: runner.run(
                spec, args, on_stderr=progress.line if progress else lambda line: print(line, file=sys.stderr),
                on_progress=progress.update if progress else None))
        except runner.ArgumentError as exc:
            _fail(f"{exc} (nothing ran)", EXIT_USAGE)
        if progress:
            progress.clear()
        if as_json:
            _print_json(result.to_json())
        else:
            _print_text(_streamed_text(result))
            _write_binary(result, output)
        raise SystemExit(EXIT_TOOL_ERROR if result.is_error else EXIT_OK)

    @app.command()
    def schema() -> None:
        """Print the JSON Schema of the tools-file format (for editors: taplo, Even Better TOML)."""
        from importlib.resources import files

        sys.stdout.write(files("mcpwrap").joinpath("tools-file.schema.json").read_text())  # stdout-ok

    @app.command("client-config")
    def client_config(file: Path = file_arg,
                      client: str = typer.Option("claude-desktop", "--client", "-c",
                                                 help="claude-desktop, claude-code, cursor or vscode."),
                      name: Optional[str] = typer.Option(None, "--name", help="The server's key in the config (default: the file's stem)."),
                      env: list[str] = typer.Option([], "--env", "-e", help="NAME=VALUE set in the server's environment; repeatable."),
                      pin_path: bool = typer.Option(False, "--pin-path", help="Set the server's PATH to this shell's (GUI hosts start servers with a minimal one).")) -> None:
        """Print the JSON to paste into an MCP client's config for this tools file."""
        _load(file)
        command, args = _self_command()
        entry: dict[str, Any] = {"command": command, "args": [*args, "serve", str(file.resolve())]}
        pinned = dict(_assignment("--env", text) for text in env)
        if pin_path:
            pinned["PATH"] = os.environ.get("PATH", os.defpath)
        if pinned:
            entry["env"] = pinned
        key = name or file.stem
        layouts = {"claude-desktop": {"mcpServers": {key: entry}}, "cursor": {"mcpServers": {key: entry}},
                   "claude-code": {"mcpServers": {key: {"type": "stdio", **entry}}},
                   "vscode": {"servers": {key: {"type": "stdio", **entry}}}}
        if client not in layouts:
            _fail(f"--client must be one of {', '.join(layouts)} (got {client!r})", EXIT_USAGE)
        _print_json(layouts[client])

    secret_app = typer.Typer(help="The shared secret that signs requestState (modern confirmations).",
                             no_args_is_help=True)
    app.add_typer(secret_app, name="secret")
    secret_opt = typer.Option(None, "--secret-file", help="The secret file; env MCPWRAP_SECRET_FILE; default: the user config dir.")

    @secret_app.command("path")
    def secret_path(secret_file: Optional[str] = secret_opt) -> None:
        """Print where the secret file is (it may not exist yet)."""
        print(option_value(secret_file, "--secret-file", _default_secret_file))  # stdout-ok

    @secret_app.command("init")
    def secret_init(secret_file: Optional[str] = secret_opt) -> None:
        """Create the secret file (0600) if it does not exist; check it if it does."""
        import time

        from mcpwrap import signing

        path = Path(option_value(secret_file, "--secret-file", _default_secret_file))
        try:
            _, created = signing.init_secret(path, time.time())
        except signing.SecretFileError as exc:
            _fail(str(exc), EXIT_CONFIG)
        print(f"{'created' if created else 'ok, already present:'} {path}")  # stdout-ok

    @secret_app.command("rotate")
    def secret_rotate(secret_file: Optional[str] = secret_opt) -> None:
        """Make a new key; the previous one still verifies requestState for 24 hours."""
        import time

        from mcpwrap import signing

        path = Path(option_value(secret_file, "--secret-file", _default_secret_file))
        try:
            signing.rotate_secret(path, time.time())
        except signing.SecretFileError as exc:
            _fail(str(exc), EXIT_CONFIG)
        print(f"rotated {path}; the previous key verifies for {signing.ROTATION_GRACE_S / 3600:g} more hours")  # stdout-ok

    # --- mcpwrap tasks ...: the durable task store of one tools file ------------------------
    tasks_app = typer.Typer(name="tasks", no_args_is_help=True, help=(
        "List, show, fetch, cancel and collect the durable tasks of a tools file. Exit status: 0 ok; "
        "1 the task failed, was cancelled or its tool reported an error; 2 usage or unknown task id; "
        "4 the task is still running (`result` without --wait)."))
    app.add_typer(tasks_app)
    state_opt = typer.Option(None, "--state-dir", help="Where durable task records live; env MCPWRAP_STATE_DIR; default: the user state dir.")
    json_opt = typer.Option(False, "--json", help="Print JSON instead of text.")
    # `[FILE] ID`: two positionals, the second optional; an id alone is looked up in every store.
    where_arg = typer.Argument(..., metavar="[FILE] TASK_ID", show_default=False,
                               help="The tools file (optional: without it, every store in the state dir is searched) "
                                    "and a task id as `mcpwrap tasks list FILE` shows it.")
    id_arg = typer.Argument(None, hidden=True)
    # Old ids may start with "-": an option this command does not know is read as a positional.
    loose = {"ignore_unknown_options": True}

    def state_path(state_dir: Optional[str]) -> Path:
        return Path(option_value(state_dir, "--state-dir", default_state_dir))

    def task_store(file: Path, state_dir: Optional[str]) -> Any:
        from mcpwrap import tasks

        return tasks.Store.for_tools_file(state_path(state_dir), file)

    def find_task(where: str, task_id: Optional[str], state_dir: Optional[str]) -> tuple[Any, str]:
        """The store holding the task and its id: FILE's store, or the one store under the state dir that has it."""
        from mcpwrap import tasks
        from mcpwrap.protocol.tasking import valid_id

        if task_id is not None:
            return task_store(Path(where), state_dir), task_id
        state = state_path(state_dir)
        if not valid_id(where):
            _fail(f"{where!r} is not a task id (ids are 22 or 23 characters of A-Z a-z 0-9 _ -); "
                  "to name a tools file, give the id after it", EXIT_USAGE)
        stores = [tasks.Store(d / "tasks") for d in sorted(state.iterdir())] if state.is_dir() else []
        found = next((s for s in stores if s.path(where).exists()), None)
        if found is None:
            _fail(f"no task {where!r} in any store under {state}", EXIT_USAGE)
        return found, where

    @tasks_app.command("list")
    def tasks_list(file: Path = file_arg, state_dir: Optional[str] = state_opt, as_json: bool = json_opt) -> None:
        """List the tasks of FILE, oldest first."""
        from mcpwrap import tasks

        records = sorted(task_store(file, state_dir).records(), key=lambda r: (r.created_at, r.task_id))
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

    @tasks_app.command("show", context_settings=loose)
    def tasks_show(where: str = where_arg, task_id: Optional[str] = id_arg, state_dir: Optional[str] = state_opt,
                   as_json: bool = json_opt) -> None:
        """Show one task: status, arguments, progress, supervisor, outcome."""
        from mcpwrap import tasks

        store, task_id = find_task(where, task_id, state_dir)
        record = _task_record(store, task_id)
        if as_json:
            _print_json(tasks.public_json(record))
        else:
            print(tasks.describe(record, store))  # stdout-ok

    @tasks_app.command("result", context_settings=loose)
    def tasks_result(where: str = where_arg, task_id: Optional[str] = id_arg, state_dir: Optional[str] = state_opt,
                     wait: bool = typer.Option(False, "--wait", help="Wait until the task has finished."),
                     output: Optional[Path] = typer.Option(None, "--output", help="Write image/audio/binary content here (default: a temporary file named on stderr)."),
                     as_json: bool = json_opt) -> None:
        """Print a finished task's output like `mcpwrap call` does; exit 1 when it failed."""
        store, task_id = find_task(where, task_id, state_dir)
        _task_outcome(store, task_id, wait, output, as_json)

    @tasks_app.command("cancel", context_settings=loose)
    def tasks_cancel(where: str = where_arg, task_id: Optional[str] = id_arg, state_dir: Optional[str] = state_opt,
                     as_json: bool = json_opt) -> None:
        """Cancel a running task (its command's process group is killed); exit 1 if it had finished."""
        from mcpwrap import tasks
        from mcpwrap.protocol.tasking import TaskLookupError, TaskTerminalError

        store, task_id = find_task(where, task_id, state_dir)
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

    @tasks_app.command("gc")
    def tasks_gc(file: Path = file_arg, state_dir: Optional[str] = state_opt, as_json: bool = json_opt) -> None:
        """Remove expired tasks (their ttl has passed) and stale leftovers."""
        store = task_store(file, state_dir)
        removed = store.gc()
        if as_json:
            _print_json({"removed": removed, "store": str(store.root)})
        else:
            print(f"removed {removed} expired task(s) from {store.root}")  # stdout-ok

    return app


SERVE_OPTIONS = {"--state-dir": "MCPWRAP_STATE_DIR", "--secret-file": "MCPWRAP_SECRET_FILE",
                 "--log-level": "MCPWRAP_LOG_LEVEL", "--max-calls": "MCPWRAP_MAX_CALLS",
                 "--max-tasks": "MCPWRAP_MAX_TASKS"}


def _default_secret_file() -> Path:
    from mcpwrap.signing import default_secret_path

    return default_secret_path()


def default_state_dir() -> Path:
    import platformdirs

    return platformdirs.user_state_path("mcpwrap")


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


def serve_command(file: Path, state_dir: str | None, secret_file: str | None, log_level: str | None,
                  watch: bool, max_calls: str | None = None, max_tasks: str | None = None) -> int:
    from mcpwrap import server, signing

    level = option_value(log_level, "--log-level", lambda: "info")
    if level not in server.LEVELS:
        _fail(f"--log-level must be one of {', '.join(server.LEVELS)} (got {level!r})", EXIT_USAGE)
    state = Path(option_value(state_dir, "--state-dir", default_state_dir))
    calls = _positive(max_calls, "--max-calls", server.Options.max_calls)
    running_tasks = _positive(max_tasks, "--max-tasks", server.Options.max_tasks)
    config = _load(file, state / "validated")
    if sys.stdin.isatty():
        print(f"mcpwrap: serving {len(config.tools)} tool(s) of {file} over stdio, waiting for an MCP client "
              "(an MCP host starts this command itself; to try a tool: mcpwrap call). Ctrl-D ends.", file=sys.stderr)
    options = server.Options(
        secret_file=Path(option_value(secret_file, "--secret-file", _default_secret_file)),
        state_dir=state, watch=watch, log_level=level, max_calls=calls, max_tasks=running_tasks)
    try:
        return server.run(config, options)
    except signing.SecretFileError as exc:
        _fail(str(exc), EXIT_CONFIG)


def _fast_serve(argv: list[str]) -> int | None:
    """`serve FILE [--state-dir D] [--secret-file F] [--log-level L] [--max-calls N] [--max-tasks N] [--no-watch]`
    without typer.

    Returns None when the command line needs typer (help, completion, an unknown flag).
    """
    values: dict[str, str | None] = dict.fromkeys(SERVE_OPTIONS)
    files: list[str] = []
    watch = True
    rest = iter(argv)
    for word in rest:
        name, eq, inline = word.partition("=")
        if name in SERVE_OPTIONS:
            values[name] = inline if eq else next(rest, None)
            if values[name] is None:
                return None
        elif word == "--no-watch":
            watch = False
        elif word.startswith("-"):
            return None
        else:
            files.append(word)
    if len(files) != 1:
        return None
    return serve_command(Path(files[0]), values["--state-dir"], values["--secret-file"],
                         values["--log-level"], watch, values["--max-calls"], values["--max-tasks"])


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["serve"]:
        code = _fast_serve(argv[1:])
        if code is not None:
            raise SystemExit(code)
    from mcpwrap.durable import UnsafePathError

    try:
        build_app()(prog_name="mcpwrap")
    except UnsafePathError as exc:        # the task store (or a file in it) is not private to us
        _fail(str(exc), EXIT_CONFIG)


if __name__ == "__main__":
    main()
