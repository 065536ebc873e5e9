"""protocol.identity: a bearer token's principal is a stable digest that never contains the token, and
what one principal created is invisible to another (the local CLI sees everything)."""

from __future__ import annotations

from mcpwrap.protocol.identity import ANONYMOUS, LOCAL, LOCAL_USER, bearer, visible


def test_a_bearer_principal_is_stable_distinct_and_not_the_token() -> None:
    token = b"token-of-alice-0123456789"
    alice = bearer(token)
    assert alice == bearer(token) and alice != bearer(b"token-of-bob-0123456789")
    assert token.decode() not in alice.principal and alice.principal.startswith("bearer:")
    assert alice.identified


def test_anonymous_is_the_local_principal_but_tells_nobody_apart() -> None:
    assert ANONYMOUS.principal == LOCAL_USER.principal == LOCAL
    assert LOCAL_USER.identified and not ANONYMOUS.identified


def test_what_one_principal_created_exists_only_for_it() -> None:
    alice, bob = bearer(b"a" * 24).principal, bearer(b"b" * 24).principal
    assert visible(alice, alice) and not visible(alice, bob)
    assert visible(None, LOCAL) and not visible(None, alice)      # an old record is the local user's
    assert visible(alice, None)                                     # the local CLI sees the whole store
