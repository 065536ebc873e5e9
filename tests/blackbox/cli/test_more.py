"""The newcomer's frictions (issue 15) from a shell: task ids alone and dash-led, PATH checks,
client-config pins, JSON spelling, one stderr, prompts that re-ask, `call --task`."""

from __future__ import annotations

import base64
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpwrap.tasks import store as tasks
from tests.harness import HANG_S, mcpwrap_cmd

KEY = b"k" * 32
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpwrap_cmd(*args), capture_output=True, text=True, timeout=HANG_S,
                          env={**os.environ, **(env or {})}, input=stdin)


def finished_task(state: Path, tools: Path, task_id: str, result: dict[str, object]) -> None:
    """A completed record written straight into FILE's store (no supervisor needed)."""
    store = tasks.Store.for_tools_file(state, tools)
    store.create(tool="t", arguments={}, ttl_ms=600_000, poll_ms=100, tools_file=tools, digest="0" * 64,
                 snapshot=None, key=KEY, task_id=task_id)
    store.finish(task_id, result=result)


DASHED = "-" + "A" * 21                   # a 22-character id of the old kind, led by "-"
DOUBLE = "--" + "b" * 20
OPTION_LIKE = "-o" + "c" * 20            # `tasks result` has -o: an id must not read as -o with a value


@pytest.mark.parametrize("task_id", ["x" + "A" * 22, DASHED, DOUBLE, OPTION_LIKE])
def test_tasks_commands_find_an_id_alone_in_every_store_even_dash_led(tmp_path: Path, task_id: str) -> None:
    state = tmp_path / "state"
    other, tools = tmp_path / "other.toml", tmp_path / "tools.toml"
    finished_task(state, other, "z" * 22, {"content": [{"type": "text", "text": "not this"}]})
    finished_task(state, tools, task_id, {"content": [{"type": "text", "text": "done here"}]})
    sd = ("--state-dir", str(state))
    for words in (["result", task_id, *sd], ["result", *sd, task_id], ["result", *sd, "--", task_id],
                  ["result", str(tools), task_id, *sd], ["result", str(tools), *sd, "--", task_id]):
        done = run("tasks", *words)
        assert (done.returncode, done.stdout) == (0, "done here\n"), (words, done.stderr)
    shown = run("tasks", "show", task_id, "--json", *sd)
    assert shown.returncode == 0 and json.loads(shown.stdout)["taskId"] == task_id, shown.stderr
    again = run("tasks", "cancel", task_id, *sd)
    assert again.returncode == 1 and "already completed" in again.stderr
    unknown = run("tasks", "result", "q" * 22, *sd)
    assert unknown.returncode == 2 and f"no task {'q' * 22!r} in any store under {state}" in unknown.stderr


def test_tasks_result_writes_binary_content_to_output(tmp_path: Path) -> None:
    state, tools = tmp_path / "state", tmp_path / "tools.toml"
    blob = base64.b64encode(PNG).decode()
    finished_task(state, tools, "c" * 22, {"content": [{"type": "text", "text": "a chart"},
                                                       {"type": "image", "data": blob, "mimeType": "image/png"}]})
    out = tmp_path / "chart.png"
    done = run("tasks", "result", "c" * 22, "--output", str(out), "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (0, "a chart\n"), done.stderr
    assert out.read_bytes() == PNG and f"wrote image/png, {len(PNG)} bytes, to {out}" in done.stderr


ROOT = Path(__file__).parents[3]


def test_repo_tools_search_takes_a_pattern_that_starts_with_a_dash() -> None:
    done = run("call", str(ROOT / "examples" / "repo-tools.toml"), "search", "--arg", "pattern=-> None:",
               "--arg", "path=mcpwrap/cli/main.py")
    assert done.returncode == 0, done.stderr
    assert "mcpwrap/cli/main.py:" in done.stdout and "-> None:" in done.stdout


def test_check_warns_for_each_program_not_on_path_and_fails_with_strict(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mine").write_text("#!/bin/sh\n")
    (bin_dir / "mine").chmod(0o755)
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.gone]\ncommand = ["no-such-program-mcpwrap", "x"]\n'
                     '[tools.sh]\ncommand = ["sh", "-c", "true"]\n'
                     '[tools.rel]\ncommand = ["./missing.sh"]\n'
                     f'[tools.pinned]\ncommand = ["mine"]\nenv = {{ PATH = "{bin_dir}" }}\n'
                     '[tools.script]\nshell = "no-such-program-either"\n')
    warned = run("check", str(tools))
    assert (warned.returncode, warned.stdout) == (0, f"{tools}: ok, 5 tool(s)\n"), warned.stderr
    lines = warned.stderr.splitlines()
    assert len(lines) == 2, lines
    assert "warning: tool 'gone': program 'no-such-program-mcpwrap' is not on PATH" in lines[0]
    assert f"warning: tool 'rel': program './missing.sh' is not an executable file (in {tmp_path})" in lines[1]
    strict = run("check", "--strict", str(tools))
    assert strict.returncode == 3 and strict.stdout == "" and strict.stderr.count("error: tool") == 2


