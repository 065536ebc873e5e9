"""The legacy handshake session (2024-11-05 .. 2025-11-25) as an explicit transition table.

One stdio process holds at most one legacy session. `initialize` negotiates
the revision (a result, never an error); `notifications/initialized` opens
the session for server-initiated requests and notifications: until then
(`HOLDS`) they are held, and sent when it arrives. A second `initialize` is an
error, not a reset.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcpwrap import __version__
from mcpwrap.config.model import Config
from mcpwrap.protocol.revisions import LATEST_LEGACY, Revision, negotiate
from mcpwrap.protocol.tools import ProtocolError

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LOG_LEVEL = "warning"    # until logging/setLevel: tool stderr (info) is not forwarded


class State(enum.Enum):
    NEW = "new"                       # nothing but initialize and ping
    INITIALIZING = "initializing"     # answered initialize; no notifications until initialized
    READY = "ready"


# (state, event) -> next state. An event missing here leaves the state alone.
TRANSITIONS: dict[tuple[State, str], State] = {
    (State.NEW, "initialize"): State.INITIALIZING,
    (State.INITIALIZING, "notifications/initialized"): State.READY,
}
_AGAIN = "already initialized: a second initialize is not allowed"
# state -> which requests it refuses, and why (answered -32600).
REFUSES: dict[State, tuple[Callable[[str], bool], str]] = {
    State.NEW: (lambda method: method not in ("initialize", "ping"), "not initialized: send initialize first"),
    State.INITIALIZING: (lambda method: method == "initialize", _AGAIN),
    State.READY: (lambda method: method == "initialize", _AGAIN),
}

# States in which the server's own requests and notifications (other than logging) wait: lifecycle, "The
# server SHOULD NOT send requests other than pings and logging before receiving the initialized notification".
HOLDS = frozenset({State.NEW, State.INITIALIZING})
Held = tuple[str, Any]     # ("ask", elicitation id) or ("progress", request id): a later one replaces an earlier


@dataclass
class LegacySession:
    """The one legacy session of a process: its state, negotiated revision and client facts."""
    state: State = State.NEW
    rev: Revision = LATEST_LEGACY
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str = DEFAULT_LOG_LEVEL
    held: dict[Held, dict[str, Any]] = field(default_factory=dict)   # sent once initialized (`Core._to_client`)

    def admit(self, method: str) -> None:
        """Raise the legacy error for a request this state does not take."""
        refuses, reason = REFUSES[self.state]
        if refuses(method):
            raise ProtocolError(-32600, reason)

    def event(self, name: str) -> None:
        self.state = TRANSITIONS.get((self.state, name), self.state)

    @property
    def open(self) -> bool:
        """Whether server-initiated notifications (other than logs) may be sent."""
        return self.state is State.READY

    def initialize(self, params: dict[str, Any], config: Config,
                   capabilities: Callable[[Revision], dict[str, Any]]) -> dict[str, Any]:
        self.rev = negotiate(params.get("protocolVersion"))
        caps = params.get("capabilities")
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        self.event("initialize")
        info: dict[str, Any] = {"name": config.name, "version": config.version}
        if self.rev.has("implementation.title"):
            info["title"] = config.title or config.name
        if self.rev.has("implementation.description"):
            info["description"] = f"served by mcpwrap {__version__}"
        result: dict[str, Any] = {"protocolVersion": self.rev.version, "capabilities": capabilities(self.rev),
                                  "serverInfo": info}
        if config.instructions:
            result["instructions"] = config.instructions
        return result

    def set_level(self, params: dict[str, Any]) -> None:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise ProtocolError(-32602, f"logging/setLevel needs a level, one of: {', '.join(LOG_LEVELS)}")
        self.log_level = level


def level_allows(threshold: str | None, level: str) -> bool:
    return threshold is not None and LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)
