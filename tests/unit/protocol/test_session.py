"""protocol.session: the legacy handshake as a transition table (NEW -> INITIALIZING -> READY), what each
state refuses, when the server's own messages may flow, and the log level threshold."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpwrap.config.load import loads
from mcpwrap.protocol.revisions import LATEST_LEGACY, LEGACY_VERSIONS
from mcpwrap.protocol.session import HOLDS, LegacySession, State, level_allows
from mcpwrap.protocol.tools import ProtocolError

CONFIG = loads(b'[server]\nname = "unit"\n[tools.t]\ncommand = ["true"]\n', Path("unit.toml"))


def initialized(version: object = "2025-06-18") -> tuple[LegacySession, dict[str, object]]:
    session = LegacySession()
    result = session.initialize({"protocolVersion": version, "capabilities": {"x": {}}}, CONFIG, lambda rev: {})
    return session, result


def test_before_initialize_only_initialize_and_ping_are_taken() -> None:
    session = LegacySession()
    session.admit("initialize")
    session.admit("ping")
    with pytest.raises(ProtocolError) as refused:
        session.admit("tools/list")
    assert refused.value.code == -32600 and "initialize first" in refused.value.message


def test_initialize_negotiates_and_opens_only_once_initialized() -> None:
    session, result = initialized()
    assert session.state is State.INITIALIZING and session.state in HOLDS and not session.open
    assert result["protocolVersion"] == "2025-06-18" and session.client_capabilities == {"x": {}}
    session.admit("tools/list")
    session.event("notifications/initialized")
    assert session.state is State.READY and session.open


@pytest.mark.parametrize("version", ["1999-01-01", None, 7, "2026-07-28"])
def test_an_unknown_version_is_offered_the_latest_legacy_one_not_refused(version: object) -> None:
    session, result = initialized(version)
    assert session.rev is LATEST_LEGACY and result["protocolVersion"] == LEGACY_VERSIONS[-1]


@pytest.mark.parametrize("then", [[], ["notifications/initialized"]])
def test_a_second_initialize_is_an_error_not_a_reset(then: list[str]) -> None:
    session, _ = initialized()
    for event in then:
        session.event(event)
    before = session.state
    with pytest.raises(ProtocolError) as refused:
        session.admit("initialize")
    assert refused.value.code == -32600 and session.state is before


def test_an_event_the_table_lacks_leaves_the_state_alone() -> None:
    session = LegacySession()
    session.event("notifications/initialized")          # before initialize: ignored
    assert session.state is State.NEW


def test_set_level_takes_only_a_syslog_level_and_level_allows_compares_severity() -> None:
    session = LegacySession()
    session.set_level({"level": "error"})
    assert session.log_level == "error"
    with pytest.raises(ProtocolError) as refused:
        session.set_level({"level": "loud"})
    assert refused.value.code == -32602 and session.log_level == "error"
    assert level_allows("error", "critical") and level_allows("error", "error")
    assert not level_allows("error", "warning") and not level_allows(None, "emergency")