def test_client_config_pins_path_and_env(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.a]\ncommand = ["true"]\n')
    done = run("client-config", str(tools), "--pin-path", "--env", "LANG=C.UTF-8", "-e", "X=a=b",
               env={"PATH": f"/opt/bin:{os.environ['PATH']}"})
    entry = json.loads(done.stdout)["mcpServers"]["t"]
    assert entry["env"] == {"LANG": "C.UTF-8", "X": "a=b", "PATH": f"/opt/bin:{os.environ['PATH']}"}
    assert "env" not in json.loads(run("client-config", str(tools)).stdout)["mcpServers"]["t"]
    bad = run("client-config", str(tools), "--env", "novalue")
    assert bad.returncode == 2 and "--env 'novalue' must look like NAME=VALUE" in bad.stderr


def test_check_refuses_a_secret_file_serve_would_refuse(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.ask]\ncommand = ["true"]\nconfirm = "Really?"\n')
    secret = tmp_path / "secret"
    assert run("check", str(tools), "--secret-file", str(secret)).returncode == 0      # serve would create it
    assert run("secret", "init", "--secret-file", str(secret)).returncode == 0
    assert run("check", str(tools), "--secret-file", str(secret)).returncode == 0
    secret.chmod(0o644)
    refused = run("check", str(tools), env={"MCPWRAP_SECRET_FILE": str(secret)})
    assert refused.returncode == 3 and refused.stdout == "", refused.stderr
    assert "`serve` would refuse the secret file that 'ask' need" in refused.stderr
    served = subprocess.run(mcpwrap_cmd("serve", str(tools), "--secret-file", str(secret), "--state-dir",
                                        str(tmp_path / "state")), capture_output=True, text=True, timeout=HANG_S,
                            stdin=subprocess.DEVNULL)
    assert served.returncode == 3                   # what check foretold
    quiet = tmp_path / "q.toml"
    quiet.write_text('[tools.a]\ncommand = ["true"]\n')
    assert run("check", str(quiet), "--secret-file", str(secret)).returncode == 0   # no tool needs it


def test_list_spells_values_as_json(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.a]\ncommand = ["true", "{f}", "{n}", "{s}", "{level}"]\n'
                     'args.f = { type = "boolean", default = false }\nargs.n = { type = "number", optional = true }\n'
                     'args.s = { type = "string", default = "x y" }\n'
                     'args.level = { type = ["integer", "string"], default = 0 }\n')
    listed = run("list", str(tools)).stdout.splitlines()
    assert listed[1:] == ["    f: boolean (default false)", "    n: number (optional)",
                          '    s: string (default "x y")', "    level: integer or string (default 0)"], listed


