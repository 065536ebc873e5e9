"""`mcpwrap client-config`: the entry an MCP client's config needs (JSON, Codex CLI's TOML, or the
`claude mcp add` line), to start `serve` (of a tools FILE or of `--tool` options) or reach `serve --http`.

A token read from --token-file is never printed where a client can read it from the environment or
prompt for it; where it cannot (Claude Desktop's bridge, Zed's headers), it is, and stderr says so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcpwrap.cli.common import EXIT_USAGE, UsageError, assignment, fail, note, print_json
from mcpwrap.cli.inline import tools_config

CLIENT_LAYOUTS = ("claude-desktop", "claude-code", "claude-mcp-add", "cursor", "vscode", "windsurf", "zed", "codex",
                  "gemini")
CLIENT_NAMES = {"claude-desktop": "Claude Desktop", "claude-code": "Claude Code", "claude-mcp-add": "Claude Code",
                "cursor": "Cursor", "vscode": "VS Code", "windsurf": "Windsurf", "zed": "Zed", "codex": "Codex CLI",
                "gemini": "Gemini CLI"}
BARE_KEY = r"[A-Za-z0-9_-]+"                                           # a TOML key that needs no quotes
REMOTE_TOKEN_ENV = "MCPWRAP_TOKEN"        # where clients that expand variables in headers find the token
TOKEN_REFERENCE = {"claude-code": f"${{{REMOTE_TOKEN_ENV}}}", "claude-mcp-add": f"${{{REMOTE_TOKEN_ENV}}}",
                   "gemini": f"${{{REMOTE_TOKEN_ENV}}}", "cursor": f"${{env:{REMOTE_TOKEN_ENV}}}",
                   "windsurf": f"${{env:{REMOTE_TOKEN_ENV}}}"}   # each host's documented form of a variable
VSCODE_TOKEN_INPUT = "mcpwrap-token"
HEADER_NAME = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"


def client_config(file: str | None, client: str, name: str | None, env: list[str], pin_path: bool, url: str | None,
                  header: list[str], token_file: str | None, inline: list[str], describe: list[str]) -> None:
    """Print the entry for a served FILE or --tool options (a command the client starts) or for a remote --url."""
    if client not in CLIENT_LAYOUTS:
        fail(f"--client must be one of {', '.join(CLIENT_LAYOUTS)} (got {client!r})", EXIT_USAGE)
    pinned = dict(assignment("--env", text) for text in env)
    if pin_path:
        pinned["PATH"] = os.environ.get("PATH", os.defpath)
    if url is not None and file is None and not inline and not describe:
        remote = _remote_config(client, name or "mcpwrap", url, header, token_file, pinned)
        if isinstance(remote, str):
            sys.stdout.write(remote)  # stdout-ok
        else:
            print_json(remote)
        return
    if url is not None:
        raise UsageError("Give a tools FILE or --tool options (a server the client starts) or --url (a remote one), "
                         "not both.")
    if header or token_file:
        raise UsageError("--header and --token-file go with --url (a served FILE needs no header)")
    tools_config(file, inline, describe)                 # checked as `serve` will load it
    served = ([str(Path(file).resolve())] if file is not None else
              [*(w for spec in inline for w in ("--tool", spec)), *(w for text in describe for w in ("--describe", text))])
    command, args = _self_command()
    entry: dict[str, Any] = {"command": command, "args": [*args, "serve", *served]}
    if pinned:
        entry["env"] = pinned
    key = name or (Path(file).stem if file is not None else "mcpwrap")
    if client == "codex":
        sys.stdout.write(_codex_toml(key, entry))  # stdout-ok: command, args, env
    elif client == "claude-mcp-add":
        sys.stdout.write(_claude_mcp_add(key, entry) + "\n")  # stdout-ok
    else:
        stdio = {"type": "stdio", **entry}
        print_json({"claude-desktop": {"mcpServers": {key: entry}}, "cursor": {"mcpServers": {key: entry}},
                    "windsurf": {"mcpServers": {key: entry}}, "gemini": {"mcpServers": {key: entry}},
                    "zed": {"context_servers": {key: entry}},
                    "claude-code": {"mcpServers": {key: stdio}}, "vscode": {"servers": {key: stdio}}}[client])


def _codex_toml(key: str, fields: dict[str, str | list[str] | dict[str, str]]) -> str:
    """Codex CLI's `~/.codex/config.toml` table `[mcp_servers.NAME]` holding `fields` in order: strings,
    arrays of strings and inline tables of strings (stdio: command, args, env; Streamable HTTP: url,
    bearer_token_env_var, http_headers)."""
    import re

    import orjson

    def string(text: str) -> str:
        return orjson.dumps(text).decode()          # a JSON string is a TOML basic string

    def value(field: str | list[str] | dict[str, str]) -> str:
        if isinstance(field, str):
            return string(field)
        if isinstance(field, list):
            return f"[{', '.join(map(string, field))}]"
        return "{ " + ", ".join(f"{string(k)} = {string(v)}" for k, v in field.items()) + " }"

    table = key if re.fullmatch(BARE_KEY, key) else string(key)
    return "\n".join([f"[mcp_servers.{table}]", *(f"{k} = {value(v)}" for k, v in fields.items() if v)]) + "\n"


def _claude_mcp_add(key: str, entry: dict[str, Any]) -> str:
    """The `claude mcp add` command that registers the server with Claude Code (options before the name)."""
    import shlex

    env = [word for k, v in entry.get("env", {}).items() for word in ("--env", f"{k}={v}")]
    return shlex.join(["claude", "mcp", "add", "--transport", "stdio", *env, key, "--", entry["command"], *entry["args"]])


def _self_command() -> tuple[str, list[str]]:
    """An absolute command that starts this mcpwrap, for client configs."""
    import shutil

    found = shutil.which("mcpwrap")
    if found:
        return str(Path(found).absolute()), []
    return sys.executable, ["-m", "mcpwrap"]


def _remote_config(client: str, key: str, url: str, header: list[str], token_file: str | None,
                   pinned: dict[str, str]) -> dict[str, Any] | str:
    """A client's entry for `serve --http` elsewhere: its own Streamable HTTP where it has one, else a bridge."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--url wants http(s)://HOST[:PORT]/mcp, got {url!r}")
    headers = _headers(header)
    token = None
    if token_file is not None:
        if any(field.lower() == "authorization" for field in headers):
            raise UsageError("--token-file writes the Authorization header: give it or a "
                             "--header 'Authorization: ...', not both")
        token_file = str(Path(token_file).resolve())     # the notes name it wherever they are read
        token = _client_token(Path(token_file))
    if parts.scheme == "http" and parts.hostname not in ("localhost", "127.0.0.1", "::1") and (headers or token):
        note(f"{url} is plain HTTP: the header crosses the network readable; serve with --certfile/--keyfile "
             "or behind a TLS proxy, and give an https:// URL")
    if client == "claude-desktop":
        return {"mcpServers": {key: _desktop_bridge(url, headers, token, token_file, pinned)}}
    if pinned:
        raise UsageError(f"--env and --pin-path set the environment of a server the client starts; "
                         f"{client} connects to --url itself")
    return _http_entry(client, key, url, headers, token_file, token)


