"""The official MCP conformance suite (server mode) against `mcpwrap serve --http`, scenario by scenario.

`@modelcontextprotocol/conformance` is pinned in tests/ts/package.json at 0.2.0-alpha.12, the
line that has 2026-07-28 scenarios (0.1.16, the `latest` tag, knows 2025-06-18 and 2025-11-25
only), and installed by `npm ci --prefix tests/ts`; it runs from tests/ts/node_modules, never
fetched at test time (tests/ts/node20-fs.mjs lets it load on Node.js 20). `--suite all` adds the
pending and after-release scenarios to the required ones. The suite writes one checks.json per
scenario: a scenario passes when none of its checks is a FAILURE (a WARNING is an unmet SHOULD
the suite reports without failing it). EXPECTED_FAILURES is the one table of what a server of
shell commands cannot meet, check by check and with its reason; the test fails when a check it
does not list fails or one it lists passes (or its scenario is no longer run), so the table
stays true. MUST_PASS names the scenarios that may never enter it.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.protocol.tasking import TaskLookupError, TaskTerminalError
from mcpwrap.tasks.store import Store, process_start
from tests.harness import HANG_S, MODERN, modern_meta, until
from tests.httpharness import HttpServer, modern_headers

TS_DIR = Path(__file__).resolve().parents[2] / "ts"
SUITE = TS_DIR / "node_modules" / ".bin" / "conformance"
TOOLS = Path(__file__).parents[2] / "fixtures" / "conformance.toml"
NODE = shutil.which("node")
SUITE_S = 10 * HANG_S           # a hang guard for ~40 scenarios, each under the suite's own 30 s limit
VERSIONS = ("2025-11-25", "2026-07-28")
AT_2025, AT_2026 = (VERSIONS[0],), (VERSIONS[1],)
# The tasks extension (SEP-2663) is on no spec version's timeline: `--suite all` leaves its scenarios out,
# so each runs by name. Not here: tasks-status-notifications (the suite skips it: its harness predates
# subscriptions/listen). Each scenario -> the checks it fails by design, and why.
EXTENSION_SCENARIOS: dict[str, tuple[frozenset[str], str]] = {
    **dict.fromkeys(("tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields",
                     "tasks-request-state-removal", "tasks-request-headers", "tasks-required-task-error",
                     "tasks-mrtr-composition", "tasks-dispatch-and-envelope", "tasks-mrtr-input"), (frozenset(), "")),
}
MUST_PASS = {"2025-11-25": {"dns-rebinding-protection", "server-session-lifecycle", "server-sse-multiple-streams"},
             "2026-07-28": {"dns-rebinding-protection", "http-header-validation", "server-sse-multiple-streams"}}


@dataclass(frozen=True)
class Expected:
    """A scenario mcpwrap fails by design: exactly these checks at each spec version, for this reason."""
    checks: dict[str, frozenset[str]]
    reason: str


def expect(checks: str, versions: tuple[str, ...], reason: str, modern_also: str = "") -> Expected:
    """`modern_also`: checks the suite makes hard only at 2026-07-28 (a WARNING at 2025-11-25)."""
    return Expected({v: frozenset((checks + (" " + modern_also if v in AT_2026 else "")).split()) for v in versions},
                    reason)


NO_SAMPLING = "a shell command cannot ask the client's model anything: mcpwrap never sends sampling/createMessage"
EXPECTED_FAILURES = {
    "tools-call-sampling": expect("tools-call-sampling", AT_2025, NO_SAMPLING),
    "json-schema-2020-12": expect(
        "json-schema-2020-12-$schema json-schema-2020-12-$defs", VERSIONS,
        "an inputSchema is built from per-argument fragments (args.NAME): root keywords ($schema, $defs with "
        "$anchor, allOf, if/then/else) have no place in a tools file",
        modern_also="sep-2106-composition-keywords-preserved sep-2106-conditional-keywords-preserved "
                    "sep-2106-anchor-keyword-preserved"),
    "server-stateless": expect("sep-2575-server-rejects-undeclared-capability", AT_2026,
        "test_missing_capability gets -32021 with requiredCapabilities {elicitation: {}}, as the schema wants; "
        "the check insists on 'sampling', which no mcpwrap tool can need (" + NO_SAMPLING + ")"),
    "http-custom-header-server-validation": expect(
        "sep-2243-server-no-xmcp-tool sep-2243-server-decode-base64 sep-2243-server-validate-param-match "
        "sep-2243-server-reject-invalid-param-chars sep-2243-server-reject-param-mismatch", AT_2026,
        "not testable: a tools file cannot annotate an argument x-mcp-header (unknown key), so mcpwrap publishes "
        "no Mcp-Param-* header to validate"),
    "input-required-result-basic-elicitation": expect("sep-2322-elicitation-incomplete", AT_2026,
        "mcpwrap names its input requests 'arguments' (missing arguments) and 'confirm'; the check wants the "
        "key 'user_name' (request-state, multi-round and tampered-state, which take any key, pass)"),
    "input-required-result-basic-sampling": expect("sep-2322-sampling-incomplete", AT_2026, NO_SAMPLING),
    "input-required-result-basic-list-roots": expect("sep-2322-list-roots-incomplete", AT_2026,
        "mcpwrap never asks for roots/list: path arguments are confined by the tools file (within), not by roots"),
    "input-required-result-multiple-input-requests": expect("sep-2322-multiple-inputs-incomplete", AT_2026,
        "wants elicitation, sampling and roots/list in one round; mcpwrap asks one form a round, never the others"),
    "input-required-result-capability-check": expect("sep-2322-respect-client-capabilities", AT_2026,
        "a call that needs a form from a client without elicitation gets -32021 (MissingRequiredClientCapability); "
        "the check wants a result that asks for sampling instead (" + NO_SAMPLING + ")"),
}


def run_suite(url: str, out: Path, *which: str) -> dict[str, list[dict[str, object]]]:
    """The server scenarios `which` selects (`--suite all --spec-version V`, or `--scenario NAME`):
    scenario name -> its checks."""
    assert NODE is not None
    done = subprocess.run([NODE, "--import", str(TS_DIR / "node20-fs.mjs"), str(SUITE), "server", "--url", url,
                           *which, "--output-dir", str(out)],
                          check=False, capture_output=True, text=True, timeout=SUITE_S, cwd=TS_DIR)
    results = {}
    for checks in out.glob("*/checks.json"):
        found = re.fullmatch(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z", checks.parent.name)
        assert found, checks
        results[found.group(1)] = json.loads(checks.read_text())
    assert results, f"the suite ran no scenario (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return results


def failures(checks: list[dict[str, object]]) -> dict[str, object]:
    """The failed checks of a scenario (a WARNING is an unmet SHOULD: reported, not failed)."""
    return {str(c["id"]): c.get("errorMessage") for c in checks if c["status"] == "FAILURE"}


@pytest.mark.skipif(NODE is None, reason="node is not installed (needed for the conformance suite)")
@pytest.mark.skipif(not SUITE.exists(), reason="the conformance suite is missing: run `npm ci --prefix tests/ts`")
@pytest.mark.parametrize("version", VERSIONS)
def test_official_conformance_suite(tmp_path: Path, version: str) -> None:
    with HttpServer(TOOLS, tmp_path) as server:
        results = run_suite(f"http://{server.host}:{server.port}{server.path}", tmp_path / "out",
                            "--suite", "all", "--spec-version", version)
    failed = {name: failures(checks) for name, checks in results.items()}
    missed = {name: failed.get(name, "not run") for name in MUST_PASS[version] if failed.get(name) != {}}
    assert not missed, f"scenarios that must pass did not: {missed}"
    expected = {name: e.checks[version] for name, e in EXPECTED_FAILURES.items() if version in e.checks}
    wrong = {name: {"failed": problems, "expected": sorted(expected.get(name, ()))}
             for name, problems in failed.items() if problems.keys() != expected.get(name, frozenset())}
    assert not wrong, "failures differ from EXPECTED_FAILURES:\n" + json.dumps(wrong, indent=1)
    gone = sorted(expected.keys() - results.keys())
    assert not gone, f"EXPECTED_FAILURES lists scenarios the suite no longer runs: {gone}"


@pytest.mark.skipif(NODE is None, reason="node is not installed (needed for the conformance suite)")
@pytest.mark.skipif(not SUITE.exists(), reason="the conformance suite is missing: run `npm ci --prefix tests/ts`")
@pytest.mark.skipif(NODE is None, reason="node is not installed (needed for the conformance suite)")
@pytest.mark.skipif(not SUITE.exists(), reason="the conformance suite is missing: run `npm ci --prefix tests/ts`")
@pytest.mark.parametrize("scenario", sorted(EXTENSION_SCENARIOS))
def test_extension_scenario(tmp_path: Path, scenario: str) -> None:
    """A tasks extension scenario, run by name: it fails exactly the checks the table names."""
    with HttpServer(TOOLS, tmp_path) as server:
        results = run_suite(f"http://{server.host}:{server.port}{server.path}", tmp_path / "out", "--scenario", scenario)
    stop_tasks(tmp_path / "state")
    assert scenario in results, f"the suite did not run {scenario}"
    assert failures(results[scenario]).keys() == EXTENSION_SCENARIOS[scenario][0], results[scenario]


def stop_tasks(state: Path) -> None:
    """Cancel the tasks a scenario left running (one parked on a question it never answered) and wait
    for their supervisors to exit."""
    store = Store.for_tools_file(state, TOOLS)
    live = [record for record in store.records() if not record.terminal]
    for record in live:
        with contextlib.suppress(TaskLookupError, TaskTerminalError):
            store.cancel(record.task_id)
    pids = [record.supervisor_pid for record in live if record.supervisor_pid]
    until(lambda: all(process_start(pid) is None for pid in pids), what="the scenario's supervisors to exit")


def test_the_table_explains_and_spares_the_required_scenarios() -> None:
    assert all(e.reason and e.checks and all(e.checks.values()) and e.checks.keys() <= set(VERSIONS)
               for e in EXPECTED_FAILURES.values())
    assert not EXPECTED_FAILURES.keys() & set().union(*MUST_PASS.values())
    assert all(bool(checks) == bool(reason) for checks, reason in EXTENSION_SCENARIOS.values())


# --- what the suite found, pinned without node ------------------------------------------------
def test_a_body_without_its_version_is_invalid_params_not_a_header_mismatch(tmp_path: Path) -> None:
    """The header names 2026-07-28 but the body carries no version: the body is what is wrong (-32602)."""
    params: dict[str, Any] = {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}
    with HttpServer(TOOLS, tmp_path) as server:
        for body_params in ({}, params):
            answer = server.send({"jsonrpc": "2.0", "id": 5, "method": "server/discover", "params": body_params},
                                 modern_headers("server/discover", body_params), MODERN)
            assert (answer.status, answer.final["error"]["code"], answer.final["id"]) == (400, -32602, 5)


def test_initialize_in_the_modern_envelope_is_an_unknown_method(tmp_path: Path) -> None:
    """2026-07-28 removed initialize: 404 / -32601, and no legacy session is minted for it."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"},
              "_meta": modern_meta()}
    with HttpServer(TOOLS, tmp_path) as server:
        answer = server.send({"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": params},
                             modern_headers("initialize", params), MODERN)
        assert (answer.status, answer.final["error"]["code"], answer.final["id"]) == (404, -32601, 6)
        assert "mcp-session-id" not in answer.headers
        assert server.initialize().status == 200          # without the envelope it is the legacy handshake