def test_a_failing_tools_stderr_is_printed_once(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.f]\nshell = "echo out; echo oops-1 >&2; echo oops-2 >&2; exit 3"\n'
                     '[tools.quiet]\nshell = "echo out; exit 4"\n')
    done = run("call", str(tools), "f")
    assert done.returncode == 1
    assert (done.stdout + done.stderr).count("oops-1") == 1 and (done.stdout + done.stderr).count("oops-2") == 1
    assert done.stderr == "oops-1\noops-2\n" and done.stdout == "out\n[f exited with status 3]\n"
    assert run("call", str(tools), "quiet").stdout == "out\n\n[quiet exited with status 4]\n"
    as_json = json.loads(run("call", str(tools), "f", "--json").stdout)     # a client still gets the tail
    assert "oops-1\noops-2\n[f exited" in as_json["content"][0]["text"]


def test_call_task_runs_a_durable_task_from_the_shell(tmp_path: Path) -> None:
    tools, state, secret = tmp_path / "t.toml", tmp_path / "state", tmp_path / "secret"
    tools.write_text('[tools.job]\ncommand = ["echo", "job {n}"]\ntask = "optional"\nargs.n = { type = "integer" }\n'
                     '[tools.now]\ncommand = ["echo", "now"]\n')
    where = ("--state-dir", str(state), "--secret-file", str(secret))
    waited = run("call", str(tools), "job", "-a", "n=1", "--task", *where)
    assert (waited.returncode, waited.stdout) == (0, "job 1\n"), waited.stderr
    first = waited.stderr.split()[1]
    assert tasks.Store.for_tools_file(state, tools).get(first).status == "completed"
    started = run("call", str(tools), "job", "-a", "n=2", "--task", "--no-wait", *where)
    assert started.returncode == 0 and started.stderr == ""
    task_id = started.stdout.strip()
    assert task_id != first and run("tasks", "result", task_id, "--wait", "--state-dir", str(state)).stdout == "job 2\n"
    never = run("call", str(tools), "now", "--task", *where)
    assert never.returncode == 2 and 'task = "never"' in never.stderr
    assert run("call", str(tools), "now", "--no-wait").returncode == 2


class Terminal:
    """A process with stdin, stdout and stderr on a pseudo-terminal, driven by what it writes."""

    def __init__(self, args: list[str]) -> None:
        self.controller, terminal = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=terminal, stdout=terminal, stderr=terminal, close_fds=True,
                                     env={**os.environ, "NO_COLOR": "1"})
        os.close(terminal)
        self.seen = b""

    def expect(self, text: bytes) -> bytes:
        """Everything written up to and including `text` (which must come within the hang guard)."""
        deadline = time.monotonic() + HANG_S
        while text not in self.seen:
            ready = select.select([self.controller], [], [], max(0.0, deadline - time.monotonic()))[0]
            try:
                chunk = os.read(self.controller, 65536) if ready else b""
            except OSError:               # EIO: the terminal's last writer is gone
                chunk = b""
            if not chunk:
                raise AssertionError(f"{text!r} never came; the terminal shows {self.seen!r}")
            self.seen += chunk
        upto, _, self.seen = self.seen.partition(text)
        return upto + text

    def send(self, text: bytes) -> None:
        os.write(self.controller, text)

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=HANG_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            os.close(self.controller)


def test_serve_on_a_terminal_says_it_waits_for_a_client(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.a]\ncommand = ["true"]\n')
    serve = ("serve", str(tools), "--state-dir", str(tmp_path / "state"))
    term = Terminal(mcpwrap_cmd(*serve))
    try:
        term.expect(b"waiting for an MCP client")
        term.send(b"\x04")                 # end of input: the server stops
    finally:
        assert term.close() == 0
    piped = subprocess.run(mcpwrap_cmd(*serve), stdin=subprocess.DEVNULL, capture_output=True, timeout=HANG_S)
    assert piped.returncode == 0 and b"waiting" not in piped.stderr


