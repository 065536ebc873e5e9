"""Tests of the requestState tokens (mcpwrap.protocol.sealing) and of the shared secret file and the
nonce ledger they rely on (mcpwrap.state.signing).

No sleeps: time is the ``now`` argument. The multi-process test waits on pipes
with bounded timeouts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcpwrap.state.signing import (
    load_secret,
)
from tests.unit.state.test_signing import T0, mode_of

MAIN = Path(__file__).resolve().parents[3]


# --- tokens ----------------------------------------------------------------


# --- rotation and grace ----------------------------------------------------


# --- the secret file -------------------------------------------------------


def _race(code: str, *args: str, n: int = 20) -> list[str]:
    """Run ``code`` in n processes that block on a pipe until every one is ready, then go at once.

    The code sees the ready and go fds as ``ready`` and ``go`` and its own ``args``; returns each stdout.
    """
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    prologue = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "go, ready, args = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]\n"
        "os.write(ready, b'r'); os.close(ready)\n"
        "os.read(go, 1)\n"  # EOF when the parent closes the write end: everyone starts together
    )
    env = {**os.environ, "PYTHONPATH": str(MAIN)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", prologue + code, str(go_r), str(ready_w), *args],
            pass_fds=(go_r, ready_w),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=MAIN,
        )
        for _ in range(n)
    ]
    os.close(go_r)
    os.close(ready_w)
    try:
        ready = b""
        while len(ready) < n:  # bounded: EOF once every child has written or died
            chunk = os.read(ready_r, 64)
            if not chunk:
                break
            ready += chunk
    finally:
        os.close(ready_r)
        os.close(go_w)
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
        outs.append(out.decode().strip())
    assert len(ready) == n
    return outs


def test_exactly_one_secret_when_20_processes_race(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "secret"
    code = "from mcpwrap.state.signing import ensure_secret\nprint(ensure_secret(Path(args[0]), time.time()).current.hex())\n"
    keys = set(_race(code, str(path)))
    assert len(keys) == 1
    assert os.listdir(path.parent) == ["secret"]
    assert mode_of(path) == 0o600
    assert load_secret(path, T0).current.hex() == keys.pop()


# --- the one-time ledger ---------------------------------------------------


def test_exactly_one_of_20_processes_consumes_a_nonce(tmp_path: Path) -> None:
    code = "from mcpwrap.state.signing import NonceLedger\nprint(NonceLedger(Path(args[0])).consume('n', 2e9, 1e9))\n"
    assert sorted(_race(code, str(tmp_path / "state"))) == ["False"] * 19 + ["True"]
