"""`mcpwrap secret path|init|rotate`: the shared secret that signs requestState and task records."""

from __future__ import annotations

from mcpwrap.cli.common import EXIT_CONFIG, fail, secret_path


def secret_where(secret_file: str | None) -> None:
    print(secret_path(secret_file))  # stdout-ok


def secret_init(secret_file: str | None) -> None:
    import time

    from mcpwrap.state import signing

    path = secret_path(secret_file)
    try:
        _, created = signing.init_secret(path, time.time())
    except signing.SecretFileError as exc:
        fail(str(exc), EXIT_CONFIG)
    print(f"{'created' if created else 'ok, already present:'} {path}")  # stdout-ok


def secret_rotate(secret_file: str | None) -> None:
    import time

    from mcpwrap.state import signing

    path = secret_path(secret_file)
    try:
        signing.rotate_secret(path, time.time())
    except signing.SecretFileError as exc:
        fail(str(exc), EXIT_CONFIG)
    print(f"rotated {path}; the previous key verifies for {signing.ROTATION_GRACE_S / 3600:g} more hours")  # stdout-ok
