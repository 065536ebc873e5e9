"""The keys that sign MRTR ``requestState`` (``protocol.sealing``): the shared secret file they are
kept in, and the one-time ledger of the states that authorised a run.

* Secret file (one per user, shared by every mcpwrap process so a retry may
  reach any of them), mode 0600, owned by the user, a regular file (not a
  symlink; checked by ``durable.open_private`` on the open fd)::

      {"format": 1, "current": "<b64 32 bytes>",
       "previous": [{"key": "<b64>", "retired_at": <epoch seconds>}, ...]}

  Creation is race-safe (O_EXCL temp file + ``os.link``: the first writer
  wins, the others load its file, a partial file is never visible); rotation
  is serialised by ``flock`` on ``PATH.lock`` and replaces the file
  atomically. A previous key verifies for :data:`ROTATION_GRACE_S` after it
  was retired. Every refusal is a :class:`SecretFileError` naming the path
  and the fix. A :class:`Keyring` is the file's keys as a value, what
  ``protocol.sealing`` signs and verifies with.
* One-time ledger (:class:`NonceLedger`): ``STATE_DIR/nonces/`` (0700; it and
  ``STATE_DIR`` checked with ``durable.open_private``, refusals are
  :class:`LedgerError`) holds one empty 0600 file per
  consumed nonce, named by the SHA-256 of the nonce and created with
  ``O_CREAT|O_EXCL|O_NOFOLLOW``, so exactly one of all the processes sharing
  the directory consumes a nonce. Its mtime is the token's expiry; entries past
  it (plus :data:`CLOCK_SKEW_S`) are swept opportunistically, at most once per
  :data:`SWEEP_INTERVAL_S` per process, since an expired token is refused anyway.
  Processes that do not share the directory do not share the record: each of
  them could run a captured token once before it expires.

Nothing here reads a clock: ``now`` is always passed in.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import math
import os
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from mcpwrap.state.durable import UnsafePathError, create_private, make_private_dir, open_private, private_dir, write_atomic

ROTATION_GRACE_S: float = 86400.0  # a retired key still verifies this long
MIN_KEY_BYTES = 32  # HMAC-SHA256 gains nothing from more, loses strength with less
_FORMAT = 1
_KEY_BYTES = 32
_MAX_SECRET_FILE_BYTES = 64 * 1024
CLOCK_SKEW_S: float = 60.0  # a ledger entry outlives its token by this much (machines sharing a directory)
SWEEP_INTERVAL_S: float = 60.0
MAX_ENTRY_CHARS = 128  # a requestState nonce is 22; anything longer is not one of ours


class SecretFileError(Exception):
    """The secret file is missing or unsafe; the message names the path and the fix."""


class LedgerError(OSError):
    """The nonce ledger's directory is unusable or unsafe; the message names the path and the fix.

    An OSError: the core, which consumes a nonce through an injected callback, refuses the run on
    any OSError of it without knowing the ledger."""


@dataclass(frozen=True)
class Keyring:
    """The signing key plus retired keys still accepted for verification."""

    current: bytes = field(repr=False)
    previous: tuple[tuple[bytes, float], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        for key in (self.current, *(k for k, _ in self.previous)):
            if len(key) < MIN_KEY_BYTES:
                raise ValueError(f"signing key shorter than {MIN_KEY_BYTES} bytes")

    def verifying_keys(self, now: float) -> tuple[bytes, ...]:
        """Current key first, then previous keys still inside the grace window."""
        live = (k for k, retired in self.previous if retired + ROTATION_GRACE_S >= now)
        return (self.current, *live)


def default_secret_path() -> Path:
    import platformdirs  # only here: serve with an explicit or unused secret never loads it

    return platformdirs.user_config_path("mcpwrap") / "secret"


# --- the secret file -------------------------------------------------------


def _init_cmd(path: Path) -> str:
    """The command that creates ``path`` (naming it only when it is not the default)."""
    custom = "" if path == default_secret_path() else f" --secret-file {shlex.quote(str(path))}"
    return "mcpwrap secret init" + custom


def _refuse(path: Path, problem: str, fix: str = "") -> SecretFileError:
    """One sentence: what is wrong with which file, then the command that fixes it."""
    fix = fix or f"remove it and run: {_init_cmd(path)}"
    return SecretFileError(f"secret file {path} {problem}; {fix}")


def _fix_dir(path: Path) -> str:
    return f"check that {path.parent} is a directory you can write"


def _key(text: object, path: Path) -> bytes:
    try:
        key = base64.b64decode(text, validate=True) if isinstance(text, str) else b""
    except binascii.Error:
        key = b""
    if len(key) < MIN_KEY_BYTES:
        raise _refuse(path, f"holds a missing, malformed or short key (need {MIN_KEY_BYTES} bytes)")
    return key


def _parse(raw: bytes, path: Path, now: float) -> Keyring:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise _refuse(path, f"is not a format-{_FORMAT} mcpwrap secret (unparsable content)")
    previous: list[tuple[bytes, float]] = []
    entries = doc.get("previous", [])
    for entry in entries if isinstance(entries, list) else [None]:
        retired = entry.get("retired_at") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(retired, (int, float)) or isinstance(retired, bool):
            raise _refuse(path, "has a malformed 'previous' entry")
        key = _key(entry.get("key"), path)
        if retired + ROTATION_GRACE_S >= now:  # older keys are simply forgotten
            previous.append((key, float(retired)))
    return Keyring(_key(doc.get("current"), path), tuple(previous))


def load_secret(path: Path, now: float) -> Keyring:
    """Read and vet the secret file: ours, a regular file (not a symlink, not a FIFO: that would
    hang the server), no access for group or others; checked on the open fd (no check/use race)."""
    try:
        fd = open_private(path, forbidden=0o077)
    except UnsafePathError as exc:
        raise _refuse(path, exc.problem, exc.fix if "chmod" in exc.fix else "") from None
    except FileNotFoundError:
        raise _refuse(path, "does not exist", "run: " + _init_cmd(path)) from None
    except OSError as exc:
        fix = "check the permissions of the file and its directory"
        raise _refuse(path, f"cannot be opened ({exc.strerror})", fix) from None
    try:
        raw = os.read(fd, _MAX_SECRET_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > _MAX_SECRET_FILE_BYTES:
        raise _refuse(path, "is too large to be an mcpwrap secret")
    return _parse(raw, path, now)


def _render(keyring: Keyring) -> bytes:
    b64 = base64.b64encode
    previous = [{"key": b64(k).decode(), "retired_at": t} for k, t in keyring.previous]
    doc = {"format": _FORMAT, "current": b64(keyring.current).decode(), "previous": previous}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"


def _create(path: Path) -> bool:
    """Publish a new secret unless one exists; True if this call's secret won."""
    try:
        make_private_dir(path.parent, parents=True)
        try:
            write_atomic(path, _render(Keyring(secrets.token_bytes(_KEY_BYTES))), exclusive=True)
        except FileExistsError:
            return False                  # another process won the race: its secret is the one
        return True
    except OSError as exc:
        raise _refuse(path, f"cannot be created ({exc.strerror})", _fix_dir(path)) from None


