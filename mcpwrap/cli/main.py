"""The `mcpwrap` command: argv parsed by the one declaration (`commands.COMMANDS`), --help written
from it, the verb's plain function called with the values by name, its errors mapped to exit codes.

Start-up time is the product (an MCP host starts `serve` for every session, and a shell user waits
on `call`), so nothing heavy is imported at the top of any module of `cli/`: not typer (with
pydantic), not jsonschema, not platformdirs; each verb imports what it needs when it runs, and
typer only for shell completion (`completion`). Exit status: 0 ok, 1 the tool reported an error
(or the user declined), 2 usage, 3 the tools file, the secret file, or another file or directory an
option names (`preflight`), 4 a task still running; 128 + 2 on Ctrl-C.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any, NoReturn

from mcpwrap.cli.commands import COMMANDS, GROUPS, TOP_OPTIONS, Command, Param, REQUIRED
from mcpwrap.cli.common import (EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, UsageError, fail,
                                print_version)


def main() -> None:
    """Find the command argv names, then print help, or parse its options and run it."""
    argv = sys.argv[1:]
    if os.environ.get("_MCPWRAP_COMPLETE") or argv[:1] in (["--install-completion"], ["--show-completion"]):
        from mcpwrap.cli import completion   # typer: for shell completion only

        completion.build_app()(prog_name="mcpwrap")
        return
    path: tuple[str, ...] = ()
    while path in GROUPS and argv and not argv[0].startswith("-"):
        if path + (argv[0],) not in COMMANDS and path + (argv[0],) not in GROUPS:
            _usage_error(path, f"No such command '{argv[0]}'." + _did_you_mean(path, argv[0]))
        path, argv = path + (argv[0],), argv[1:]
    words = argv[:argv.index("--")] if "--" in argv else argv
    command = COMMANDS.get(path)
    if command is None:
        _group(path, argv, words)
    elif "--help" in words:
        sys.stdout.write(_help(path))  # stdout-ok
    else:
        _run(path, command, argv)


def _did_you_mean(path: tuple[str, ...], word: str) -> str:
    """" Did you mean 'check'?" for the command of the group `path` nearest to a misspelt `word`."""
    from mcpwrap.config.reader import closest

    hint = closest(word, {p[-1] for p in (*COMMANDS, *GROUPS) if len(p) == len(path) + 1 and p[:-1] == path})
    return f" Did you mean '{hint}'?" if hint else ""


def _group(path: tuple[str, ...], argv: list[str], words: list[str]) -> None:
    """`mcpwrap`, `mcpwrap tasks` and the like: the version, help, or a usage error."""
    if path == () and words[:1] == ["--version"]:
        print_version()
    elif "--help" in words:
        sys.stdout.write(_help(path))  # stdout-ok
    elif not argv:                    # a bare group: what it has, and a usage status
        sys.stderr.write(_help(path))
        raise SystemExit(EXIT_USAGE)
    else:
        _usage_error(path, f"No such option: {argv[0]}")


def _run(path: tuple[str, ...], command: Command, argv: list[str]) -> None:
    """Run the command with its parsed values; map what escapes it to an exit status. What was
    loaded so far lives until exit: frozen, no collection walks it again; the verb runs with the
    collector on (`entry` may have left it off)."""
    gc.freeze()
    gc.enable()
    try:
        command.run(**parse(command, argv))
    except UsageError as exc:             # the command line does not fit: the declaration's or the verb's verdict
        _usage_error(path, str(exc))
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:   # Ctrl-C, raised alone or out of a trio nursery
        if isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is None:
            raise
        print(file=sys.stderr)            # what ran was stopped on the way out (the runner kills its group)
        fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:               # the reader left (`| head`): stop quietly, as `cat` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # nor complain at exit's flush
        raise SystemExit(EXIT_TOOL_ERROR) from None
    except Exception as exc:
        from mcpwrap.state.durable import UnsafePathError   # here: only a failure pays for the import

        if isinstance(exc, UnsafePathError):          # the task store (or a file in it) is not private to us
            fail(str(exc), EXIT_CONFIG)
        raise


def entry() -> NoReturn:
    """The `mcpwrap` command: `main`, then, for the shell commands, an exit that skips tearing down
    the interpreter's modules (trio's alone are a large share of what `call` adds to importing
    trio: bench/cli_startup.py). Exit handlers still run (the runner's cgroup cleanup is one) and stdio is
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


if __name__ == "__main__":
    main()