def _headers(header: list[str]) -> dict[str, str]:
    """The --header 'Name: value' options, each checked to be one header line."""
    import re

    headers: dict[str, str] = {}
    for text in header:
        field, colon, value = text.partition(":")
        if not colon or not re.fullmatch(HEADER_NAME, field.strip()) or "\r" in value or "\n" in value:
            raise UsageError(f"--header wants 'Name: value', got {text!r}")
        headers[field.strip()] = value.strip()
    return headers


def _http_entry(client: str, key: str, url: str, headers: dict[str, str], token_file: str | None,
                token: str | None) -> dict[str, Any] | str:
    """The entry of a client with Streamable HTTP of its own, in the form its documentation gives; with a
    token, the bearer token is a reference the client resolves (its environment, or VS Code's password
    prompt), never the token, except for Zed, whose headers take no variable."""
    if token is not None and client == "zed":
        headers = {**headers, "Authorization": f"Bearer {token}"}
        note(f"Zed sends its headers as written (no environment variable is expanded in them): the token from "
             f"{token_file} is written into this entry; keep Zed's settings.json private (chmod 600)")
    elif token is not None:
        _token_note(client, str(token_file))
        if client in TOKEN_REFERENCE:
            headers = {**headers, "Authorization": f"Bearer {TOKEN_REFERENCE[client]}"}
        elif client == "vscode":
            headers = {**headers, "Authorization": f"Bearer ${{input:{VSCODE_TOKEN_INPUT}}}"}
    if client == "codex":
        return _codex_toml(key, {"url": url, "bearer_token_env_var": REMOTE_TOKEN_ENV if token else "",
                                 "http_headers": headers})
    if client == "claude-mcp-add":
        return _claude_mcp_add_http(key, url, headers, scoped=token is not None)
    field = {"windsurf": "serverUrl", "gemini": "httpUrl"}.get(client, "url")
    entry: dict[str, Any] = {"type": "http", field: url} if client in ("claude-code", "vscode") else {field: url}
    if headers:
        entry["headers"] = headers
    if client == "vscode":
        inputs = [{"type": "promptString", "id": VSCODE_TOKEN_INPUT, "password": True,
                   "description": f"Bearer token for {key} (from {token_file})"}] if token is not None else []
        return {"servers": {key: entry}, **({"inputs": inputs} if inputs else {})}
    return {"context_servers" if client == "zed" else "mcpServers": {key: entry}}


