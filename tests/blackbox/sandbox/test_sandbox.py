"""Defence in depth through a real `mcpwrap serve`: sandbox, limits, environment policy,
confined path arguments and toolsets.

Each test attacks one promise of the README's security model and checks that the call ends
with a clear result while the server goes on answering. Landlock tests skip, with the reason,
where the kernel has no Landlock; limit tests skip where the mechanism is missing.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.run import landlock, limits
from tests import procs
from tests.harness import MODERN, Server, mcpwrap_cmd, modern_meta

PY = sys.executable
# What the test interpreter needs to start inside a sandbox: its installation and the venv.
PY_PATHS = sorted({sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(PY))})
PY_READ = json.dumps(PY_PATHS)

needs_landlock = pytest.mark.skipif(landlock.abi() == 0, reason="this kernel has no Landlock")


def _text(result: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in result["content"])


def _call(server: Server, tool: str, **arguments: Any) -> dict[str, Any]:
    answer = server.call("tools/call", {"name": tool, "arguments": arguments})
    assert "result" in answer, answer
    return answer["result"]


def _serve(tmp_path: Path, toml: str, *extra: str, env: dict[str, str] | None = None) -> Server:
    tools = tmp_path / "tools.toml"
    tools.write_text(toml)
    server = Server(tools, tmp_path, *extra, env=env)
    server.initialize()
    return server


@needs_landlock
def test_sandbox_stops_reads_writes_and_tcp_outside_its_grants(tmp_path: Path) -> None:
    home = tmp_path / "home"                    # a planted secret, as in ~/.ssh
    home.mkdir()
    (home / "id_rsa").write_text("SECRET KEY")
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "notes.txt").write_text("hello from inside")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    accepted: list[Any] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port})).close(); print('connected')"
    toml = f"""
[server]
cwd = "work"
[server.sandbox]
read = {json.dumps(["{cwd}", *PY_PATHS])}
write = ["{{cwd}}/out"]

[tools.cat]
command = ["cat", "--", "{{path}}"]
args.path = {{ type = "string" }}

[tools.cat_free]
command = ["cat", "--", "{{path}}"]
args.path = {{ type = "string" }}
sandbox = false

[tools.write]
command = ["{PY}", "-c", "import sys; open(sys.argv[1], 'w').write('x'); print('wrote')", "{{path}}"]
args.path = {{ type = "string" }}

[tools.connect]
command = ["{PY}", "-c", "{connect}"]

[tools.connect_allowed]
command = ["{PY}", "-c", "{connect}"]
sandbox = {{ network = true }}

[tools.tmp]
shell = 'echo scratch > "$TMPDIR/f" && cat "$TMPDIR/f"'
"""
    with _serve(tmp_path, toml) as s:
        denied = _call(s, "cat", path=str(home / "id_rsa"))
        assert denied["isError"] and "SECRET" not in _text(denied) and "Permission denied" in _text(denied)
        assert _text(_call(s, "cat", path="notes.txt")).strip() == "hello from inside"
        # the restriction binds the sandboxed tool's spawner thread only, never the server's own
        assert _text(_call(s, "cat_free", path=str(home / "id_rsa"))) == "SECRET KEY"

        outside = work / "escaped.txt"
        assert _call(s, "write", path=str(outside))["isError"] and not outside.exists()
        assert _call(s, "write", path=str(home / "planted"))["isError"] and not (home / "planted").exists()
        assert _text(_call(s, "write", path="out/ok.txt")).strip() == "wrote"
        assert (work / "out" / "ok.txt").read_text() == "x"

        refused = _call(s, "connect")
        assert refused["isError"] and "PermissionError" in _text(refused) and not accepted
        assert _text(_call(s, "connect_allowed")).strip() == "connected"

        assert _text(_call(s, "tmp")).strip() == "scratch"      # a private TMPDIR is writable
        assert s.call("ping", {})["result"] == {}
    listener.close()


@needs_landlock
def test_a_sandboxed_tool_cannot_signal_the_server(tmp_path: Path) -> None:
    if landlock.abi() < 6:
        pytest.skip("signal scoping needs Landlock ABI 6")
    toml = f"""
[tools.kill]
command = ["{PY}", "-c", "import os, sys; os.kill(int(sys.argv[1]), 15)", "{{pid}}"]
args.pid = {{ type = "integer" }}
sandbox = {{ read = {PY_READ} }}
"""
    with _serve(tmp_path, toml) as s:
        result = _call(s, "kill", pid=s.proc.pid)
        assert result["isError"] and "PermissionError" in _text(result)
        assert s.call("ping", {})["result"] == {} and s.proc.poll() is None


def test_an_unenforceable_sandbox_is_refused_unless_not_required(tmp_path: Path) -> None:
    toml = """
