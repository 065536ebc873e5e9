"""`mcpwrap serve`: options resolved, the tools file (or the `--tool` options) loaded, the server run.

An MCP host starts this for every session, so the way to its first answer imports only what the
front needs to give it (`serve.launch`, `serve.front`); the HTTP driver is imported only with --http.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from mcpwrap.cli import preflight
from mcpwrap.cli.common import (EXIT_CONFIG, EXIT_USAGE, UsageError, fail, note, option_value, positive, secret_path,
                                state_path)
from mcpwrap.cli.inline import inline_tools, tools_config

HTTP_ONLY = ("--token-file, --oauth-issuer, --resource-uri, --oauth-scope, --oauth-client-file, --allowed-origin, --insecure-no-auth, "
             "--rate, --certfile, --keyfile, --body-timeout and --send-timeout apply only with --http")


def serve(file: str | None, inline: list[str], describe: list[str], print_toml: bool, state_dir: str | None, secret_file: str | None, log_level: str | None,
          max_calls: str | None, max_tasks: str | None, watch: bool, read_only: bool, only: list[str],
          exclude: list[str], http: str | None, token_file: str | None, allowed_origin: list[str],
          insecure_no_auth: bool, rate: str | None, certfile: str | None, keyfile: str | None,
          body_timeout: str | None, send_timeout: str | None, oauth_issuer: str | None = None,
          resource_uri: str | None = None, oauth_scope: list[str] | None = None, audit: str | None = None,
          oauth_client_file: str | None = None) -> NoReturn:
    """The `serve` command line: the HTTP options checked together, then `serve_command`."""
    from mcpwrap.config.model import OAuthSettings, Toolset

    def names(values: list[str]) -> frozenset[str]:
        return frozenset(n.strip() for v in values for n in v.split(",") if n.strip())

    if print_toml:
        if file is not None or not inline:
            raise UsageError("--print-toml prints the tools file that --tool options stand for: give --tool, no FILE")
        sys.stdout.write(inline_tools(inline, describe))  # stdout-ok: it prints a file, it serves nothing
        raise SystemExit(0)
    remote = None
    if http is None and (token_file or allowed_origin or insecure_no_auth or rate or certfile or keyfile
                         or body_timeout or send_timeout or oauth_issuer or resource_uri or oauth_scope
                         or oauth_client_file):
        raise UsageError(HTTP_ONLY)
    if oauth_issuer is None and (resource_uri or oauth_scope or oauth_client_file):
        raise UsageError("--resource-uri, --oauth-scope and --oauth-client-file go with --oauth-issuer")
    if http is not None:
        _need_hypercorn()
        from mcpwrap.serve import http_gate
        try:
            oauth = OAuthSettings(oauth_issuer, resource_uri, tuple(names(oauth_scope or []))) if oauth_issuer else None
            remote = http_gate.http_options(http, token_file, allowed_origin, insecure_no_auth, rate, certfile, keyfile,
                                            body_timeout, send_timeout, oauth, oauth_client_file)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        preflight.http_files(remote)
    raise SystemExit(serve_command(Path(file) if file else None, state_dir, secret_file, log_level, watch,
                                   max_calls, max_tasks, inline, Toolset(read_only, names(only), names(exclude)), remote,
                                   describe, Path(audit).absolute() if audit else None))


def _need_hypercorn() -> None:
    """`--http` needs the http extra: without it, the command that adds it to this installation."""
    try:
        import hypercorn  # noqa: F401
    except ImportError:
        fail(f"--http needs hypercorn: {install_hint()}", EXIT_USAGE)


def install_hint() -> str:
    """How to add the http extra here: pipx installs (a venv with pipx's metadata) inject it, others pip-install it."""
    prefix = Path(sys.prefix)
    pipx_home = os.environ.get("PIPX_HOME")
    if (prefix / "pipx_metadata.json").exists() or (pipx_home and prefix.parent == Path(pipx_home) / "venvs"):
        return "pipx inject mcpwrap-cli hypercorn (or pipx install --force 'mcpwrap-cli[http]')"
    return "pip install 'mcpwrap-cli[http]'"


def serve_command(file: Path | None, state_dir: str | None, secret_file: str | None, log_level: str | None,
                  watch: bool, max_calls: str | None = None, max_tasks: str | None = None,
                  tools: list[str] | None = None, toolset: Any = None, remote: Any = None,
                  describe: list[str] | None = None, audit: Path | None = None) -> int:
    """Serve `file` (or the inline `tools`) on stdio, or over HTTP with `remote`; the exit status."""
    gc.disable()        # until `common.prepare` freezes them: the imports, the tools file and the core live as long
    from mcpwrap.config.model import Toolset
    from mcpwrap.serve import common, launch   # as the server, and no collection pass over them need delay its first answer

    level = option_value(log_level, "--log-level", lambda: "info")
    if level not in common.LEVELS:
        fail(f"--log-level must be one of {', '.join(common.LEVELS)} (got {level!r})", EXIT_USAGE)
    state = state_path(state_dir)
    _check_paths(state_dir, secret_file)
    calls = positive(max_calls, "--max-calls", common.Options.max_calls)
    running_tasks = positive(max_tasks, "--max-tasks", common.Options.max_tasks)
    toolset = toolset or Toolset()
    options = common.Options(
        secret_file=secret_path(secret_file),
        state_dir=state, watch=watch and file is not None, log_level=level, max_calls=calls, max_tasks=running_tasks,
        toolset=toolset, audit=audit)

    config = tools_config(file, tools or [], describe or [], state / "validated")
    if unknown := toolset.unknown(config):
        raise UsageError(f"--only/--exclude name tools {config.path} does not define: {', '.join(unknown)}")
    config = options.applied(config)
    if not config.tools and (toolset.read_only or toolset.only):
        fail("--read-only/--only leave no tool to serve", EXIT_USAGE)
    if config.audit is not None:
        preflight.audit_file(config.audit.path, "--audit" if audit else "[server] audit")
    if sys.stdin.isatty() and remote is None:
        note(f"serving {len(config.tools)} tool(s) of {file or '--tool'} over stdio, waiting for an MCP client "
             "(an MCP host starts this command itself; to try a tool: mcpwrap call). Ctrl-D ends.")
    try:
        if remote is not None:
            from mcpwrap.serve import http
            _warn_of_this_machine(config)
            return http.run(config, options, remote)
        return launch.run(config, options, lambda: _warn_of_this_machine(config))   # once the first answers are out
    except Exception as exc:              # signing is imported only once a secret is needed: not for the first answer
        from mcpwrap.state.signing import SecretFileError

        if not isinstance(exc, SecretFileError):
            raise
        fail(str(exc), EXIT_CONFIG)


def _warn_of_this_machine(config: Any) -> None:
    """One stderr line for each thing this machine lacks that a served command needs (a program
    not on the PATH the host gave, a missing cwd, a sandbox that cannot read its interpreter): the
    server still starts, and the calls that need it fail, saying why."""
    from mcpwrap.cli.files import as_warning
    from mcpwrap.config.machine import machine_problems

    for problem in machine_problems(config):
        print(as_warning(problem), file=sys.stderr)


def _check_paths(state_dir: str | None, secret_file: str | None) -> None:
    """The state directory and secret file the user named (option or variable), checked before serving."""
    if (option := preflight.named(state_dir, "--state-dir", "MCPWRAP_STATE_DIR")) is not None:
        preflight.writable_dir(state_path(state_dir), option)
    if (option := preflight.named(secret_file, "--secret-file", "MCPWRAP_SECRET_FILE")) is not None:
        preflight.secret_file(secret_path(secret_file), option)
