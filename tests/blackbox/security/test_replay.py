"""Issue 11, class 8, over real pipes: one accepted requestState authorises exactly one run,
in the process that took it and in every other process sharing the state directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness import Server, modern_meta

FIXTURE = Path(__file__).parents[2] / "fixtures" / "confirm.toml"
ACCEPT = {"confirm": {"action": "accept"}}


def runs(marker: Path) -> int:
    return marker.read_text().count("ran") if marker.exists() else 0


def confirmation(s: Server, marker: Path) -> dict[str, Any]:
    """The retry that accepts `create`'s confirmation: the one an agent might send twice."""
    params = {"_meta": modern_meta({"elicitation": {}}), "name": "create", "arguments": {"path": str(marker)}}
    first = s.call("tools/call", params, timeout=30)["result"]
    assert first["resultType"] == "input_required"
    return {**params, "requestState": first["requestState"], "inputResponses": ACCEPT}


def refused(answer: dict[str, Any]) -> bool:
    return answer.get("error") == {"code": -32602, "message": "invalid or expired requestState"}


def test_a_replayed_confirmation_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    with Server(FIXTURE, tmp_path) as s:
        retry = confirmation(s, marker)
        assert s.call("tools/call", retry, timeout=30)["result"]["isError"] is False
        for _ in range(3):
            assert refused(s.call("tools/call", retry, timeout=30))
        assert runs(marker) == 1
        s.close(timeout=30)
        assert any("already used" in line for line in s.stderr)


def test_a_confirmation_runs_once_across_processes_sharing_the_state_dir(tmp_path: Path) -> None:
    marker, state = tmp_path / "marker", tmp_path / "shared-state"
    servers = [Server(FIXTURE, tmp_path / f"s{i}", secret=tmp_path / "secret", state=state) for i in range(4)]
    try:
        retry = confirmation(servers[0], marker)
        ids = [s.request("tools/call", retry) for s in servers]       # all four retries in flight at once
        answers = [s.response(i, timeout=30) for s, i in zip(servers, ids)]
        assert sorted("result" in a for a in answers) == [False, False, False, True]
        assert all(refused(a) for a in answers if "error" in a)
        assert runs(marker) == 1
    finally:
        for s in servers:
            s.close(timeout=30)


def test_processes_with_separate_state_dirs_do_not_share_the_record(tmp_path: Path) -> None:
    """The documented limit: without a shared state dir, each process can run a captured state once."""
    marker = tmp_path / "marker"
    with Server(FIXTURE, tmp_path / "a", secret=tmp_path / "secret") as a, \
            Server(FIXTURE, tmp_path / "b", secret=tmp_path / "secret") as b:
        retry = confirmation(a, marker)
        for s in (a, b):
            assert s.call("tools/call", retry, timeout=30)["result"]["isError"] is False
            assert refused(s.call("tools/call", retry, timeout=30))
    assert runs(marker) == 2