def test_the_prompt_for_an_elicited_argument_shows_allowed_values_and_asks_again(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.deploy]\ncommand = ["echo", "to {target} x{n}"]\n'
                     'args.target = { type = "string", enum = ["staging", "prod"], elicit = true, description = "Where to" }\n'
                     'args.n = { type = "integer", minimum = 1, elicit = true }\n')
    term = Terminal(mcpwrap_cmd("call", str(tools), "deploy"))
    try:
        term.expect(b"Where to [staging/prod]: ")
        term.send(b"qa\n")
        assert b"'qa' is not one of ['staging', 'prod']; try again" in term.expect(b"Where to [staging/prod]: ")
        term.send(b"prod\n")
        term.expect(b"n [integer]: ")
        term.send(b"two\n")
        assert b"'n' takes integer, written as JSON; try again" in term.expect(b"n [integer]: ")
        term.send(b"0\n")
        assert b"0 is less than the minimum of 1; try again" in term.expect(b"n [integer]: ")
        term.send(b"2\n")
        term.expect(b"to prod x2")
    finally:
        assert term.close() == 0


def test_an_answer_is_checked_as_serve_checks_it_and_asked_again(tmp_path: Path) -> None:
    """A typed answer passes the prompt only if the call's own check would pass it (formats included)."""
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.plan]\ncommand = ["echo", "on {day}"]\n'
                     'args.day = { type = "string", format = "date", elicit = true }\n')
    term = Terminal(mcpwrap_cmd("call", str(tools), "plan"))
    try:
        term.expect(b"day [string]: ")
        term.send(b"tomorrow\n")
        assert b"is not a 'date'; try again" in term.expect(b"day [string]: ")
        term.send(b"2030-01-02\n")
        term.expect(b"on 2030-01-02")
    finally:
        assert term.close() == 0


def test_given_arguments_are_refused_before_anything_is_asked(tmp_path: Path) -> None:
    """As over MCP: what was given is checked first, so nobody answers questions for a call that cannot run."""
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.deploy]\ncommand = ["echo", "{target} {n}"]\nargs.n = { type = "integer" }\n'
                     'args.target = { type = "string", elicit = true }\n')
    term = Terminal(mcpwrap_cmd("call", str(tools), "deploy", "-a", "n=[1]"))
    try:
        shown = term.expect(b"(nothing ran)")
        assert b"invalid arguments for 'deploy'" in shown and b"target" not in shown, shown
    finally:
        assert term.close() == 2


def test_an_elicited_argument_is_never_skipped_off_a_terminal(tmp_path: Path) -> None:
    """An optional argument marked `elicit` is asked for; where nobody can be asked, nothing runs
    (serve refuses such a call for a client without elicitation alike)."""
    marker = tmp_path / "ran"
    tools = tmp_path / "t.toml"
    tools.write_text(f'[tools.note]\ncommand = ["touch", "{marker}"]\n'
                     'args.why = { type = "string", optional = true, elicit = true }\n')
    done = run("call", str(tools), "note", stdin="")
    assert done.returncode == 2 and "why" in done.stderr and "nothing ran" in done.stderr, done.stderr
    assert not marker.exists()
    given_it = run("call", str(tools), "note", "-a", "why=tidy", stdin="")
    assert given_it.returncode == 0 and marker.exists(), given_it.stderr


def test_the_default_state_dir_is_platformdirs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    from mcpwrap.cli.common import default_state_dir

    for xdg in (None, "/x/state", "  "):
        if xdg is None:
            monkeypatch.delenv("XDG_STATE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_STATE_HOME", xdg)
        assert default_state_dir() == platformdirs.user_state_path("mcpwrap")


def test_help_shows_metavars_not_python_types() -> None:
    shown = run("call", "--help", env={"COLUMNS": "100"})
    assert shown.returncode == 0 and shown.stdout.startswith("Usage: mcpwrap call [OPTIONS] [FILE] TOOL [JSON]\n")
    assert "-a, --arg NAME=VALUE" in shown.stdout and "-o, --output PATH" in shown.stdout
    for path in (["serve"], ["check"], ["list"], ["call"], ["tasks", "result"], ["client-config"], ["secret", "init"], []):
        text = run(*path, "--help").stdout
        assert text.startswith("Usage: mcpwrap") and not re.search(r"<(bool|str|path|file|list\[str\]|int)>|\{file\}", text), text
    assert "Usage: mcpwrap tasks result [OPTIONS] [FILE] TASK_ID\n" in run("tasks", "result", "--help").stdout
    assert "--watch / --no-watch" in run("serve", "--help").stdout