[tools.strict]
command = ["echo", "ran"]
sandbox = { network = false }

[tools.lenient]
command = ["echo", "ran"]
sandbox = { network = false, required = false }
"""
    with _serve(tmp_path, toml, env={landlock.ABI_ENV: "3"}) as s:    # a kernel without TCP rules
        refused = _call(s, "strict")
        assert refused["isError"] and "nothing ran" in _text(refused) and "ABI 4" in _text(refused)
        assert "ran" not in _text(refused).replace("nothing ran", "")
        assert _text(_call(s, "lenient")).strip() == "ran"
        assert "ABI 4" in s.wait_stderr("'lenient' runs without what this machine cannot enforce")


def test_check_prints_each_tools_confinement_and_what_is_not_enforced(tmp_path: Path) -> None:
    tools = tmp_path / "tools.toml"
    tools.write_text("""
[tools.strict]
command = ["echo", "ran"]
sandbox = { network = false }
limits = { memory = "64MiB", cpu = "5s" }
env_inherit = ["LANG"]

[tools.lenient]
command = ["echo", "ran"]
sandbox = { network = false, required = false }

[tools.plain]
command = ["echo", "ran"]
""")
    done = subprocess.run(mcpwrap_cmd("check", str(tools)), capture_output=True, text=True, timeout=60,
                          env={**os.environ, landlock.ABI_ENV: "3"})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    strict, lenient = out.split("lenient: sandbox:")
    assert "strict: sandbox: read" in strict and "network denied" in strict
    assert "NOT ENFORCED HERE: network = false needs Landlock ABI 4 (this kernel has ABI 3)" in strict
    assert "so its calls are refused (required = true)" in strict
    assert "strict: limits: memory 64MiB (" in strict and "cpu 5s (RLIMIT_CPU" in strict
    assert "strict: environment: only PATH, LANG of the server's" in strict
    assert "so its calls run anyway (required = false)" in lenient
    assert "plain:" not in out


def test_limits_name_what_stopped_the_call(tmp_path: Path) -> None:
    gaps = limits.missing(__import__("mcpwrap.config.model", fromlist=["Limits"]).Limits(processes=16, memory=64 << 20))
    if gaps:
        pytest.skip("; ".join(gaps))
    bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)"
    hog = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))"
    toml = f"""
[tools.bomb]
command = ["{PY}", "-c", "{bomb.encode('unicode_escape').decode()}"]
timeout = "120s"
limits = {{ processes = 16 }}

[tools.hog]
command = ["{PY}", "-c", "{hog.encode('unicode_escape').decode()}"]
timeout = "120s"
limits = {{ memory = "64MiB" }}
"""
    with _serve(tmp_path, toml) as s:
        bombed = _call(s, "bomb")
        assert bombed["isError"] and "exceeded processes limit 16" in _text(bombed)
        hogged = _call(s, "hog")
        assert hogged["isError"] and "exceeded memory limit 64MiB" in _text(hogged)
        assert s.call("ping", {})["result"] == {}
        left = [p for p in procs.mine() if p.pid != s.proc.pid]
        assert not left, left                     # the call ended every process of the bomb


def test_env_inherit_false_hides_the_servers_environment(tmp_path: Path) -> None:
    toml = """
[tools.env_default]
command = ["env"]

[tools.env_none]
command = ["env"]
env_inherit = false

[tools.env_some]
command = ["env"]
env_inherit = ["VISIBLE_ONE"]
"""
    env = {"SECRET_TOKEN": "hunter2", "VISIBLE_ONE": "shown"}
    with _serve(tmp_path, toml, env=env) as s:
        default = _text(_call(s, "env_default"))
        assert "SECRET_TOKEN=hunter2" in default
        assert not [line for line in default.splitlines()
                    if line.startswith("MCPWRAP_") and not line.startswith("MCPWRAP_CALL=")]
        none = _text(_call(s, "env_none"))
        assert "hunter2" not in none and "VISIBLE_ONE" not in none and "PATH=" in none
        some = _text(_call(s, "env_some"))
        assert "VISIBLE_ONE=shown" in some and "hunter2" not in some


@pytest.mark.parametrize("version", ["2025-03-26", MODERN])
def test_path_arguments_cannot_leave_their_roots(tmp_path: Path, version: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "inside.txt").write_text("fine")
    (data / "sub").mkdir()
    (data / "link").symlink_to("/etc/passwd")
    (data / "dirlink").symlink_to("/etc")
    marks = tmp_path / "marks"
    toml = f"""
