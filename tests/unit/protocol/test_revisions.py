"""protocol.revisions: what each revision has, as data; negotiation; which capability declares a method."""

from __future__ import annotations

from mcpwrap.protocol.revisions import (
    LATEST_LEGACY,
    LEGACY_VERSIONS,
    MODERN,
    MODERN_ONLY_METHODS,
    REVISIONS,
    declared,
    negotiate,
)


def test_a_feature_is_had_from_its_first_revision_on() -> None:
    assert [REVISIONS[v].has("tool.title") for v in LEGACY_VERSIONS] == [False, False, True, True]
    assert MODERN.has("tool.title")


def test_a_dropped_feature_is_had_only_within_its_range() -> None:
    assert [REVISIONS[v].has("jsonrpc.batch") for v in LEGACY_VERSIONS] == [False, True, False, False]
    assert not MODERN.has("jsonrpc.batch") and not MODERN.has("legacy") and MODERN.modern
    assert all(REVISIONS[v].has("legacy") and not REVISIONS[v].modern for v in LEGACY_VERSIONS)


def test_the_resource_not_found_code_follows_the_revision() -> None:
    assert LATEST_LEGACY.resource_not_found == -32002 and MODERN.resource_not_found == -32602


def test_negotiate_echoes_a_legacy_version_and_offers_the_latest_otherwise() -> None:
    assert all(negotiate(v) is REVISIONS[v] for v in LEGACY_VERSIONS)
    assert negotiate("2026-07-28") is LATEST_LEGACY and negotiate(None) is LATEST_LEGACY


def test_modern_only_methods_are_served_by_no_legacy_revision() -> None:
    assert "server/discover" in MODERN_ONLY_METHODS and "tools/call" not in MODERN_ONLY_METHODS
    assert not any(m in REVISIONS[v].methods for v in LEGACY_VERSIONS for m in MODERN_ONLY_METHODS)


def test_a_method_is_declared_only_by_its_capability() -> None:
    assert declared("ping", {}) and not declared("tools/call", {}) and declared("tools/call", {"tools": {}})
    assert not declared("prompts/get", {}) and declared("prompts/get", {"prompts": {}})
    assert not declared("resources/subscribe", {"resources": {}})
    assert declared("resources/subscribe", {"resources": {"subscribe": True}})
