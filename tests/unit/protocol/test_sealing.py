"""protocol.sealing: a sealed requestState verifies only under the key ring and the `bound` it was sealed
with, carries its claims and a fresh nonce, and any failure is a StateError (attacks: tests/unit/state/test_signing.py)."""

from __future__ import annotations

import pytest

from mcpwrap.protocol.sealing import StateError, digest, seal, unseal


class Ring:
    def __init__(self, *keys: bytes) -> None:
        self.current, self.keys = keys[0], keys

    def verifying_keys(self, now: float) -> tuple[bytes, ...]:
        return self.keys


RING = Ring(b"k" * 32)


def test_claims_come_back_with_a_nonce_of_their_own_and_the_expiry() -> None:
    first, second = seal(RING, {"tool": "t"}, now=100.0, ttl_s=10), seal(RING, {"tool": "t"}, now=100.0, ttl_s=10)
    a, b = unseal(RING, first, now=105.0), unseal(RING, second, now=105.0)
    assert a.claims == b.claims == {"tool": "t"} and a.nonce != b.nonce and a.expires_at == 110.0


def test_the_bound_is_verified_though_the_token_does_not_carry_it() -> None:
    token = seal(RING, {"tool": "t"}, now=0.0, bound="bearer:alice")
    assert unseal(RING, token, now=1.0, bound="bearer:alice").claims == {"tool": "t"}
    assert "alice" not in token
    with pytest.raises(StateError):
        unseal(RING, token, now=1.0, bound="bearer:bob")


def test_a_previous_key_still_verifies_and_an_unknown_one_does_not() -> None:
    token = seal(Ring(b"o" * 32), {}, now=0.0)
    assert unseal(Ring(b"n" * 32, b"o" * 32), token, now=1.0).claims == {}
    with pytest.raises(StateError):
        unseal(RING, token, now=1.0)


def test_digest_is_order_independent_and_value_sensitive() -> None:
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1}) != digest({"a": 1, "b": [2, 1]})
