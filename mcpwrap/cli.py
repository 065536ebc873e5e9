"""The typer CLI: resolves paths and options, calls plain functions, maps errors to exit codes.

`mcpwrap serve` is dispatched before typer is imported (see `main`): an MCP
host starts it for every session, so its start-up time is the product.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any, Optional

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_CONFIG = 0, 1, 2, 3


def _fail(message: str, code: int) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
    print(f"mcpwrap: {message}", file=sys.stderr)
    raise SystemExit(code)


def _load(file: Path) -> Any:
    from mcpwrap import config

    try:
        return config.load(file)
    except config.ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def _parse_arg(text: str) -> tuple[str, Any]:
    """`k=v`: v is JSON when it parses as JSON (numbers, true, arrays), else a string."""
    import orjson

    key, sep, value = text.partition("=")
    if not sep or not key:
        _fail(f"--arg {text!r} must look like NAME=VALUE", EXIT_USAGE)
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        parsed = value
    return key, parsed if not isinstance(parsed, str) or value.startswith('"') else value


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
              state_dir: Optional[str] = typer.Option(None, "--state-dir", help="Where durable task records live [env MCPWRAP_STATE_DIR; default: the user state dir]."),
              secret_file: Optional[str] = typer.Option(None, "--secret-file", help="The shared requestState secret [env MCPWRAP_SECRET_FILE; default: the user config dir]."),
              log_level: Optional[str] = typer.Option(None, "--log-level", help="debug (also traces every message on stderr), info, warning, error [env MCPWRAP_LOG_LEVEL]."),
              watch: bool = typer.Option(True, "--watch/--no-watch", help="Reload the tools file when it changes.")) -> None:
        """Run the MCP server on stdio: MCP messages on stdout, logs on stderr."""
        raise SystemExit(serve_command(file, state_dir, secret_file, log_level, watch))

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
    def check(file: Path = file_arg) -> None:
        """Validate a tools file; problems are printed as FILE:LINE:COL: message."""
        config = _load(file)
        print(f"{file}: ok, {len(config.tools)} tool(s)")  # stdout-ok

    @app.command("list")
    def list_tools(file: Path = file_arg,
                   as_json: bool = typer.Option(False, "--json", help="Print tools and inputSchemas as JSON.")) -> None:
        """List the tools, their arguments and the inputSchema each gets."""
        import orjson

        config = _load(file)
        if as_json:
            doc = [{"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                   for t in config.tools]
            sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
            return
        for tool in config.tools:
            print(f"{tool.name}  {tool.description}".rstrip())  # stdout-ok
            for arg in tool.args:
                kind = arg.schema.get("type", "any")
                extra = "" if arg.required else f" (default {arg.schema['default']!r})" if "default" in arg.schema else " (optional)"
                print(f"    {arg.name}: {kind}{extra}  {arg.schema.get('description', '')}".rstrip())  # stdout-ok

    @app.command()
    def call(file: Path = file_arg,
             tool: str = typer.Argument(..., help="The tool to run."),
             arguments: Optional[str] = typer.Argument(None, help="Arguments as one JSON object."),
             arg: list[str] = typer.Option([], "--arg", "-a", help="NAME=VALUE (VALUE parsed as JSON if it can be); repeatable."),
             as_json: bool = typer.Option(False, "--json", help="Print the whole result as JSON.")) -> None:
        """Run one tool the way `serve` would; exit 1 when the result is an error."""
        import orjson
        import trio

        from mcpwrap import runner
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
        args.update(_parse_arg(a) for a in arg)
        problems = argument_problems(spec, args)
        if problems:
            _fail(f"invalid arguments for {tool!r}: " + "; ".join(problems) + " (nothing ran)", EXIT_USAGE)
        try:
            result = trio.run(lambda: runner.run(spec, args, on_stderr=lambda line: print(line, file=sys.stderr)))
        except runner.ArgumentError as exc:
            _fail(f"{exc} (nothing ran)", EXIT_USAGE)
        if as_json:
            sys.stdout.buffer.write(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
        else:
            text = result.text
            sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")  # stdout-ok
        raise SystemExit(EXIT_TOOL_ERROR if result.is_error else EXIT_OK)

    return app


LOG_LEVELS = ("debug", "info", "warning", "error")
SERVE_OPTIONS = {"--state-dir": "MCPWRAP_STATE_DIR", "--secret-file": "MCPWRAP_SECRET_FILE",
                 "--log-level": "MCPWRAP_LOG_LEVEL"}


def default_state_dir() -> Path:
    import platformdirs

    return platformdirs.user_state_path("mcpwrap")


def default_secret_file() -> Path:
    import platformdirs

    return platformdirs.user_config_path("mcpwrap") / "secret"


def option_value(given: str | None, name: str, default: Callable[[], Any]) -> Any:
    """A flag beats its MCPWRAP_* variable, which beats the default."""
    if given:
        return given
    return os.environ.get(SERVE_OPTIONS[name]) or default()


def serve_command(file: Path, state_dir: str | None, secret_file: str | None, log_level: str | None,
                  watch: bool) -> int:
    from mcpwrap import server, signing

    level = option_value(log_level, "--log-level", lambda: "warning")
    if level not in LOG_LEVELS:
        _fail(f"--log-level must be one of {', '.join(LOG_LEVELS)} (got {level!r})", EXIT_USAGE)
    config = _load(file)
    options = server.Options(
        secret_file=Path(option_value(secret_file, "--secret-file", default_secret_file)),
        state_dir=Path(option_value(state_dir, "--state-dir", default_state_dir)),
        watch=watch, trace=level == "debug")
    try:
        return server.run(config, options)
    except signing.SecretFileError as exc:
        _fail(str(exc), EXIT_CONFIG)


def _fast_serve(argv: list[str]) -> int | None:
    """`serve FILE [--state-dir D] [--secret-file F] [--log-level L] [--no-watch]` without typer.

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
                         values["--log-level"], watch)


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["serve"]:
        code = _fast_serve(argv[1:])
        if code is not None:
            raise SystemExit(code)
    build_app()(prog_name="mcpwrap")


if __name__ == "__main__":
    main()
