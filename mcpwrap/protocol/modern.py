"""2026-07-28 requests: per-request `_meta` checks, discover, result stamping, listens.

Nothing here remembers a client between requests: capabilities, log level and
progress token come from the request being served. The only state is the set
of open `subscriptions/listen` streams, keyed by the listen request's id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcpwrap import __version__
from mcpwrap.config.model import Config
from mcpwrap.protocol.revisions import ALL_VERSIONS, MODERN_ONLY_METHODS, MODERN_VERSIONS, REVISIONS, Revision
from mcpwrap.protocol.session import LOG_LEVELS
from mcpwrap.protocol.tools import ProtocolError

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
CACHE_TTL_MS = 60_000           # the tools file can change: clients re-check within a minute
ENVELOPE_KEYS = (VERSION_KEY, CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY)   # only a modern request has these
LISTEN_FILTERS = ("toolsListChanged", "resourcesListChanged", "promptsListChanged")   # the lists a reload changes


def is_modern(method: str, params: Mapping[str, Any]) -> bool:
    """Modern by its _meta (a version, or the client keys only a modern request carries) or by a
    method no legacy revision has; `read_meta` then rejects a missing envelope with -32602."""
    meta = params.get("_meta")
    envelope = isinstance(meta, dict) and not meta.keys().isdisjoint(ENVELOPE_KEYS)
    return envelope or method in MODERN_ONLY_METHODS


@dataclass(frozen=True)
class ModernMeta:
    """What a modern request's `_meta` says: revision, capabilities, log level, progress token."""
    rev: Revision
    capabilities: dict[str, Any]
    log_level: str | None
    progress_token: str | int | None


def read_meta(params: Mapping[str, Any]) -> ModernMeta:
    """Check `_meta` in the spec's order: version, then required fields, then optional ones."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or VERSION_KEY not in meta:
        raise ProtocolError(-32602, f"Missing required _meta field {VERSION_KEY}")
    version = meta[VERSION_KEY]
    if not isinstance(version, str):
        raise ProtocolError(-32602, f"_meta {VERSION_KEY} must be a string")
    if version not in MODERN_VERSIONS:
        raise ProtocolError(-32022, "Unsupported protocol version",
                            {"supported": list(ALL_VERSIONS), "requested": version})
    caps = meta.get(CAPABILITIES_KEY)
    if not isinstance(caps, dict):
        raise ProtocolError(-32602, f"Missing required _meta field {CAPABILITIES_KEY}"
                            if caps is None else f"_meta {CAPABILITIES_KEY} must be an object")
    level = meta.get(LOG_LEVEL_KEY)
    if level is not None and level not in LOG_LEVELS:
        raise ProtocolError(-32602, f"_meta {LOG_LEVEL_KEY} must be one of: {', '.join(LOG_LEVELS)}")
    token = meta.get("progressToken")
    if token is not None and (isinstance(token, bool) or not isinstance(token, (str, int))):
        raise ProtocolError(-32602, "_meta progressToken must be a string or an integer")
    return ModernMeta(REVISIONS[version], caps, level, token)


def server_info(config: Config) -> dict[str, Any]:
    return {"name": config.name, "version": config.version, "title": config.title or config.name,
            "description": f"served by mcpwrap {__version__}"}


def stamp(result: dict[str, Any], config: Config, result_type: str = "complete") -> dict[str, Any]:
    """Every modern result carries resultType and serverInfo in _meta."""
    meta = dict(result.get("_meta", {}))
    meta[SERVER_INFO_KEY] = server_info(config)
    return {**result, "resultType": result_type, "_meta": meta}


def cacheable(result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "ttlMs": CACHE_TTL_MS, "cacheScope": "public"}


def discover(config: Config, capabilities: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"supportedVersions": list(ALL_VERSIONS), "capabilities": capabilities}
    if config.instructions:
        result["instructions"] = config.instructions
    return cacheable(result)


def listen_filter(params: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a listen filter mcpwrap honours (echoed in the acknowledgement)."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise ProtocolError(-32602, "subscriptions/listen needs a 'notifications' filter object")
    return {name: True for name in LISTEN_FILTERS if wanted.get(name) is True}


def tagged(method: str, listen_id: str | int, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method,
            "params": {**(params or {}), "_meta": {SUBSCRIPTION_KEY: listen_id}}}