def test_usage_errors_say_what_and_exit_2(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.echo]\ncommand = ["echo", "{text}"]\nargs.text = { type = "string" }\n')
    for words, error in ((["call"], "Missing argument 'FILE'."), (["call", str(tools)], "Missing argument 'TOOL'."),
                         (["call", str(tools), "echo", "--nope"], "No such option: --nope"),
                         (["call", str(tools), "echo", "{}", "extra"], "Got unexpected extra argument (extra)"),
                         (["call", str(tools), "echo", "--arg"], "Option '--arg' requires an argument."),
                         (["call", str(tools), "echo", "--json=yes"], "Option '--json' does not take a value."),
                         (["nope"], "No such command 'nope'."), (["tasks", "nope"], "No such command 'nope'.")):
        done = run(*words)
        assert done.returncode == 2 and done.stdout == "" and done.stderr.endswith(f"\nError: {error}\n"), (words, done.stderr)
    attached = run("call", str(tools), "echo", "-atext=x y", "--", "{}")        # -aVALUE, and -- ends the options
    assert (attached.returncode, attached.stdout) == (0, "x y\n"), attached.stderr
    bare = run("tasks")
    assert bare.returncode == 2 and "Commands:" in bare.stderr and "result" in bare.stderr


def test_the_confirmation_on_a_terminal_runs_only_on_yes(tmp_path: Path) -> None:
    """A guard for the prompt that replaced typer.confirm when typer left the call path."""
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.rm]\ncommand = ["echo", "removed {what}"]\nconfirm = "Remove {what}?"\n'
                     'args.what = { type = "string" }\n')
    for answer, code, shown in ((b"\n", 1, b"declined; nothing ran"), (b"y\n", 0, b"removed it")):
        term = Terminal(mcpwrap_cmd("call", str(tools), "rm", "-a", "what=it"))
        try:
            term.expect(b"Remove it? [y/N]: ")
            term.send(answer)
            term.expect(shown)
        finally:
            assert term.close() == code


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.a]\ncommand = ["true"]\n')
    read, write = os.pipe()
    os.close(read)                        # gone before the first write: that write fails with EPIPE
    try:
        done = subprocess.run(mcpwrap_cmd("list", str(tools)), stdout=write, stderr=subprocess.PIPE, timeout=HANG_S)
    finally:
        os.close(write)
    assert done.returncode == 1 and done.stderr == b"", done.stderr


def test_ctrl_c_on_a_call_stops_it_without_a_traceback(tmp_path: Path) -> None:
    tools = tmp_path / "t.toml"
    tools.write_text('[tools.wait]\nshell = "echo waiting >&2; exec sleep 600"\n')
    term = Terminal(mcpwrap_cmd("call", str(tools), "wait"))
    try:
        term.expect(b"waiting")
        os.kill(term.proc.pid, signal.SIGINT)        # what Ctrl-C sends to the foreground process group
        assert b"Traceback" not in term.expect(b"mcpwrap: interrupted")
    finally:
        assert term.close() == 130


def test_serve_tool_options_serve_tools_with_no_file_to_the_python_sdk(tmp_path: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, cwd=str(tmp_path), env=dict(os.environ),
        args=["-m", "mcpwrap", "serve", "--state-dir", str(tmp_path / "state"), "--secret-file", str(tmp_path / "secret"),
              "--tool", "count=seq -s , {n:integer}", "--tool", "greet=echo 'hello there' {name} {punct?}"])

    async def body() -> None:
        with anyio.fail_after(HANG_S):
            async with Client(params, mode="legacy", read_timeout_seconds=HANG_S) as client:
                listed = {t.name: t.input_schema for t in (await client.list_tools()).tools}
                assert listed["count"]["properties"] == {"n": {"type": "integer"}} and listed["count"]["required"] == ["n"]
                assert listed["greet"]["required"] == ["name"] and "punct" in listed["greet"]["properties"]
                counted = await client.call_tool("count", {"n": 3})
                assert counted.is_error is False and counted.content[0].text == "1,2,3\n"   # type: ignore[union-attr]
                greeted = await client.call_tool("greet", {"name": "you; $(id)"})
                assert greeted.content[0].text == "hello there you; $(id)\n"               # type: ignore[union-attr]
                refused = await client.call_tool("count", {"n": "three"})
                assert refused.is_error is True

    anyio.run(body, backend="trio")


