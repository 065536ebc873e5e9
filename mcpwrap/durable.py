"""Files that survive a crash whole or not at all: the task store and the secret file share this.

A temporary 0600 file next to the target is written and fsynced, then renamed
over the target (or linked, which refuses to replace an existing file), then
the directory is fsynced so the new name itself is durable.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, exclusive: bool = False) -> None:
    """Publish `data` at `path`; with `exclusive`, FileExistsError if something is there already."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)              # whatever the umask, only the owner reads it
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
