"""Confirmation and elicitation end to end, both eras, and the shared secret across processes."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.harness import Server, mcpwrap_cmd, modern_meta

FIXTURE = Path(__file__).parents[2] / "fixtures" / "confirm.toml"
ASK = {"elicitation": {}}


def runs(marker: Path) -> int:
    return marker.read_text().count("ran") if marker.exists() else 0


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_legacy_confirm_decline_then_accept(tmp_path: Path, version: str) -> None:
    marker = tmp_path / "marker"
    with Server(FIXTURE, tmp_path) as s:
        s.initialize(version, ASK)
        rid = s.request("tools/call", {"name": "create", "arguments": {"path": str(marker)}})
        ask = s.read()
        assert ask["method"] == "elicitation/create" and str(marker) in ask["params"]["message"]
        s.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}})
        declined = s.response(rid)["result"]
        assert declined["isError"] and "declined" in declined["content"][0]["text"]
        assert runs(marker) == 0
        rid = s.request("tools/call", {"name": "create", "arguments": {"path": str(marker)}})
        ask = s.read()
        s.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {}}})
        assert s.response(rid)["result"]["isError"] is False
        assert runs(marker) == 1


def test_legacy_elicited_argument(tmp_path: Path) -> None:
    with Server(FIXTURE, tmp_path) as s:
        s.initialize("2025-11-25", ASK)
        rid = s.request("tools/call", {"name": "greet", "arguments": {}})
        ask = s.read()
        assert ask["params"]["requestedSchema"]["properties"]["name"]["type"] == "string"
        s.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}})
        assert s.response(rid)["result"]["content"][0]["text"] == "hello Ada\n"


def test_legacy_without_elicitation_refuses(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    for version, caps in (("2025-03-26", ASK), ("2025-11-25", {})):
        with Server(FIXTURE, tmp_path) as s:
            s.initialize(version, caps)
            result = s.call("tools/call", {"name": "create", "arguments": {"path": str(marker)}})["result"]
            assert result["isError"] and "confirmation" in result["content"][0]["text"]
    assert runs(marker) == 0


def _round_one(s: Server, marker: Path) -> tuple[dict, str]:
    params = {"_meta": modern_meta(ASK), "name": "create", "arguments": {"path": str(marker)}}
    first = s.call("tools/call", params)["result"]
    assert first["resultType"] == "input_required"
    return params, first["requestState"]


def test_modern_confirm_decline_accept_and_cross_process(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    with Server(FIXTURE, tmp_path) as a:
        params, state = _round_one(a, marker)
        declined = a.call("tools/call", {**params, "requestState": state,
                                         "inputResponses": {"confirm": {"action": "decline"}}})["result"]
        assert declined["isError"] and runs(marker) == 0
    # The retry goes to another process sharing the secret file: it verifies and runs once.
    with Server(FIXTURE, tmp_path) as b:
        done = b.call("tools/call", {**params, "requestState": state,
                                     "inputResponses": {"confirm": {"action": "accept"}}})["result"]
        assert done["isError"] is False and runs(marker) == 1
    # Another secret: -32602, nothing runs.
    with Server(FIXTURE, tmp_path, secret=tmp_path / "other-secret") as c:
        rejected = c.call("tools/call", {**params, "requestState": state,
                                         "inputResponses": {"confirm": {"action": "accept"}}})
        assert rejected["error"]["code"] == -32602
        assert runs(marker) == 1
        c.close()
        assert any("requestState" in line for line in c.stderr)


def test_modern_without_elicitation_is_32021(tmp_path: Path) -> None:
    with Server(FIXTURE, tmp_path) as s:
        answer = s.call("tools/call", {"_meta": modern_meta(), "name": "create", "arguments": {"path": "x"}})
        assert answer["error"]["code"] == -32021
        assert answer["error"]["data"]["requiredCapabilities"] == {"elicitation": {}}


def test_twenty_servers_one_secret(tmp_path: Path) -> None:
    secret = tmp_path / "conf" / "secret"
    servers = [Server(FIXTURE, tmp_path / f"s{i}", secret=secret, state=tmp_path / "state") for i in range(20)]
    try:
        states = []
        for i, s in enumerate(servers):
            params, state = _round_one(s, tmp_path / f"m{i}")
            states.append((params, state))
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        assert sorted(p.name for p in secret.parent.iterdir()) == ["secret"]
        for i, s in enumerate(servers):
            params, state = states[(i + 1) % len(servers)]
            answer = s.call("tools/call", {**params, "requestState": state,
                                           "inputResponses": {"confirm": {"action": "accept"}}})
            assert answer["result"]["isError"] is False
    finally:
        for s in servers:
            s.close()


def test_world_readable_secret_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    subprocess.run(mcpwrap_cmd("secret", "init", "--secret-file", str(secret)), check=True, capture_output=True, timeout=30)
    os.chmod(secret, 0o644)
    done = subprocess.run(mcpwrap_cmd("serve", str(FIXTURE), "--secret-file", str(secret)), check=False, input=b"",
                          capture_output=True, timeout=30)
    assert done.returncode != 0                       # refused at startup; the timeout guards a hang
    assert str(secret) in done.stderr.decode() and f"chmod 600 {secret}" in done.stderr.decode()
    assert done.stdout == b""


def test_secret_commands(tmp_path: Path) -> None:
    secret = tmp_path / "d" / "secret"
    env = {**os.environ, "MCPWRAP_SECRET_FILE": str(secret)}
    path = subprocess.run(mcpwrap_cmd("secret", "path"), check=False, capture_output=True, text=True, env=env, timeout=30)
    assert path.stdout.strip() == str(secret)
    subprocess.run(mcpwrap_cmd("secret", "init"), check=True, capture_output=True, env=env, timeout=30)
    before = secret.read_bytes()
    subprocess.run(mcpwrap_cmd("secret", "rotate"), check=True, capture_output=True, env=env, timeout=30)
    assert secret.read_bytes() != before and stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_cli_call_confirmation(tmp_path: Path) -> None:
    marker = tmp_path / "m"
    base = mcpwrap_cmd("call", str(FIXTURE), "create", "--arg", f"path={marker}")
    refused = subprocess.run(base, check=False, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)
    assert refused.returncode == 2 and "--yes" in refused.stderr and runs(marker) == 0
    subprocess.run(base + ["--yes"], check=True, capture_output=True, timeout=30)
    assert runs(marker) == 1