def test_tool_options_are_checked_like_a_tools_file(tmp_path: Path) -> None:
    env = {"MCPWRAP_STATE_DIR": str(tmp_path / "state")}
    for words, code, said in ((["--tool", "x=echo {a:float}"], 2, "{a:float} must be one of string, integer"),
                              (["--tool", "x=echo {a} {a:integer}"], 2, "the same each time"),
                              (["--tool", "noequals"], 2, "must look like NAME=COMMAND"),
                              (["--tool", "x=echo 'open"], 2, "No closing quotation"),
                              (["--tool", "bad name=echo"], 3, "(--tool):4:1: tool name 'bad name' must be"),
                              (["--tool", "x={prog} a"], 3, "command[0] (the program) cannot be a placeholder"),
                              ([], 2, "Give a tools FILE or --tool"),
                              ([str(tmp_path / "t.toml"), "--tool", "x=echo"], 2, "not both")):
        done = run("serve", *words, env=env, stdin="")
        assert done.returncode == code and said in done.stderr, (words, done.stderr)


@pytest.mark.parametrize(("program", "expect"), [
    ("git", ['[tools."git_log"]', 'command = ["git","log","{operands}"]']),
    ("tar", ['args.create = { type = "boolean", flag = "--create"', '"--directory={directory}"', "args.level = { type = \"integer\""]),
    ("grep", ['"--regexp={regexp}"', 'args.ignore_case = { type = "boolean", flag = "--ignore-case"', '"--","{operands}"']),
])
def test_init_from_help_drafts_a_file_that_checks(tmp_path: Path, program: str, expect: list[str]) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    draft = tmp_path / f"{program}.toml"
    done = run("init", "--from-help", program, str(draft))
    assert done.returncode == 0 and "(check: ok)" in done.stdout, done.stderr
    text = draft.read_text()
    assert all(e in text for e in expect), text[:2000]
    checked = run("check", str(draft), env={"MCPWRAP_STATE_DIR": str(tmp_path / "state")})
    assert checked.returncode == 0 and checked.stdout.startswith(f"{draft}: ok"), checked.stderr


def test_init_from_help_writes_nothing_that_does_not_check(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\nusage: fake <command>\n\n   one    First\n   two    Second\n"
                    f"   {'x' * 130}    Far too long a name\nEOF\n")
    fake.chmod(0o755)
    draft = tmp_path / "fake.toml"
    done = run("init", "--from-help", str(fake), str(draft))
    assert done.returncode == 3 and not draft.exists()
    assert "must be 1-128 characters" in done.stderr and "the draft does not check" in done.stderr


def test_the_quick_exit_still_runs_exit_handlers_and_flushes(tmp_path: Path) -> None:
    """`entry` skips the interpreter's teardown, not the runner's cgroup cleanup nor buffered output."""
    from mcpwrap.run import contain

    tools = tmp_path / "t.toml"
    tools.write_text('[tools.few]\ncommand = ["echo", "a few bytes"]\n')           # they would sit in the buffer
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}      # stdout a buffered pipe
    proc = subprocess.Popen(mcpwrap_cmd("call", str(tools), "few"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = proc.communicate(timeout=HANG_S)
    assert (proc.returncode, out) == (0, b"a few bytes\n"), err
    base = contain._own_cgroup2()          # (looked at before containment(), whose start removes dead owners' dirs)
    left = base is not None and os.path.exists(os.path.join(base, f"mcpwrap-{os.stat('/proc/self/ns/pid').st_ino}-{proc.pid}"))
    if base is None or not contain.containment().startswith("cgroup v2"):
        pytest.skip("no cgroup v2 containment here: no exit handler to see")
    assert not left
