"""Path arguments resolved against the filesystem: symlinks and '..' followed, checked against
their `within` roots, `must_exist` and `kind`. The command receives the resolved absolute path, so
what was checked is what runs.

This is the only I/O of deciding a call, and it happens once per decision: the driver performs
the core's `ResolvePaths` (`serve`), the effects place a resource's or prompt's command arguments,
`mcpwrap call` places its own; `run.process.run` takes the arguments as placed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mcpwrap.config.model import PathRule, Tool
from mcpwrap.protocol.argv import with_defaults


def _confined(name: str, value: str, rule: PathRule, cwd: str) -> tuple[str, str | None]:
    """The resolved path, and why it is refused (None when it is fine)."""
    if "\x00" in value or not value:
        return value, f"{name}: a path must be non-empty and hold no NUL byte"
    real = os.path.realpath(os.path.join(cwd, value))
    roots = [os.path.realpath(root) for root in rule.within]
    if roots and not any(os.path.commonpath([real, root]) == root for root in roots):
        return real, (f"{name}: {value!r} resolves to {real}, outside the allowed "
                      f"{'root' if len(roots) == 1 else 'roots'} {', '.join(roots)}")
    if rule.must_exist and not os.path.exists(real):
        return real, f"{name}: {value!r} does not exist"
    if rule.kind == "file" and os.path.exists(real) and not os.path.isfile(real):
        return real, f"{name}: {value!r} is not a regular file"
    if rule.kind == "dir" and os.path.exists(real) and not os.path.isdir(real):
        return real, f"{name}: {value!r} is not a directory"
    return real, None


def resolve_paths(tool: Tool, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The arguments with every path argument resolved, and the reasons any is refused."""
    resolved = dict(arguments)
    problems: list[str] = []
    for spec in tool.args:
        if spec.path is None or spec.name not in arguments:
            continue
        value = arguments[spec.name]
        items = value if isinstance(value, list) else [value]
        checked = [_confined(spec.name, item, spec.path, str(tool.cwd)) if isinstance(item, str) else (item, None)
                   for item in items]
        problems += [why for _, why in checked if why]
        paths = [path for path, _ in checked]
        resolved[spec.name] = paths if isinstance(value, list) else paths[0]
    return resolved, problems


def place(tool: Tool, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The arguments as the command receives them, defaults filled in and paths resolved, and the
    reasons any is refused: for a caller that decides on its own (a resource's or prompt's command)."""
    return resolve_paths(tool, with_defaults(tool, arguments))