[tools.read]
command = ["sh", "-c", 'echo ran >> "{marks}"; cat -- "$1"', "sh", "{{path}}"]
args.path = {{ type = "string", format = "path", within = ["{data}"], must_exist = true, kind = "file" }}
"""
    tools = tmp_path / "tools.toml"
    tools.write_text(toml)
    with Server(tools, tmp_path) as s:
        if version == MODERN:
            def call(path: str) -> dict[str, Any]:
                return s.call("tools/call", {"name": "read", "arguments": {"path": path}, "_meta": modern_meta()})
        else:
            s.initialize(version)

            def call(path: str) -> dict[str, Any]:
                return s.call("tools/call", {"name": "read", "arguments": {"path": path}})
        for attack in [str(data / ".." / ".." / "etc" / "passwd"), "../../etc/passwd", str(data / "link"),
                       str(data / "dirlink" / "passwd"), "/etc/passwd", str(data / "missing.txt"), str(data / "sub")]:
            answer = call(attack)
            refusal = json.dumps(answer)
            if version == MODERN:                         # invalid arguments are a result from 2025-06-18 on
                assert answer["result"]["isError"] and "nothing ran" in _text(answer["result"]), answer
            else:
                assert answer["error"]["code"] == -32602, answer
            assert "root:" not in refusal
        assert not marks.exists()                     # refused before anything ran
        assert _text(call(str(data / "inside.txt"))["result"]).strip() == "fine"
        assert marks.read_text() == "ran\n"


def test_toolsets_select_what_is_served(tmp_path: Path) -> None:
    toml = """
[tools.look]
command = ["echo", "look"]
annotations = { readOnlyHint = true }

[tools.change]
command = ["echo", "change"]

[tools.other]
command = ["echo", "other"]
annotations = { readOnlyHint = true }
"""
    def names(*extra: str) -> list[str]:
        with _serve(tmp_path, toml, *extra) as s:
            return sorted(t["name"] for t in s.call("tools/list", {})["result"]["tools"])

    assert names("--read-only") == ["look", "other"]
    assert names("--only", "change,look") == ["change", "look"]
    assert names("--exclude", "other") == ["change", "look"]
    with _serve(tmp_path, toml, "--read-only") as s:
        hidden = s.call("tools/call", {"name": "change", "arguments": {}})
        assert "change" in json.dumps(hidden) and "unknown tool" in json.dumps(hidden).lower()
        assert _text(_call(s, "look")).strip() == "look"
    tools = tmp_path / "tools.toml"
    bad = subprocess.run(mcpwrap_cmd("serve", str(tools), "--only", "look,nope"), capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60)
    assert bad.returncode == 2 and "nope" in bad.stderr



@needs_landlock
def test_a_sandboxed_tool_run_as_a_task_is_confined_too(tmp_path: Path) -> None:
    """A durable task runs in a supervisor, not in the server: the sandbox goes with the tool."""
    secret = tmp_path / "home" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TASK SECRET")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "ok.txt").write_text("task inside")
    tools = tmp_path / "tools.toml"
    tools.write_text("""
[server]
cwd = "work"
[tools.cat]
command = ["cat", "--", "{path}"]
task = "optional"
sandbox = { read = ["{cwd}"] }
args.path = { type = "string" }
""")

    def as_task(path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(mcpwrap_cmd("call", str(tools), "cat", "--task", "--arg", f"path={path}",
                                          "--state-dir", str(tmp_path / "state"), "--secret-file", str(tmp_path / "key")),
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    denied = as_task(str(secret))
    assert denied.returncode == 1 and "TASK SECRET" not in denied.stdout + denied.stderr, denied
    assert "Permission denied" in denied.stdout + denied.stderr
    allowed = as_task("ok.txt")
    assert allowed.returncode == 0 and "task inside" in allowed.stdout, allowed


@needs_landlock
def test_an_evicted_sandbox_policy_still_serves_the_call_that_holds_it(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    """Reloads change policies and the cache keeps few: one evicted while a call holds it (waiting
    for a spawn slot) must still spawn for that call, then stop and take its TMPDIR root with it."""
    import subprocess as sp

    import trio

    from mcpwrap.config import model, tools
    from mcpwrap.run import confine

    monkeypatch.setattr(confine.Sandboxed, "KEPT", 1)
    monkeypatch.setattr(confine.Sandboxed, "_cache", {})

    def policy(extra: str) -> model.Sandbox:
        return model.Sandbox(read=(*tools.SYSTEM_READ, str(tmp_path / extra)),
                             write=tools.SYSTEM_WRITE, network=False, required=True)

    async def main() -> None:
        held = confine.Sandboxed.of(policy("a"))
        other = confine.Sandboxed.of(policy("b"))                # evicts the held one
        assert held.retired
        with trio.fail_after(60):
            child = await held.worker.run(functools.partial(sp.Popen, ["true"], stdout=sp.DEVNULL, stderr=sp.DEVNULL))
        assert child.wait(timeout=60) == 0
        held.release()
        assert not os.path.exists(held.root)                      # stopped once nobody held it
        other.release()

    trio.run(main)
