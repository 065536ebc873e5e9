"""Tests of the requestState tokens (mcpwrap.protocol.sealing) and of the shared secret file and the
nonce ledger they rely on (mcpwrap.state.signing).

No sleeps: time is the ``now`` argument. The multi-process test waits on pipes
with bounded timeouts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stat
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpwrap.protocol.sealing import DEFAULT_STATE_TTL_S, StateError, digest, seal, unseal
from mcpwrap.state.signing import (
    CLOCK_SKEW_S,
    MIN_KEY_BYTES,
    ROTATION_GRACE_S,
    SWEEP_INTERVAL_S,
    Keyring,
    LedgerError,
    NonceLedger,
    SecretFileError,
    default_secret_path,
    ensure_secret,
    init_secret,
    load_secret,
    rotate_secret,
)

T0 = 1_700_000_000.0
KR = Keyring(b"k" * 32)
OTHER = Keyring(b"o" * 32)
CLAIMS = {"method": "tools/call", "tool": "deploy", "args": digest({"env": "prod"}), "answers": {}}
TOKEN = seal(KR, CLAIMS, T0)
B64URL_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def reject(keyring: Keyring, token: str, now: float = T0) -> StateError:
    with pytest.raises(StateError) as info:
        unseal(keyring, token, now)
    assert str(info.value) == "invalid or expired requestState"
    return info.value


# --- tokens ----------------------------------------------------------------


def test_round_trip() -> None:
    assert TOKEN.startswith("v1.") and TOKEN.count(".") == 2
    assert unseal(KR, TOKEN, T0 + 1).claims == CLAIMS


def test_nonce_makes_every_token_distinct() -> None:
    assert seal(KR, CLAIMS, T0) != seal(KR, CLAIMS, T0)


def test_reserved_claims_refused() -> None:
    with pytest.raises(ValueError):
        seal(KR, {"exp": 1}, T0)


def test_expiry_boundary() -> None:
    assert unseal(KR, TOKEN, T0 + DEFAULT_STATE_TTL_S - 0.001).claims == CLAIMS
    assert "expired" in reject(KR, TOKEN, T0 + DEFAULT_STATE_TTL_S).reason
    assert "expired" in reject(KR, seal(KR, CLAIMS, T0, ttl_s=5), T0 + 6).reason


def test_other_secret_rejected() -> None:
    assert "signature" in reject(OTHER, TOKEN).reason


def _flip(token: str, index: int) -> str:
    raw = bytearray(token.encode("ascii"))
    raw[index] ^= 0x01
    return raw.decode("latin-1")


def test_flipped_byte_in_payload_and_in_mac() -> None:
    _, payload, mac = TOKEN.split(".")
    assert "signature" in reject(KR, _flip(TOKEN, 3 + len(payload) // 2)).reason
    reject(KR, _flip(TOKEN, len(TOKEN) - len(mac) // 2))
    reject(KR, _flip(TOKEN, len(TOKEN) - 1))  # last char: also covers non-canonical base64


def test_every_substitution_by_a_token_char_rejected() -> None:
    """Exhaustive over positions x the alphabet a real token is made of."""
    for i, original in enumerate(TOKEN):
        for c in B64URL_CHARS + ".":
            if c != original:
                reject(KR, TOKEN[:i] + c + TOKEN[i + 1 :])


@settings(max_examples=500)
@given(data=st.data())
def test_any_single_byte_change_rejected(data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(TOKEN) - 1))
    byte = st.one_of(st.sampled_from(B64URL_CHARS + ".="), st.integers(0, 255).map(chr))
    c = data.draw(byte.filter(lambda c: c != TOKEN[i]))
    reject(KR, TOKEN[:i] + c + TOKEN[i + 1 :])


def test_truncated_extended_and_restructured_rejected() -> None:
    for bad in (TOKEN[:-1], TOKEN + "A", TOKEN + ".", "." + TOKEN, TOKEN.replace("v1.", "v2.")):
        reject(KR, bad)
    _, payload, mac = TOKEN.split(".")
    reject(KR, f"v1.{payload}={mac}")
    reject(KR, f"v1.{payload}.{mac}==")
    reject(KR, f"v1.{payload}.{mac[:-4]}")


def test_oversized_token_rejected_before_work() -> None:
    assert "longer" in reject(KR, "v1." + "A" * (64 * 1024) + ".AAAA").reason


def test_non_string_rejected() -> None:
    for bad in (None, b"v1.a.b", 3, ["v1"], {"a": 1}):
        reject(KR, bad)  # type: ignore[arg-type]


def _sign_raw(keyring: Keyring, payload: bytes) -> str:
    """A correctly MACed token around an arbitrary payload: the checks after the MAC."""
    p64 = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
    mac = hmac.new(keyring.current, f"v1.{p64}".encode(), hashlib.sha256).digest()
    return f"v1.{p64}." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "payload",
    [
        b"not json", b"[1,2]", b'"s"', b"{}", b'{"exp":true,"nonce":"n"}',
        b'{"exp":"9e99","nonce":"n"}', b'{"exp":9e99}', b"\xff\xfe", b"[" * 5000 + b"]" * 5000,
    ],
)
def test_validly_signed_but_malformed_payload_rejected(payload: bytes) -> None:
    reject(KR, _sign_raw(KR, payload))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(),
        st.text(alphabet=B64URL_CHARS + ".=v1"),
        st.builds("v1.{}.{}".format, st.text(B64URL_CHARS), st.text(B64URL_CHARS)),
    )
)
def test_garbage_raises_only_state_error(text: str) -> None:
    reject(KR, text)


def test_digest_is_canonical() -> None:
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    assert len(digest(None)) == 64


def test_keyring_guards_and_repr() -> None:
    with pytest.raises(ValueError):
        Keyring(b"short")
    assert "k" * 32 not in repr(KR) and "kkkk" not in repr(KR)


# --- rotation and grace ----------------------------------------------------


def test_previous_key_accepted_within_grace_rejected_after(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    old = ensure_secret(path, T0)
    token = seal(old, CLAIMS, T0, ttl_s=3 * ROTATION_GRACE_S)
    new = rotate_secret(path, T0)
    assert new.current != old.current and new.previous == ((old.current, T0),)
    assert mode_of(path) == 0o600
    assert unseal(new, token, T0 + ROTATION_GRACE_S).claims == CLAIMS
    assert unseal(load_secret(path, T0 + 10), token, T0 + 10).claims == CLAIMS
    reject(new, token, T0 + ROTATION_GRACE_S + 1)
    later = load_secret(path, T0 + ROTATION_GRACE_S + 1)
    assert later.previous == ()
    reject(later, token, T0 + ROTATION_GRACE_S + 1)
    # a token signed with the new key keeps working
    assert unseal(later, seal(new, CLAIMS, T0 + 5), T0 + 6).claims == CLAIMS


def test_rotation_drops_keys_past_grace(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    first = ensure_secret(path, T0)
    second = rotate_secret(path, T0 + 10)
    third = rotate_secret(path, T0 + 20)
    assert [k for k, _ in third.previous] == [second.current, first.current]
    fourth = rotate_secret(path, T0 + 15 + ROTATION_GRACE_S)
    assert [k for k, _ in fourth.previous] == [third.current, second.current]
    doc = orjson.loads(path.read_bytes())
    assert doc["format"] == 1 and len(doc["previous"]) == 2
    assert mode_of(path) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret", "secret.lock"]


def test_rotate_missing_file_says_init(tmp_path: Path) -> None:
    with pytest.raises(SecretFileError, match="mcpwrap secret init"):
        rotate_secret(tmp_path / "secret", T0)


# --- the secret file -------------------------------------------------------


def test_init_creates_0600_then_reuses(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "mcpwrap" / "secret"
    kr, created = init_secret(path, T0)
    assert created and len(kr.current) == 32 and kr.previous == ()
    assert mode_of(path) == 0o600 and mode_of(path.parent) == 0o700
    kr2, created2 = init_secret(path, T0)
    assert not created2 and kr2 == kr
    assert ensure_secret(path, T0) == kr == load_secret(path, T0)
    assert os.listdir(path.parent) == ["secret"]


def test_default_secret_path() -> None:
    path = default_secret_path()
    assert path.name == "secret" and path.parent.name == "mcpwrap"


def test_missing_file_names_init(tmp_path: Path) -> None:
    path = tmp_path / "nope"
    with pytest.raises(SecretFileError) as info:
        load_secret(path, T0)
    assert str(path) in str(info.value) and "mcpwrap secret init" in str(info.value)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o700 | 0o002])
def test_group_or_world_access_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "secret"
    ensure_secret(path, T0)
    path.chmod(mode)
    with pytest.raises(SecretFileError) as info:
        load_secret(path, T0)
    msg = str(info.value)
    assert str(path) in msg and f"chmod 600 {path}" in msg and f"{mode:04o}" in msg
    with pytest.raises(SecretFileError):
        ensure_secret(path, T0)


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    path.chmod(0o600)
    return path


def _b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def test_short_key_refused(tmp_path: Path) -> None:
    short = _b64(b"x" * (MIN_KEY_BYTES - 1))
    path = _write(tmp_path / "secret", orjson.dumps({"format": 1, "current": short}))
    with pytest.raises(SecretFileError, match="short") as info:
        load_secret(path, T0)
    assert str(path) in str(info.value)
    prev = [{"key": short, "retired_at": T0}]
    doc = {"format": 1, "current": _b64(b"x" * 32), "previous": prev}
    with pytest.raises(SecretFileError, match="short"):
        load_secret(_write(path, orjson.dumps(doc)), T0)


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage", b"[]", b'{"format":2,"current":"' + _b64(b"x" * 32).encode() + b'"}',
     b'{"format":1,"current":"!!!not base64!!!"}', b'{"format":1}',
     b'{"format":1,"current":"' + _b64(b"x" * 32).encode() + b'","previous":{}}',
     b'{"format":1,"current":"' + _b64(b"x" * 32).encode() + b'","previous":[{"key":"x"}]}',
     b"x" * (70 * 1024)],
)
def test_unparsable_content_refused(tmp_path: Path, content: bytes) -> None:
    path = _write(tmp_path / "secret", content)
    with pytest.raises(SecretFileError) as info:
        load_secret(path, T0)
    assert str(path) in str(info.value) and "mcpwrap secret init" in str(info.value)


def test_expired_previous_keys_ignored_on_load(tmp_path: Path) -> None:
    prev = [
        {"key": _b64(b"p" * 32), "retired_at": T0},
        {"key": _b64(b"q" * 32), "retired_at": T0 - ROTATION_GRACE_S - 1},
    ]
    doc = {"format": 1, "current": _b64(b"c" * 32), "previous": prev}
    kr = load_secret(_write(tmp_path / "secret", orjson.dumps(doc)), T0)
    assert kr == Keyring(b"c" * 32, ((b"p" * 32, T0),))


def test_not_a_regular_file_refused(tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir(mode=0o700)
    with pytest.raises(SecretFileError, match="regular file"):
        load_secret(tmp_path / "secret", T0)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(SecretFileError, match="regular file"):
        load_secret(fifo, T0)  # must not block
    ensure_secret(tmp_path / "real", T0)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(SecretFileError, match="symbolic link"):
        load_secret(tmp_path / "link", T0)


# --- the one-time ledger ---------------------------------------------------


def test_a_nonce_is_consumed_once_by_any_ledger_on_the_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first, second = NonceLedger(state), NonceLedger(state)
    assert first.consume("n1", T0 + 600, T0) is True
    assert first.consume("n1", T0 + 600, T0 + 1) is False
    assert second.consume("n1", T0 + 600, T0 + 2) is False
    assert second.consume("n2", T0 + 600, T0 + 2) is True
    assert mode_of(state) == 0o700 and mode_of(state / "nonces") == 0o700
    names = sorted(p.name for p in (state / "nonces").iterdir())
    assert names == sorted(hashlib.sha256(n.encode()).hexdigest() for n in ("n1", "n2"))
    assert all(mode_of(state / "nonces" / name) == 0o600 for name in names)


def test_a_nonce_never_names_a_path(tmp_path: Path) -> None:
    ledger = NonceLedger(tmp_path / "state")
    for nonce in ("../../escape", "/etc/passwd", ".", "a\x00b"):
        assert ledger.consume(nonce, T0 + 600, T0) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
    assert len(list((tmp_path / "state" / "nonces").iterdir())) == 4
    for bad in ("", "x" * 129):
        with pytest.raises(ValueError):
            ledger.consume(bad, T0 + 600, T0)


def test_expired_entries_are_collected(tmp_path: Path) -> None:
    nonces = tmp_path / "state" / "nonces"
    NonceLedger(tmp_path / "state").consume("old", T0 + 10, T0)
    NonceLedger(tmp_path / "state").consume("young", T0 + 1000, T0)
    # Still inside its token's life (plus the skew margin): kept.
    NonceLedger(tmp_path / "state").consume("x", T0 + 2000, T0 + 10 + CLOCK_SKEW_S)
    assert len(list(nonces.iterdir())) == 3
    later = NonceLedger(tmp_path / "state")
    later.consume("y", T0 + 2000, T0 + 11 + CLOCK_SKEW_S)
    names = {p.name for p in nonces.iterdir()}
    assert hashlib.sha256(b"old").hexdigest() not in names and len(names) == 3
    # The sweep is opportunistic: the same ledger sweeps again only after SWEEP_INTERVAL_S.
    later.consume("z", T0 + 20, T0 + 12 + CLOCK_SKEW_S)
    later.consume("w", T0 + 2000, T0 + 22 + CLOCK_SKEW_S)        # z has expired, but no sweep is due
    assert hashlib.sha256(b"z").hexdigest() in {p.name for p in nonces.iterdir()}
    later.consume("v", T0 + 2000, T0 + 11 + CLOCK_SKEW_S + SWEEP_INTERVAL_S)
    assert hashlib.sha256(b"z").hexdigest() not in {p.name for p in nonces.iterdir()}


def test_an_unsafe_ledger_directory_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chmod(state, 0o777)
    with pytest.raises(LedgerError, match=f"writable by group or others .*chmod 700 {state}"):
        NonceLedger(state).consume("n", T0 + 600, T0)
    os.chmod(state, 0o700)
    assert not (state / "nonces").exists()          # nothing is made inside an unsafe state dir
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (state / "nonces").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(LedgerError, match="symbolic link"):
        NonceLedger(state).consume("n", T0 + 600, T0)
    assert list((tmp_path / "elsewhere").iterdir()) == []
