"""What the shell commands load: guards for their start-up (bench/cli_startup.py has the figures).

Each command runs in a fresh interpreter that reports, after `main`, which modules it loaded
and what the cycle collector was left with. No timing: a module that should not load is the
regression, whatever the machine's speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcpwrap.tasks import store as tasks
from tests.harness import HANG_S, mcpwrap_cmd

KEY = b"k" * 32
REPORT = """
import gc, sys
sys.argv = ["mcpwrap", *sys.argv[1:]]
from mcpwrap.cli.main import main
try:
    main()
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)
"""
NEVER = {"jsonschema", "typer", "click", "pydantic", "platformdirs"}


def loaded(tmp_path: Path, *args: str) -> tuple[set[str], bool, bool]:
    """(modules loaded, collector enabled at the end, objects frozen) after `mcpwrap ARGS`."""
    done = subprocess.run([sys.executable, "-c", REPORT, *args], capture_output=True, text=True, timeout=HANG_S,
                          env={**os.environ, "MCPWRAP_STATE_DIR": str(tmp_path / "state")}, check=False)
    *modules, enabled, frozen = done.stderr.splitlines()[-1].split(" ")
    return {m.split(".")[0] if m.split(".")[0] in NEVER else m for m in modules}, enabled == "True", frozen == "True"


def test_call_of_a_plain_tool_loads_only_what_running_it_needs(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.echo]\ncommand = ["echo", "{text}"]\nargs.text = { type = "string" }\n')
    for _ in range(2):                    # the first sight of the file checks its schemas (jsonschema)
        modules, enabled, frozen = loaded(tmp_path, "call", str(tools), "echo", "-a", "text=hi")
    assert {"trio", "mcpwrap.run.process", "mcpwrap.protocol.asking"} <= modules   # asked what is missing as serve is
    assert "mcpwrap.run.spool" in modules     # output past max_output is kept, as serve keeps it (issue 28 item 11)
    assert not modules & (NEVER | {"mcpwrap.tasks.store", "mcpwrap.protocol.core", "mcpwrap.serve.stdio",
                                   "mcpwrap.protocol.rounds", "mcpwrap.protocol.sealing", "mcpwrap.protocol.actions"}), \
        "call loads what a plain tool does not use (the rounds with a client, their sealed state)"
    assert enabled and frozen             # imported without collection passes, then frozen: none walks them later


def test_tasks_commands_load_neither_trio_nor_the_runner(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.t]\nshell = "true"\ntask = "optional"\n')
    store = tasks.Store.for_tools_file(tmp_path / "state", tools)
    working, done = (store.create(tool="t", arguments={}, ttl_ms=600_000, poll_ms=100, tools_file=tools,
                                  digest="0" * 64, snapshot=None, key=KEY) for _ in range(2))
    store.claim(working.task_id, os.getpid(), tasks.process_start(os.getpid()))   # a live supervisor: this process
    store.finish(done.task_id, result={"content": [{"type": "text", "text": "ok\n"}], "isError": False})
    for args in (["list", str(tools)], ["show", working.task_id], ["result", done.task_id],
                 ["result", str(tools), working.task_id]):
        modules, _, _ = loaded(tmp_path, "tasks", *args)
        assert "mcpwrap.tasks.store" in modules, args
        assert not modules & (NEVER | {"trio", "mcpwrap.run.process"}), args
    assert store.get(working.task_id).status == "working"    # its supervisor was seen alive, not failed


def test_shell_commands_import_neither_typer_nor_jsonschema_for_a_known_file(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.echo]\ncommand = ["echo", "{text}"]\nargs.text = { type = "string", maxLength = 9 }\n')

    def never_loaded(*args: str) -> set[str]:
        return loaded(tmp_path, *args)[0] & NEVER

    assert never_loaded("check", str(tools)) == {"jsonschema"}             # the first sight of these bytes
    for words in (["check", str(tools)], ["list", str(tools)], ["call", str(tools), "echo", "-a", "text=hi"],
                  ["tasks", "list", str(tools)], ["call", "--help"]):
        assert never_loaded(*words) == set(), words
    assert never_loaded("call", str(tools), "echo", "-a", "text=far too long") == {"jsonschema"}   # it words the problem
    refused = subprocess.run(mcpwrap_cmd("call", str(tools), "echo", "-a", "text=far too long"), capture_output=True,
                             text=True, timeout=HANG_S, env={**os.environ, "MCPWRAP_STATE_DIR": str(tmp_path / "state")})
    assert refused.returncode == 2 and "'far too long' is too long" in refused.stderr


FIRST_ANSWERS = """
import sys
sys.argv = ["mcpwrap", *sys.argv[1:]]
from mcpwrap.cli import main as cli
from mcpwrap.protocol import jsonrpc
from mcpwrap.serve import common, launch

