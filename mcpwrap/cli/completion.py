"""Shell completion: the typer app built from the same declarations the parser reads (`commands`).

Only `--install-completion`, `--show-completion` and the shell's completion requests run it: typer
(with click and pydantic) is imported here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from mcpwrap.cli.commands import COMMANDS, GROUPS, REQUIRED, TOP_OPTIONS, Command
from mcpwrap.cli.common import UsageError, print_version


def build_app() -> Any:
    """The typer app of the declarations: shell completion (`--install-completion`) runs on it."""
    import inspect

    import typer

    apps: dict[tuple[str, ...], Any] = {(): typer.Typer(name="mcpwrap", no_args_is_help=True, add_completion=True, help=GROUPS[()])}
    for path, about in GROUPS.items():
        if path:
            apps[path] = typer.Typer(name=path[-1], no_args_is_help=True, help=about)
            apps[()].add_typer(apps[path], name=path[-1])

    def version(value: bool) -> None:
        if value:
            print_version()
            raise typer.Exit()

    @apps[()].callback()
    def common(show_version: bool = typer.Option(False, "--version", callback=version, is_eager=True,
                                                 help=TOP_OPTIONS[0][1])) -> None:
        """Serve a TOML file of shell commands as an MCP server, on stdio or over Streamable HTTP."""

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
    """A function typer reads as `command` (by its signature) and that runs it; a `UsageError` of the
    command is click's, which prints the usage line and exits 2 as `main` does."""
    def callback(**values: Any) -> None:
        import click

        try:
            command.run(**values)
        except UsageError as exc:
            raise click.UsageError(str(exc)) from None

    callback.__signature__ = signature  # type: ignore[attr-defined]
    callback.__doc__ = command.help
    return callback
