"""What each MCP revision has, as data: features, served methods, error codes.

Handlers ask `rev.has("tool.title")` or `method in rev.methods`; no code
outside this module compares version strings. Feature names are the wire
field or behaviour they gate, so a grep for one finds both table and use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)

# feature -> first revision that has it (all later revisions keep it).
_FIRST: dict[str, str] = {
    "tool.annotations": "2025-03-26",
    "content.audio": "2025-03-26",
    "progress.message": "2025-03-26",
    "capability.completions": "2025-03-26",
    "tool.title": "2025-06-18",
    "tool.outputSchema": "2025-06-18",
    "result.structuredContent": "2025-06-18",
    "content.resource_link": "2025-06-18",
    "resource.title": "2025-06-18",       # title on Resource, ResourceTemplate, Prompt, PromptArgument
    "implementation.title": "2025-06-18",
    "elicitation": "2025-06-18",
    "elicitation.enum_names": "2025-06-18",    # enum + enumNames (legacy titles; 2025-11-25 keeps it, deprecated)
    "elicitation.defaults": "2025-11-25",
    "elicitation.titled_enum": "2025-11-25",   # oneOf [{const, title}]
    "elicitation.multiselect": "2025-11-25",   # type array: items.enum, or items.anyOf [{const, title}]
    "implementation.description": "2025-11-25",
    "error.id_optional": "2025-11-25",
    "invalid_arguments.as_result": "2025-11-25",
    "modern": "2026-07-28",
    "result.cache_hints": "2026-07-28",        # ttlMs and cacheScope on list (and read) results
    "request.extensions": "2026-07-28",        # a request declares the extensions it uses (EXTENSION_METHODS)
    "structured.any_json": "2026-07-28",
}
# features a later revision dropped: feature -> (first, last)
_RANGES: dict[str, tuple[str, str]] = {
    "jsonrpc.batch": ("2025-03-26", "2025-03-26"),
    "tasks.core": ("2025-11-25", "2025-11-25"),
    "tool.execution": ("2025-11-25", "2025-11-25"),
    "elicitation.server_request": ("2025-06-18", "2025-11-25"),
    "legacy": ("2024-11-05", "2025-11-25"),
    "error.resource_not_found": ("2024-11-05", "2025-11-25"),   # -32002; 2026 says -32602
    "resources.subscribe": ("2024-11-05", "2025-11-25"),        # 2026: a listen filter instead
}

CONTENT_METHODS = frozenset({"resources/list", "resources/templates/list", "resources/read", "prompts/list",
                             "prompts/get", "completion/complete"})
LEGACY_METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call", "logging/setLevel",
                            "resources/subscribe", "resources/unsubscribe"}) | CONTENT_METHODS
CORE_TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
MODERN_METHODS = frozenset({"server/discover", "tools/list", "tools/call", "subscriptions/listen"}) | CONTENT_METHODS
EXTENSION_TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
# Methods no legacy revision has: such a request is modern even when its _meta envelope is missing.
MODERN_ONLY_METHODS = (MODERN_METHODS | EXTENSION_TASK_METHODS) - LEGACY_METHODS - CORE_TASK_METHODS
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
# extension -> the methods it adds: served where the revision has "request.extensions", and only to a
# request that declares the extension (-32021 otherwise).
EXTENSION_METHODS: dict[str, frozenset[str]] = {TASKS_EXTENSION: EXTENSION_TASK_METHODS}

# capability (its path in the capabilities object the server sends) -> the methods it declares. A
# method named here is served only when the capabilities in force have one of its paths: the ones
# `Core.capabilities` builds for the request's revision, so what is not declared is -32601.
CAPABILITY_METHODS: dict[tuple[str, ...], frozenset[str]] = {
    ("tools",): frozenset({"tools/list", "tools/call"}),
    ("logging",): frozenset({"logging/setLevel"}),
    ("prompts",): frozenset({"prompts/list", "prompts/get"}),
    ("resources",): frozenset({"resources/list", "resources/templates/list", "resources/read"}),
    ("resources", "subscribe"): frozenset({"resources/subscribe", "resources/unsubscribe"}),
    ("completions",): frozenset({"completion/complete"}),
    ("tasks",): frozenset({"tasks/get", "tasks/result"}),
    ("tasks", "list"): frozenset({"tasks/list"}),
    ("tasks", "cancel"): frozenset({"tasks/cancel"}),
    ("extensions", TASKS_EXTENSION): EXTENSION_TASK_METHODS,
}


def declared(method: str, capabilities: Mapping[str, Any]) -> bool:
    """Whether `capabilities` declare `method` (one no capability gates, like ping, always is)."""
    paths = [path for path, methods in CAPABILITY_METHODS.items() if method in methods]
    return not paths or any(_has(capabilities, path) for path in paths)


def _has(capabilities: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    node: Any = capabilities
    for key in path:
        if not isinstance(node, Mapping) or key not in node or node[key] is False:
            return False
        node = node[key]
    return True


# JSON-RPC error codes mcpwrap may send, per era (2026 adds -32020..-32022, drops -32002/-32042).
_BASE_CODES = frozenset({-32700, -32600, -32601, -32602, -32603})
LEGACY_CODES = _BASE_CODES | {-32002}
MODERN_CODES = _BASE_CODES | {-32021, -32022}


@dataclass(frozen=True)
class Revision:
    """One protocol revision: the features, methods and error codes it defines."""
    version: str
    features: frozenset[str]
    methods: frozenset[str]
    error_codes: frozenset[int]

    def has(self, feature: str) -> bool:
        return feature in self.features

    @property
    def resource_not_found(self) -> int:
        return -32002 if self.has("error.resource_not_found") else -32602

    @property
    def modern(self) -> bool:
        return "modern" in self.features


def _build(version: str) -> Revision:
    features = {f for f, first in _FIRST.items() if version >= first}
    features -= {f for f in _RANGES}
    features |= {f for f, (first, last) in _RANGES.items() if first <= version <= last}
    modern = "modern" in features
    methods = MODERN_METHODS if modern else LEGACY_METHODS | (
        CORE_TASK_METHODS if "tasks.core" in features else frozenset())
    return Revision(version, frozenset(features), methods, MODERN_CODES if modern else LEGACY_CODES)


REVISIONS: dict[str, Revision] = {v: _build(v) for v in LEGACY_VERSIONS + MODERN_VERSIONS}
LATEST_LEGACY = REVISIONS[LEGACY_VERSIONS[-1]]
MODERN = REVISIONS[MODERN_VERSIONS[-1]]
ALL_VERSIONS = sorted(REVISIONS, reverse=True)


def negotiate(requested: object) -> Revision:
    """Legacy initialize: echo a supported version, else offer our latest legacy one."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return REVISIONS[requested]
    return LATEST_LEGACY