def first_answers(config, options, after_first_answers):
    # in the place of launch.run: the core answers stdin's requests as the front does before trio
    core = common.new_core(config, options)
    for line in sys.stdin.buffer:
        for action in core.receive(jsonrpc.decode_line(line)):
            sys.stdout.buffer.write(common.encoded(action.message))
    print(" ".join(sorted(sys.modules)), file=sys.stderr)
    after_first_answers()
    return 0

launch.run = first_answers
cli.main()
"""
MODERN = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"}}}
FIRST_REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "tests", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 4, "method": "server/discover", "params": MODERN},
    {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": MODERN}]
# What calls, questions, content and tasks need, the default secret file's platformdirs, the
# threads (the import thread starts once the answers already due are written) and the check of
# this machine's PATH (it runs once they are written: it only warns, on stderr).
NOT_FOR_THE_FIRST_ANSWERS = NEVER | {
    "threading", "queue", "shutil", "mcpwrap.config.machine",
    "trio", "mcpwrap.serve.stdio", "mcpwrap.serve.driver", "mcpwrap.run.process", "mcpwrap.run.contain", "mcpwrap.run.confine",
    "mcpwrap.run.output", "mcpwrap.run.worker", "mcpwrap.state.signing", "mcpwrap.protocol.sealing",
    "mcpwrap.result", "mcpwrap.run.spool", "mcpwrap.protocol.pages",
    "mcpwrap.protocol.argv", "mcpwrap.protocol.arguments", "mcpwrap.run.arguments", "mcpwrap.protocol.asking",
    "mcpwrap.protocol.rounds",
    "mcpwrap.protocol.tasking",
    "mcpwrap.protocol.resources", "mcpwrap.protocol.prompts", "mcpwrap.protocol.calls", "mcpwrap.protocol.content",
    "mcpwrap.protocol.task_requests"}


@pytest.mark.parametrize("content", [
    "", '[resources.notes]\npath = "notes.txt"\n[prompts.hello]\nmessages = [{ text = "hi" }]\n'])
def test_serve_answers_its_first_requests_with_no_module_they_do_not_need(tmp_path: Path, content: str) -> None:
    """initialize, ping, tools/list and server/discover are what the front answers while trio
    loads: whatever they import is on every session's way to its first answer, with or without
    resources and prompts in the file."""
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.echo]\ncommand = ["echo", "{text}"]\nargs.text = { type = "string" }\n' + content)
    env = {**os.environ, "MCPWRAP_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("MCPWRAP_SECRET_FILE", None)  # the default secret file, as a client config starts serve
    stdin = "".join(json.dumps(request) + "\n" for request in FIRST_REQUESTS)
    for _ in range(2):                    # the first sight of the file checks its schemas (jsonschema)
        done = subprocess.run([sys.executable, "-c", FIRST_ANSWERS, "serve", str(tools)], input=stdin,
                              capture_output=True, text=True, timeout=HANG_S, env=env, check=False)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3, 4, 5] and all("result" in a for a in answers), answers
    assert answers[2]["result"]["tools"][0]["name"] == "echo"
    modules = set(done.stderr.splitlines()[-1].split(" "))
    assert not {m for m in modules if m.split(".")[0] in NEVER or m in NOT_FOR_THE_FIRST_ANSWERS}, \
        "the first answers load what they do not use"


def test_the_default_secret_file_is_platformdirs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` writes the XDG rule out instead of importing platformdirs before its first answer."""
    import platformdirs

    from mcpwrap.cli.common import default_secret_file

    for xdg in (None, "/x/config", "  ", "relative/config"):
        if xdg is None:
            monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_CONFIG_HOME", xdg)
        assert default_secret_file() == platformdirs.user_config_path("mcpwrap") / "secret"
