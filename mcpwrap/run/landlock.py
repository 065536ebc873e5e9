"""Landlock through ctypes: a tool's `[sandbox]` policy made into a kernel ruleset.

Two halves because of where each runs. `prepare` (the parent, once per policy) opens the
paths and builds a ruleset fd; `enforce` (the child, between fork and exec, from
subprocess's preexec_fn, before close_fds) sets no_new_privs and restricts itself with that
fd, calling only foreign functions built at import. The ruleset fd is O_CLOEXEC, so no tool
inherits it. `enforce` raises OSError on any failure, so Popen fails: fail closed.

A policy means: every filesystem right the ABI knows is handled, so what is not granted is
denied; `read` paths get READ_FILE|READ_DIR|EXECUTE, `write` paths get every handled right
(they are readable too); a path naming a file gets only the rights valid for files; a path
that does not exist grants nothing and is skipped (`Ruleset.skipped`, for `mcpwrap check`).
`network = false` handles TCP bind and connect and allows no port. Every sandbox is scoped:
no signal to, and no abstract unix socket of, a process outside it.

What an older ABI cannot enforce (`missing`), read from the kernel's uapi documentation:
- ABI < 2 (no REFER) loses nothing: reparenting (rename/link into another directory) is
  then always denied, even inside `write` paths; stricter, so `describe` only notes it.
- ABI < 3 (no TRUNCATE): truncate(2) is not checked and open(O_RDONLY|O_TRUNC) needs only
  READ_FILE, so any file the tool can name can be emptied, outside `write` too. A real gap
  for every sandbox, since every sandbox limits writing.
- ABI < 4: `network = false` cannot be enforced.
- ABI < 5 (no IOCTL_DEV): ioctl on a device opened in the sandbox is not checked; a gap
  only when a granted path reaches /dev (is /dev, inside it, or above it).
- ABI < 6: signal and abstract-socket scoping. ABI 7 adds audit-log flags only.
Never restricted at any ABI (`describe`): UDP, raw and other non-TCP sockets, connecting to
pathname unix sockets, chmod/chown/utime/setxattr/stat, and files open before `enforce`.
MPTCP counts as non-TCP (Landlock keeps TCP rights to TCP sockets on purpose): with
net.mptcp.enabled=1, socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP) connects under
`network = false` (checked on Linux 6.18, ABI 7), so that alone is no network wall.

Syscalls 444-446 are the generic numbers every architecture shares since Linux 5.1 except
alpha and mips (offset tables); elsewhere Landlock counts as unavailable rather than risk a
wrong syscall. `MCPWRAP_LANDLOCK_ABI` caps the detected ABI, so tests can play older kernels.

Why not the `landlock` package on PyPI (1.0.0.dev5, alpha): it wraps the same three
syscalls with ctypes, but for the filesystem only: its ruleset attribute has no
handled_access_net or scoped field, so neither `network = false` nor scoping (ABI 4, 6)
can be expressed. It has no ABI cap for tests, gives dir-only rights to a file path unless
told otherwise (EINVAL), decides failure from errno rather than the -1 return, and would be
a sixth dependency for what takes a few dozen lines of ctypes here.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import stat
import sys
from dataclasses import dataclass

ABI_ENV = "MCPWRAP_LANDLOCK_ABI"
UNAVAILABLE = "Landlock is not available (needs Linux >= 5.13 with Landlock enabled)"

# include/uapi/linux/landlock.h
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_V1 = (1 << 13) - 1                   # EXECUTE .. MAKE_SYM
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_READ_RIGHTS = _READ_FILE | _READ_DIR | _EXECUTE
_NET_TCP = (1 << 0) | (1 << 1)           # BIND_TCP | CONNECT_TCP
_SCOPES = (1 << 0) | (1 << 1)            # SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
_PR_SET_NO_NEW_PRIVS = 38
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_GENERIC_SYSCALLS = {"x86_64", "aarch64", "i686", "i386", "armv7l", "armv8l", "riscv64",
                     "ppc64le", "ppc64", "s390x", "loongarch64"}
_SUPPORTED = sys.platform == "linux" and platform.machine() in _GENERIC_SYSCALLS


class LandlockError(Exception):
    """A ruleset could not be built; the message says which step and why."""


@dataclass(frozen=True)
class Policy:
    """What a sandboxed tool may touch: paths to read, paths to write, TCP or not."""

    read: tuple[str, ...]
    write: tuple[str, ...]
    network: bool


@dataclass(frozen=True)
class Ruleset:
    """A prepared ruleset: `fd` for `enforce` in every child of the policy; `skipped` the
    policy paths that did not exist, which grant nothing."""

    fd: int
    skipped: tuple[str, ...]

    def close(self) -> None:
        os.close(self.fd)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


if _SUPPORTED:   # built here so that the child between fork and exec only calls them
    _libc = ctypes.CDLL(None, use_errno=True)
    _long = ctypes.c_long
    _create_ruleset = ctypes.CFUNCTYPE(_long, _long, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32,
                                       use_errno=True)(("syscall", _libc))
    _add_rule = ctypes.CFUNCTYPE(_long, _long, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32,
                                 use_errno=True)(("syscall", _libc))
    _restrict_self = ctypes.CFUNCTYPE(_long, _long, ctypes.c_int, ctypes.c_uint32, use_errno=True)(("syscall", _libc))
    _prctl = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                              ctypes.c_ulong, use_errno=True)(("prctl", _libc))


@functools.cache
def _kernel_abi() -> int:
    if not _SUPPORTED:
        return 0
    return max(int(_create_ruleset(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)), 0)


def abi() -> int:
    """The Landlock ABI this kernel offers (0: none, whatever the reason), capped by ABI_ENV."""
    cap = os.environ.get(ABI_ENV, "").strip()
    if cap and not (cap.isascii() and cap.isdigit()):
        raise LandlockError(f"{ABI_ENV} must be a whole number (0 = no Landlock), not {cap!r}")
    return min(_kernel_abi(), int(cap)) if cap else _kernel_abi()


def _fs_rights(abi: int) -> int:
    return _FS_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0) | (_IOCTL_DEV if abi >= 5 else 0)


def _reaches_dev(policy: Policy) -> bool:
    paths = (os.path.abspath(p) for p in policy.read + policy.write)
    return any(os.path.commonpath([p, "/dev"]) in (p, "/dev") for p in paths)


def missing(policy: Policy, abi: int) -> list[str]:
    """What of `policy` this ABI cannot enforce, one sentence each for the user (module docstring)."""
    if abi < 1:
        return [UNAVAILABLE]
    gaps = [(3, True, "stopping truncation outside write paths",
             ": before it, any file the tool can name can be emptied (truncate(2), open with O_TRUNC)"),
            (4, not policy.network, "network = false", ""),
            (5, _reaches_dev(policy), "limiting ioctl on devices under /dev", ""),
            (6, True, "signal and abstract-socket scoping", "")]
    return [f"{what} needs Landlock ABI {need} (this kernel has ABI {abi}){why}"
            for need, applies, what, why in gaps if abi < need and applies]


def describe(policy: Policy, abi: int) -> list[str]:
    """Lines for `mcpwrap check`: what the sandbox enforces on this ABI, and what it does not."""
    if abi < 1:
        return [UNAVAILABLE]
    lines = [f"Landlock ABI {abi}: only read and write paths can be read or executed, only write paths changed"]
    if abi < 2:
        lines.append("moving or linking a file into another directory is denied, even inside write paths")
    if policy.network:
        lines.append("the network is not restricted (network = true)")
    elif abi >= 4:
        lines.append("TCP bind and connect are denied")
    if abi >= 6:
        lines.append("signals and abstract unix sockets cannot reach processes outside the sandbox")
    lines += missing(policy, abi)
    if not policy.network:
        lines.append("UDP, MPTCP, raw and other non-TCP sockets, and connecting to pathname unix sockets, "
                     "are not restricted by Landlock")
    return lines + ["chmod, chown, utime, setxattr and stat of a path are not restricted by Landlock",
                    "files open before the tool starts (its stdin, stdout, stderr) are not restricted"]


def _fail(what: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(f"{what}: {os.strerror(err)} (errno {err})")


def _allow(ruleset_fd: int, path: str, rights: int) -> bool:
    """Grant `rights` beneath `path` (file rights only on a file); False if it does not exist."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise LandlockError(f"cannot open sandbox path {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        if _add_rule(_SYS_ADD_RULE, ruleset_fd, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
            raise _fail(f"cannot add a Landlock rule for {path}")
    finally:
        os.close(fd)
    return True


def prepare(policy: Policy, abi_level: int | None = None) -> Ruleset:
    """Build the ruleset for `policy` with what `abi_level` (default: `abi()`) can enforce.

    The caller owns the fd (close it when the policy goes); raises LandlockError."""
    level = abi() if abi_level is None else abi_level
    if level < 1 or not _SUPPORTED:
        raise LandlockError(UNAVAILABLE)
    handled = _fs_rights(level)
    attr = _RulesetAttr(handled, _NET_TCP if not policy.network and level >= 4 else 0,
                        _SCOPES if level >= 6 else 0)
    fd = int(_create_ruleset(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0))
    if fd < 0:
        raise _fail(f"cannot create a Landlock ruleset for ABI {level}")
    try:
        skipped = tuple(path for paths, rights in ((policy.read, _READ_RIGHTS), (policy.write, handled))
                        for path in paths if not _allow(fd, path, rights))
    except BaseException:
        os.close(fd)
        raise
    return Ruleset(fd, skipped)


def enforce(ruleset_fd: int) -> None:
    """Restrict the calling process (a child between fork and exec) to the ruleset, for good.

    Safe as preexec_fn: no import, only calls prebuilt foreign functions. Raises OSError."""
    if not _SUPPORTED:
        raise OSError(errno.ENOSYS, UNAVAILABLE)
    if _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 or _restrict_self(_SYS_RESTRICT_SELF, ruleset_fd, 0) < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
