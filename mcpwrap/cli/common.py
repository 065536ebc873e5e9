"""What every verb of the CLI shares: exit codes, failing with one, printing, the MCPWRAP_* options.

A verb fails with `fail(message, EXIT_...)`, or raises `UsageError` when the command line itself
is wrong (`main` adds the usage line). Like every module of `cli/`, this one imports nothing
heavy at the top: each function imports what it needs when it runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_CONFIG, EXIT_PENDING = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 128 + 2                # Ctrl-C, as a shell reports SIGINT

SERVE_OPTIONS = {"--state-dir": "MCPWRAP_STATE_DIR", "--secret-file": "MCPWRAP_SECRET_FILE",
                 "--log-level": "MCPWRAP_LOG_LEVEL", "--max-calls": "MCPWRAP_MAX_CALLS",
                 "--max-tasks": "MCPWRAP_MAX_TASKS"}


class UsageError(Exception):
    """A command line that does not fit the declaration; exit status 2, with the usage line."""


def colour(text: str, code: str) -> str:
    """ANSI colour on a terminal only, and never when NO_COLOR is set."""
    if os.environ.get("NO_COLOR") or not sys.stderr.isatty():
        return text
    return f"\033[{code}m{text}\033[0m"


def fail(message: str, code: int) -> NoReturn:
    """Say what went wrong on stderr and exit with `code`."""
    print(f"{colour('mcpwrap:', '1;31')} {message}", file=sys.stderr)
    raise SystemExit(code)


def note(text: str) -> None:
    """A remark on stderr that is not a failure."""
    print(f"mcpwrap: {text}", file=sys.stderr)


def assignment(option: str, text: str) -> tuple[str, str]:
    """NAME and VALUE of an `option NAME=VALUE`; a usage error otherwise."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        fail(f"{option} {text!r} must look like NAME=VALUE", EXIT_USAGE)
    return name, value


def print_version() -> None:
    from mcpwrap import __version__

    print(f"mcpwrap {__version__}")  # stdout-ok


def print_json(doc: Any) -> None:
    import orjson

    sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")


def print_text(text: str) -> None:
    """A tool's text as `call` prints it: as is, with a final newline."""
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")  # stdout-ok


def json_text(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()


def load_tools(file: Path, validated_dir: Path | None = None) -> Any:
    """Load a tools file, remembering in `validated_dir` (default: the state dir's) files whose
    schemas passed, by digest and version: the same bytes are not checked again (jsonschema is
    the largest import there is). `serve --state-dir` passes its own. Exits 3 on a problem."""
    from mcpwrap import __version__
    from mcpwrap.config import load as config
    from mcpwrap.state.durable import create_private, make_private_dir

    cache = validated_dir or state_path(None) / "validated"

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


def output_spool(config: Any, state_dir: str | None) -> Any:
    """The tools file's output spool under the state dir, where `serve` keeps output beyond the cap."""
    from mcpwrap.run.spool import Spool

    return Spool.for_tools_file(state_path(state_dir), config.path, config.spool.quota, config.spool.ttl_s)


def option_value(given: str | None, name: str, default: Callable[[], Any]) -> Any:
    """A flag beats its MCPWRAP_* variable, which beats the default."""
    if given:
        return given
    return os.environ.get(SERVE_OPTIONS[name]) or default()


def state_path(state_dir: str | None) -> Path:
    """--state-dir, else MCPWRAP_STATE_DIR, else the user state dir."""
    return Path(option_value(state_dir, "--state-dir", default_state_dir))


def secret_path(secret_file: str | None) -> Path:
    """--secret-file, else MCPWRAP_SECRET_FILE, else the user config dir's."""
    return Path(option_value(secret_file, "--secret-file", default_secret_file))


def positive(given: str | None, name: str, default: int) -> int:
    """A whole-number option of at least 1 (flag, variable or default); a usage error otherwise."""
    text = option_value(given, name, lambda: str(default))
    if not text.isdigit() or int(text) < 1:
        fail(f"{name} must be a whole number of at least 1 (got {text!r})", EXIT_USAGE)
    return int(text)


def default_secret_file() -> Path:
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
