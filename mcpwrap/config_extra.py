"""The classes of what a tools file may have and most files do not, and of its problems.

`config` makes them on first use (`config.Sandbox` and the like still name them there): creating
a dataclass costs a quarter to half a millisecond, and a plain file's `serve` gives its first answer
without any of these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from mcpwrap.config import Tool


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
    completers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # arg -> argv of `complete`


@dataclass(frozen=True)
class PromptArg:
    """A prompt argument (prompt arguments are strings)."""
    name: str
    required: bool
    title: str | None = None
    description: str | None = None
    enum: tuple[str, ...] | None = None
    examples: tuple[str, ...] = ()
    complete: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PromptMessage:
    """One message: text with {name} substituted, an embedded resource, or a command's output."""
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

    def arg(self, name: str) -> PromptArg | None:
        return next((a for a in self.args if a.name == name), None)