def _token_note(client: str, token_file: str) -> None:
    """Tell where the client takes the token from, since the entry only refers to it."""
    if client == "vscode":
        note(f"VS Code asks for the token the first time it connects and keeps it in its secret storage: "
             f"paste the last token line of {token_file}")
        return
    scope = (" (the line adds it with --scope project, to .mcp.json, where Claude Code expands ${VAR} in "
             "headers; the file holds the variable, not the token)" if client == "claude-mcp-add" else "")
    note(f"the token is not written here: {CLIENT_NAMES[client]} reads it from {REMOTE_TOKEN_ENV} when it "
         f"starts, e.g. export {REMOTE_TOKEN_ENV}=\"$(grep -v -e '^#' -e '^$' {token_file} | tail -n 1)\"{scope}")


def _claude_mcp_add_http(key: str, url: str, headers: dict[str, str], scoped: bool) -> str:
    """The `claude mcp add --transport http` line; `scoped` writes it to the project's .mcp.json, the file
    whose `${VAR}` in headers Claude Code documents expanding (the quoting keeps the shell from it)."""
    import shlex

    options = [*(["--scope", "project"] if scoped else []),
               *(word for field, value in headers.items() for word in ("--header", f"{field}: {value}"))]
    return shlex.join(["claude", "mcp", "add", "--transport", "http", *options, key, url]) + "\n"


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
    note("Claude Desktop does not connect to a remote server with a header from claude_desktop_config.json (its "
         "Settings > Connectors take a URL with OAuth or no auth): this entry starts the mcp-remote bridge "
         "(npx, Node.js 18 or later)" + ("" if npx else "; npx is not on PATH here, install Node.js"))
    if token is not None:
        note(f"the token from {token_file} is written into this entry's env: keep claude_desktop_config.json "
             "private (chmod 600)")
    return {"command": str(Path(npx).absolute()) if npx else "npx", "args": args,
            **({"env": environment} if environment else {})}


def _client_token(path: Path) -> str:
    """The newest (last) token of a token file, held to the server's rules: the user's own, mode 0600."""
    from mcpwrap.cli import preflight

    return preflight.token_file(path)[-1].decode()
