"""Files that survive a crash whole or not at all, and files that are ours alone: the task
store and the secret file share this.

Created private: every file and directory mcpwrap creates is made here, by `create_private`
(a new file, 0600), `make_private_dir` (a new directory and, if asked, its missing parents,
0700) or `write_private` (a file the user named), each setting the mode on the new object
itself, so whatever the umask (even 0) nothing new is readable by group or others.

Durable: a temporary 0600 file next to the target is written and fsynced, then
renamed over the target (or linked, which refuses to replace an existing file),
then the directory is fsynced so the new name itself is durable.

Private: `open_private` opens a path without following a final symlink (and
without blocking on a FIFO), then checks the open fd, so there is no
check/use race: a regular file (or, with `directory`, a directory) owned by
this uid with none of the `forbidden` mode bits (default: group/world write).
A refusal is an `UnsafePathError` whose message names the path, the problem
and the fix; `.problem` and `.fix` let a caller phrase it its own way.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class UnsafePathError(Exception):
    """A path that must be private to us is not; str() is '<path> <problem>; <fix>'."""

    def __init__(self, path: Path | str, problem: str, fix: str) -> None:
        super().__init__(f"{path} {problem}; {fix}")
        self.path, self.problem, self.fix = Path(path), problem, fix


def create_private(path: Path | str, flags: int = os.O_WRONLY, *, dir_fd: int | None = None) -> int:
    """A new regular file at `path` (FileExistsError if anything is there, a symlink too), mode
    0600 whatever the umask; the fd is opened with `flags`."""
    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        os.fchmod(fd, 0o600)              # the umask may have taken bits away (never added: 0600 is the ceiling)
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_private_dir(directory: Path | str, parents: bool = False) -> None:
    """Create `directory` 0700 whatever the umask, and with `parents` each missing ancestor too
    (not `mkdir -p`'s 0777 & ~umask); one that exists already is left as it is."""
    directory = Path(directory)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        return
    except FileNotFoundError:
        if not parents or directory.parent == directory:
            raise
        make_private_dir(directory.parent, parents=True)
        return make_private_dir(directory)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to a file the user named: a new one is created 0600 (`create_private`), an
    existing one keeps its mode and is overwritten."""
    try:
        fd = create_private(path)
    except FileExistsError:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def open_private(path: Path | str, flags: int = os.O_RDONLY, *, directory: bool = False,
                 forbidden: int = 0o022) -> int:
    """Open `path` and return the fd once it is ours and private; with O_CREAT in `flags` a
    missing file is made by `create_private` (with O_EXCL too, an existing one is FileExistsError).

    Errors other than the checks (FileNotFoundError...) propagate unchanged."""
    if flags & os.O_CREAT:
        try:
            return create_private(path, flags & ~(os.O_CREAT | os.O_EXCL) | os.O_NONBLOCK)
        except FileExistsError:
            if flags & os.O_EXCL:
                raise
        flags &= ~os.O_CREAT
    kind = "directory" if directory else "regular file"
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_DIRECTORY if directory else os.O_NONBLOCK)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
            raise
        try:
            link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            raise exc from None           # ENOTDIR from a component on the way, not from `path` itself
        raise UnsafePathError(path, "is a symbolic link" if link else f"is not a {kind}",
                              "remove it (mcpwrap creates what it needs)") from None
    try:
        st = os.fstat(fd)
        bits = stat.S_IMODE(st.st_mode)
        if not (stat.S_ISDIR if directory else stat.S_ISREG)(st.st_mode):
            raise UnsafePathError(path, f"is not a {kind}", "remove it (mcpwrap creates what it needs)")
        if st.st_uid != os.getuid():
            raise UnsafePathError(path, f"is owned by uid {st.st_uid}, not by you (uid {os.getuid()})",
                                  "remove it, or use a directory of your own")
        if bits & forbidden:
            import shlex                  # here: only a refusal pays for the import

            private = (0o700 if directory else 0o600) & ~forbidden
            raise UnsafePathError(path, f"is {'writable' if forbidden == 0o022 else 'accessible'} by group or "
                                  f"others (mode {bits:04o})", f"run: chmod {private:o} {shlex.quote(str(path))}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def private_dir(directory: Path, create: bool = True) -> int:
    """The directory as a checked fd (`open_private`), made 0700 first when `create` and it is missing."""
    if create:
        make_private_dir(directory)
    return open_private(directory, directory=True)


def private_tree(root: Path, create: bool) -> bool:
    """STATE_DIR/<digest>/<root> checked private at every level (made 0700 first with `create`);
    False when it does not exist yet."""
    state_dir = root.parent.parent
    try:
        if create:
            make_private_dir(state_dir.parent, parents=True)
        for directory in (state_dir, root.parent, root):
            os.close(private_dir(directory, create))
    except FileNotFoundError:
        return False
    return True


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, exclusive: bool = False) -> None:
    """Publish `data` at `path`; with `exclusive`, FileExistsError if something is there already."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    fd = create_private(tmp)
    try:
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                f.write(data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, path)                # atomic and exclusive: exactly one creator wins
        else:
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
