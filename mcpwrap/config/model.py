"""The values a tools file becomes: frozen dataclasses, every default applied.

Pure data: no I/O, and nothing of mcpwrap imported. `config.load` reads a file into these (and names
them, so `load.Tool` and the like stay valid); everything after the loader reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

SUCCESS = frozenset({0})                 # the exit codes of a tool that names none
# The grammars of a tools file's text that the loader checks and the decisions then apply: a command's
# or a message's `{name}`, and RFC 6570 as far as mcpwrap uses it, {name} (one path segment) and
# {?a,b} (query parameters).
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
TEMPLATE_EXPR = re.compile(r"\{(\??)([A-Za-z_][A-Za-z0-9_]*(?:,[A-Za-z_][A-Za-z0-9_]*)*)\}")


def string_consts(variants: Any) -> bool:
    """A oneOf/anyOf of string `const`s (with titles): the titled choices of an elicitation form."""
    return isinstance(variants, list) and bool(variants) and all(
        isinstance(v, dict) and isinstance(v.get("const"), str) for v in variants)


@dataclass(frozen=True)
class Problem:
    """A problem in a tools file, where a human should look for it."""
    path: Path
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


@dataclass(frozen=True)
class PathRule:
    """A path argument: resolved (symlinks, '..') against the tool's cwd before anything runs."""
    within: tuple[str, ...] = ()       # absolute roots it must stay under (none: anywhere)
    must_exist: bool = False
    kind: str | None = None            # "file" | "dir"


@dataclass(frozen=True)
class Sandbox:
    """What a tool's processes may touch (Landlock); paths absolute, the system baseline included."""
    read: tuple[str, ...]
    write: tuple[str, ...]
    network: bool
    required: bool                     # False: run even where the kernel cannot enforce all of it


@dataclass(frozen=True)
class Limits:
    """Resource limits for one call's processes; None is unlimited."""
    memory: int | None = None          # bytes
    cpu_s: float | None = None
    processes: int | None = None
    open_files: int | None = None
    file_size: int | None = None       # bytes
    required: bool = True


@dataclass(frozen=True)
class Arg:
    """One `args.NAME` table: a JSON Schema fragment and what mcpwrap does with it."""
    name: str
    schema: Mapping[str, Any]          # the JSON Schema fragment, mcpwrap keys removed
    required: bool
    flag: str | None = None            # boolean rendered as this flag when true
    elicit: bool = False               # ask the user when missing
    path: PathRule | None = None
    secret: bool = False               # its value never reaches the audit log (nor the argv recorded there)

    @property
    def env_name(self) -> str:
        return "MCP_ARG_" + self.name.upper()


NO_DEFAULT: Any = object()              # an ask rule without `default`: a caller that cannot be asked ends the call


@dataclass(frozen=True)
class AskRule:
    """One `ask` entry: what a running command's question looks like and how its answer is written back."""
    prompt: re.Pattern[str]            # searched in the output's last, unfinished line once the command is quiet
    message: str                       # the question the person sees
    answer: Mapping[str, Any]          # a primitive elicitation schema (boolean, string, enum, number, integer)
    send: str | Mapping[str, str]      # "{value}\n", or the bytes for each answer ("true"/"false", an enum value)
    default: Any = NO_DEFAULT          # the answer when nobody can be asked
    show: int = 0                      # last lines of `show_stream` quoted in the question
    show_stream: str = "stdout"        # the stream `show` quotes: "stdout" or "stderr"


@dataclass(frozen=True)
class Tool:
    """One `[tools.NAME]` table, every default applied: what the runner needs to run it."""
    name: str
    description: str
    args: tuple[Arg, ...]
    command: tuple[str | tuple[str, ...], ...] | None   # a tuple in it is an optional group
    shell: str | None
    cwd: Path
    env: Mapping[str, str]
    timeout_s: float
    max_output: int
    output: str                        # "text" | "json" | "mcp" | "image/..." | "audio/..." ("blob": resources)
    title: str | None = None
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    stdin_arg: str | None = None
    success_codes: frozenset[int] = SUCCESS
    protocol_error_codes: frozenset[int] = frozenset()   # exit statuses that are a JSON-RPC error, not a result
    progress: re.Pattern[str] | None = None
    concurrency: int | None = None
    confirm: str | None = None
    task: str = "never"
    task_ttl_s: float = 3600.0
    task_poll_s: float = 1.0
    task_asks: bool = False            # a tasks-extension task asks for missing arguments itself (protocol/asking.py)
    kill_grace_s: float = 2.0
    sandbox: Sandbox | None = None
    limits: Limits | None = None
    env_inherit: bool | tuple[str, ...] = True   # the server's environment: all, none (PATH only), or these names
    allow: tuple[str, ...] | None = None    # who may use it over HTTP (`protocol.access`); None: anyone
    ask: tuple[AskRule, ...] = ()      # the questions it may ask while it runs (it gets a stdin pipe then)
    ask_timeout_s: float = 300.0       # one question unanswered this long ends the call
    ask_quiet_s: float = 0.2           # output still this long after a prompt makes it a question
    tty: bool = False                  # stdin and stdout a pseudo-terminal (programs that prompt only on one)

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        """The published inputSchema. An argument elicited when missing is not `required` there:
        a client that follows the schema must be able to leave it out, or it is never asked."""
        return self._schema([a.name for a in self.args if a.required and not a.elicit])

    @cached_property
    def call_schema(self) -> dict[str, Any]:
        """What the arguments must satisfy when the call runs: elicited ones are required by then."""
        return self._schema([a.name for a in self.args if a.required])

    def _schema(self, required: list[str]) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {a.name: dict(a.schema) for a in self.args},
            "additionalProperties": False,
        }
        if required:
            schema["required"] = required
        return schema

    def arg(self, name: str) -> Arg | None:
        return next((a for a in self.args if a.name == name), None)