def init_secret(path: Path, now: float) -> tuple[Keyring, bool]:
    created = not os.path.lexists(path) and _create(path)
    return load_secret(path, now), created


def ensure_secret(path: Path, now: float) -> Keyring:
    return init_secret(path, now)[0]


def rotate_secret(path: Path, now: float) -> Keyring:
    """Make a new current key; the old one keeps verifying for the grace window."""
    lock = path.with_name(path.name + ".lock")
    try:
        lock_fd = open_private(lock, os.O_RDWR | os.O_CREAT)
    except UnsafePathError as exc:
        raise _refuse(path, f"cannot be locked: {exc}") from None
    except OSError as exc:
        raise _refuse(path, f"cannot be locked ({exc.strerror})", _fix_dir(path)) from None
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)  # serialise rotations; readers need no lock
        old = load_secret(path, now)
        new = Keyring(secrets.token_bytes(_KEY_BYTES), ((old.current, now), *old.previous))
        try:
            write_atomic(path, _render(new))
        except OSError as exc:
            raise _refuse(path, f"cannot be rewritten ({exc.strerror})", _fix_dir(path)) from None
        return new
    finally:
        os.close(lock_fd)  # closing releases the flock


# --- the one-time ledger ---------------------------------------------------


class NonceLedger:
    """Which requestState nonces have authorised a run, shared by every process using ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / "nonces"
        self._next_sweep = -math.inf

    def consume(self, nonce: str, expires_at: float, now: float) -> bool:
        """True for the first consumer of ``nonce`` (here or in any process sharing the directory)."""
        if not isinstance(nonce, str) or not 0 < len(nonce) <= MAX_ENTRY_CHARS:
            raise ValueError("not a requestState nonce")
        name = hashlib.sha256(nonce.encode()).hexdigest()   # attacker-influenced text never names a file
        dir_fd = self._open_dir()
        try:
            if now >= self._next_sweep:
                self._next_sweep = now + SWEEP_INTERVAL_S
                self._sweep(dir_fd, now)
            try:
                fd = create_private(name, dir_fd=dir_fd)
            except FileExistsError:
                return False
            except OSError as exc:
                raise LedgerError(f"nonce ledger {self.path} cannot record a used requestState "
                                  f"({exc.strerror}); check that you can write it") from None
            try:
                os.utime(fd, (expires_at, expires_at))       # the sweep reads expiry from stat, no file read
            finally:
                os.close(fd)
            return True
        finally:
            os.close(dir_fd)

    def _open_dir(self) -> int:
        """The ledger directory as an fd, created 0700; it and the state dir are checked like the
        secret file (ours, a real directory, no group/world write) on their open fds."""
        try:
            make_private_dir(self.state_dir.parent, parents=True)
            os.close(private_dir(self.state_dir))
            return private_dir(self.path)
        except UnsafePathError as exc:
            raise LedgerError(f"nonce ledger {self.path} is unsafe: {exc}") from None
        except OSError as exc:
            raise LedgerError(f"nonce ledger {self.path} cannot be opened ({exc.strerror}); "
                              f"check that {self.state_dir} is a directory you can write") from None

    @staticmethod
    def _sweep(dir_fd: int, now: float) -> None:
        """Forget entries whose token has expired: it cannot be replayed any more."""
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                try:
                    if entry.stat(follow_symlinks=False).st_mtime + CLOCK_SKEW_S < now:
                        os.unlink(entry.name, dir_fd=dir_fd)
                except OSError:
                    continue                  # another process swept it first