@dataclass(frozen=True)
class Spool:
    """Where output beyond max_output is kept: a disk quota per tools file (0: not kept) and a lifetime."""
    quota: int = 256 * 1024 * 1024
    ttl_s: float = 3600.0


@dataclass(frozen=True)
class Audit:
    """`[server] audit`: where the audit trail goes, and what a failure to write it means."""
    path: Path                         # absolute (relative to the tools file's directory in the file)
    required: bool = False             # a call whose `call.start` cannot be written is refused, not run
    max_bytes: int | None = None       # rotate past this size (FILE -> FILE.1); None: never (logrotate may)


@dataclass(frozen=True)
class Resource:
    """A file (`path`) or a command's output (`tool`, whose arguments are the template's variables)."""
    name: str
    uri: str | None                    # None for a template resource
    uri_template: str | None
    mime_type: str | None
    title: str | None = None
    description: str | None = None
    path: Path | None = None
    tool: Tool | None = None
    blob: bool = False                 # command output as base64 rather than text
    cache_ttl_ms: int = 0
    cache_scope: str = "private"
    completers: Mapping[str, Tool] = field(default_factory=dict)   # arg -> its `complete` command
    allow: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PromptArg:
    """A prompt argument (prompt arguments are strings); absent, it is its `default`, else empty."""
    name: str
    required: bool
    title: str | None = None
    description: str | None = None
    enum: tuple[str, ...] | None = None
    examples: tuple[str, ...] = ()
    complete: Tool | None = None       # its `complete` command
    default: str | None = None


@dataclass(frozen=True)
class PromptMessage:
    """One message: text with {name} substituted, an embedded resource, or a command's output (text, or the
    image or audio block its `tool.output` names)."""
    role: str
    text: str | None = None
    resource: str | None = None
    tool: Tool | None = None


@dataclass(frozen=True)
class Prompt:
    """A `[prompts.NAME]` table: its arguments and messages."""
    name: str
    args: tuple[PromptArg, ...]
    messages: tuple[PromptMessage, ...]
    title: str | None = None
    description: str | None = None
    allow: tuple[str, ...] | None = None

    def arg(self, name: str) -> PromptArg | None:
        return next((a for a in self.args if a.name == name), None)


@dataclass(frozen=True)
class OAuthSettings:
    """`[server] oauth_issuer`, `resource_uri` and `oauth_scopes`: the OAuth resource server's settings."""
    issuer: str
    resource: str | None = None        # the canonical URI tokens must name in `aud` (None: from --http)
    scopes: tuple[str, ...] = ()       # every access token must carry these (else 403 insufficient_scope)


@dataclass(frozen=True)
class Config:
    """A whole tools file, checked: what a server serves until the next reload."""
    path: Path
    name: str
    version: str
    instructions: str | None
    title: str | None
    tools: tuple[Tool, ...]
    digest: str                        # SHA-256 of the file's bytes: binds requestState and tasks
    resources: tuple[Resource, ...] = ()
    prompts: tuple[Prompt, ...] = ()
    spool: Spool = field(default_factory=lambda: Spool())
    oauth: OAuthSettings | None = None
    audit: Audit | None = None

    @cached_property
    def restricted(self) -> bool:
        """Some tool, resource or prompt has an `allow` list: callers over HTTP may see less than all."""
        return any(item.allow is not None for items in (self.tools, self.resources, self.prompts) for item in items)

    @cached_property
    def _by_name(self) -> dict[str, Tool]:
        return {t.name: t for t in self.tools}

    def tool(self, name: str) -> Tool | None:
        """O(1): a call to the last of 10,000 tools costs what a call to the first does."""
        return self._by_name.get(name)

    def prompt(self, name: str) -> Prompt | None:
        return next((p for p in self.prompts if p.name == name), None)


@dataclass(frozen=True)
class Toolset:
    """Which of the file's tools a server exposes (`serve --read-only/--only/--exclude`)."""
    read_only: bool = False
    only: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()

    def unknown(self, config: Config) -> list[str]:
        names = {t.name for t in config.tools}
        return sorted((self.only | self.exclude) - names)

    def apply(self, config: Config) -> Config:
        if self == Toolset():
            return config                   # all of them, as loaded (and without a pass over 10,000)
        return replace(config, tools=tuple(
            t for t in config.tools
            if (not self.only or t.name in self.only) and t.name not in self.exclude
            and (not self.read_only or t.annotations.get("readOnlyHint") is True)))
