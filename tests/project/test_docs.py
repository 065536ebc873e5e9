"""The documentation tells the truth: man pages render cleanly and cover the CLI and the
tools-file keys, and README.md names only commands and options that exist, pastes JSON
that is what `client-config` prints, and keeps the set-up commands CI runs."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import content, tools
from mcpwrap.config import load as config_module

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
MAN_PAGES = [ROOT / "man" / "mcpwrap.1", ROOT / "man" / "mcpwrap-tools.5"]

# The README's first set-up command, kept byte-for-byte (the second must equal .ci/run's).
INSTALL_COMMAND = ("python3 -m venv .venv && .venv/bin/pip install . && "
                   ".venv/bin/mcpwrap call examples/repo-tools.toml search --arg pattern=mcpwrap")
CI_MARKER = "# The README's test command, verbatim:"
# README heading -> `mcpwrap client-config --client` value
CLIENT_HEADINGS = {"Claude Desktop": "claude-desktop", "Claude Code": "claude-code",
                   "VS Code": "vscode", "Cursor": "cursor"}
README_MCPWRAP = "/home/you/.local/bin/mcpwrap"
README_TOOLS = "/home/you/project/tools.toml"


def run_mcpwrap(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m mcpwrap ...` with plain, wide help output."""
    full_env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "mcpwrap", *args], capture_output=True, text=True,
                          timeout=60, env=full_env, cwd=ROOT)


# --- man pages ----------------------------------------------------------------------------
def plain_roff(text: str) -> str:
    """Roff source as the words a reader sees (font changes dropped, escapes resolved)."""
    for escape, char in ((r"\(dq", '"'), (r"\(aq", "'"), (r"\(ha", "^"), (r"\(ti", "~"),
                         (r"\(lq", '"'), (r"\(rq", '"'), (r"\-", "-"), (r"\e", "\\"), (r"\&", "")):
        text = text.replace(escape, char)
    return re.sub(r"\\f[BIRP]", "", text)


@pytest.mark.parametrize("page", MAN_PAGES, ids=lambda p: p.name)
def test_man_page_renders_without_warnings(page: Path) -> None:
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed (apt-get install groff-base)")
    done = subprocess.run([groff, "-man", "-ww", "-z", str(page)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stderr


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, path + (name,))


def _cli() -> Any:
    import typer

    from mcpwrap.cli.completion import build_app

    return typer.main.get_command(build_app())


def _options(command: Any) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *getattr(p, "secondary_opts", ()))
            if o.startswith("-")}


def test_man_page_documents_every_command_and_option() -> None:
    text = plain_roff((ROOT / "man" / "mcpwrap.1").read_text())
    missing = []
    for path, command in _commands(_cli()):
        if path and " ".join(path) not in text:
            missing.append(" ".join(path))
        missing += [f"{' '.join(path) or 'mcpwrap'} {o}" for o in sorted(_options(command) | {"--help"})
                    if o not in text]
    assert not missing, f"man/mcpwrap.1 does not mention: {missing}"


def test_man_page_documents_every_tools_file_key() -> None:
    text = (ROOT / "man" / "mcpwrap-tools.5").read_text()
    keys = (config_module.SERVER_KEYS | tools.TOOL_KEYS | tools.ARG_OWN_KEYS
            | content.SPOOL_KEYS | content.RESOURCE_KEYS | content.PROMPT_KEYS
            | content.PROMPT_ARG_KEYS | content.MESSAGE_KEYS)
    documented = set(re.findall(r'^\.BR ([a-z_]+) " \(', text, re.M))    # .BR key " (type)"
    assert r'.BR args.\fINAME\fP " (table)"' in text
    assert not (keys - {"args"}) - documented, sorted((keys - {"args"}) - documented)


def test_man_page_examples_are_valid_tools_files() -> None:
    text = (ROOT / "man" / "mcpwrap-tools.5").read_text()
    blocks = [plain_roff(b) for b in re.findall(r"^\.EX\n(.*?)^\.EE", text, re.S | re.M)]
    files = [b for b in blocks if b.startswith("[")]
    assert len(files) >= 4
    for block in files:
        try:
            config_module.loads(block.encode(), Path("example.toml"))
        except config_module.ConfigError as exc:
            pytest.fail(f"example in mcpwrap-tools(5) does not check:\n{block}\n{exc}")


# --- README ---------------------------------------------------------------------------------
def readme_code() -> list[str]:
    """Every line of code in README.md: fenced blocks, indented blocks and inline spans."""
    lines: list[str] = []
    fenced = False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            lines.append(line.removeprefix("$ "))
        elif line.startswith("    "):
            lines.append(line[4:])
        else:
            lines += re.findall(r"`([^`]+)`", line)
    return lines


def mcpwrap_invocations() -> list[tuple[tuple[str, ...], list[str]]]:
    """(command path, options) for each `mcpwrap ...` in the README's code."""
    root = _cli()
    found = []
    for line in readme_code():
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        for i, word in enumerate(words):
            if word != "mcpwrap" and not word.endswith("/mcpwrap"):
                continue
            rest = words[i + 1:]
            if not rest or not re.match(r"^(--?[a-z]|[a-z])", rest[0]):
                continue              # `mcpwrap` alone, or `mcpwrap <- {...}` (a trace line)
            path: list[str] = []
            command = root
            options = []
            for token in rest:
                if token in ("&&", "||", "|", ";", ">", "2>"):
                    break
                if token.startswith("-"):
                    options.append(token.split("=", 1)[0])
                elif not options and hasattr(command, "commands"):    # a group: the word is a command
                    path.append(token)
                    command = command.commands.get(token)
                    if command is None:
                        break
            found.append((tuple(path), options))
    return found


def test_readme_mentions_only_existing_commands_and_options() -> None:
    invocations = mcpwrap_invocations()
    paths = {path for path, _ in invocations}
    assert {("serve",), ("check",), ("list",), ("call",), ("init",), ("client-config",)} <= paths
    commands = dict(_commands(_cli()))
    for path, options in invocations:
        assert path in commands, f"README mentions `mcpwrap {' '.join(path)}`, which does not exist"
        unknown = [o for o in options if o not in _options(commands[path]) | {"--help"}]
        assert not unknown, f"README passes {unknown} to `mcpwrap {' '.join(path)}`"
    for path in sorted(paths):
        done = run_mcpwrap(*path, "--help")
        assert done.returncode == 0, f"mcpwrap {' '.join(path)} --help: {done.stderr}"


def readme_json_blocks() -> list[tuple[str, str]]:
    """(the ### heading above it, text) for each ```json block of README.md."""
    blocks: list[tuple[str, str]] = []
    heading = ""
    current: list[str] | None = None
    for line in README.read_text().splitlines():
        if current is None and line.startswith("### "):
            heading = line[4:].strip()
        elif current is None and line.strip() == "```json":
            current = []
        elif current is not None and line.startswith("```"):
            blocks.append((heading, "\n".join(current)))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_readme_json_snippets_parse() -> None:
    blocks = readme_json_blocks()
    assert blocks
    for heading, text in blocks:
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            pytest.fail(f"README JSON under {heading!r} does not parse: {exc}\n{text}")


def test_readme_client_configs_are_what_client_config_prints(tmp_path: Path) -> None:
    bin_dir, project = tmp_path / "bin", tmp_path / "project"
    bin_dir.mkdir()
    project.mkdir()
    fake = bin_dir / "mcpwrap"       # a known `mcpwrap` on PATH for client-config to find
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    tools = project / "tools.toml"
    assert run_mcpwrap("init", str(tools)).returncode == 0
    snippets = {heading: text for heading, text in readme_json_blocks() if heading in CLIENT_HEADINGS}
    assert set(snippets) == set(CLIENT_HEADINGS)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    for heading, client in CLIENT_HEADINGS.items():
        done = run_mcpwrap("client-config", str(tools), "--client", client, env=env)
        assert done.returncode == 0, done.stderr
        printed = done.stdout.replace(str(fake), README_MCPWRAP).replace(str(tools.resolve()), README_TOOLS)
        assert json.loads(snippets[heading]) == json.loads(printed), heading


def test_readme_set_up_commands_are_the_ones_ci_runs() -> None:
    readme = README.read_text()
    section = readme.split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    commands = [line[4:] for line in section.splitlines() if line.startswith("    ")]
    assert len(commands) == 2, commands
    install, test = commands
    assert install == INSTALL_COMMAND
    ci_lines = CI.read_text().splitlines()
    assert CI_MARKER in ci_lines
    assert ci_lines[ci_lines.index(CI_MARKER) + 1] == test


def test_readme_points_at_files_that_exist() -> None:
    readme = README.read_text()
    for relative in ("man/mcpwrap.1", "man/mcpwrap-tools.5", "bench/bench.py", "bench/README.md", "examples/", "LICENSE"):
        assert relative in readme
        assert (ROOT / relative).exists(), relative


# --- what the examples print ----------------------------------------------------------------
def matches_shown(shown: list[str], printed: list[str]) -> bool:
    """Whether `printed` is what `shown` shows: line for line, where a line that is only "..."
    stands for any number of lines and "..." inside a line for any text."""
    if not shown:
        return not printed
    if shown[0] == "...":
        return any(matches_shown(shown[1:], printed[i:]) for i in range(len(printed) + 1))
    pattern = ".*".join(re.escape(part) for part in shown[0].split("..."))
    return bool(printed) and re.fullmatch(pattern, printed[0]) is not None and matches_shown(shown[1:], printed[1:])


def console_session(text: str) -> list[tuple[str, list[str]]]:
    """(command, the lines shown after it) for each `$ command` of a console block."""
    session: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            session.append((line[2:], []))
        elif session:
            session[-1][1].append(line)
    return session


def run_shown(command: str, cwd: Path, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """A documented `mcpwrap ...` command line, run with this tree's mcpwrap in `cwd`."""
    words = shlex.split(command)
    assert words[0] == "mcpwrap", command
    return subprocess.run([sys.executable, "-m", "mcpwrap", *words[1:]], capture_output=True, text=True,
                          timeout=60, cwd=cwd, input=stdin,
                          env={**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200", **env})


def test_readme_tour_prints_what_it_shows(tmp_path: Path) -> None:
    section = README.read_text().split("\n## A one-minute tour\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```console\n", 1)[1].split("```", 1)[0]
    session = console_session(block)
    assert [c.split()[1] for c, _ in session] == ["init", "check", "list", "call"]
    env = {"MCPWRAP_STATE_DIR": str(tmp_path / "state")}
    for command, shown in session:
        done = run_shown(command, tmp_path, env)
        assert done.returncode == 0, (command, done.stderr)
        assert matches_shown(shown, done.stdout.splitlines()), f"$ {command}\nshown:\n" + "\n".join(shown) + \
            "\nprinted:\n" + done.stdout


def man_section(page: Path, title: str) -> str:
    return page.read_text().split(f"\n.SH {title}\n", 1)[1].split("\n.SH ", 1)[0]


def test_man_page_examples_run(tmp_path: Path) -> None:
    """Every command of mcpwrap(1)'s EXAMPLES runs, in order, in one directory; a task id shown
    there stands for the id of a task the test starts."""
    commands = [plain_roff(line) for block in re.findall(r"^\.EX\n(.*?)^\.EE",
                                                          man_section(MAN_PAGES[0], "EXAMPLES"), re.S | re.M)
                for line in block.splitlines()]
    assert len(commands) >= 8
    env = {"MCPWRAP_STATE_DIR": str(tmp_path / "state")}
    (tmp_path / "old.log").write_text("old\n")
    for command in commands:
        if shown_id := re.search(r"\btasks \w+ tools.toml ([A-Za-z0-9_-]{22})\b", command):
            steps = 100 if " cancel " in command else 1           # one to cancel is still working
            started = run_shown(f"mcpwrap call tools.toml slow_count --arg n={steps} --task --no-wait", tmp_path, env)
            assert started.returncode == 0, started.stderr
            command = command.replace(shown_id[1], started.stdout.strip())
        done = run_shown(command, tmp_path, env)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    assert not (tmp_path / "old.log").exists()


def test_man_page_diagnostics_are_what_check_prints(tmp_path: Path) -> None:
    """mcpwrap(1)'s DIAGNOSTICS show two `check` lines: a misspelt type in the starter file's greet,
    and a misspelt key; `check` prints them so."""
    shown = [plain_roff(line) for line in re.findall(r"^\.EX\n(.*?)^\.EE", man_section(MAN_PAGES[0], "DIAGNOSTICS"),
                                                     re.S | re.M)[0].splitlines()]
    assert run_shown("mcpwrap init tools.toml", tmp_path, {}).returncode == 0
    tools = tmp_path / "tools.toml"
    tools.write_text(tools.read_text().replace('args.name = { type = "string"', 'args.name = { type = "strng"'))
    misspelt = tmp_path / "misspelt.toml"
    misspelt.write_text('[server]\nname = "x"\n\n[tools.a]\ncommand = ["true"]\ndescripton = "x"\n')
    printed = [run_shown(f"mcpwrap check {f.name}", tmp_path, {}).stderr.strip() for f in (tools, misspelt)]
    assert printed == [shown[0], shown[1].replace("tools.toml", "misspelt.toml", 1)]


def test_the_waiting_room_per_slot_is_stated_as_the_code_has_it() -> None:
    from mcpwrap.serve.common import Options
    from mcpwrap.serve.admission import QUEUED_PER_SLOT

    default = Options.__dataclass_fields__["max_calls"].default
    said = {"serve --help": re.search(r"up to (\d+) times as many wait", run_mcpwrap("serve", "--help").stdout),
            "mcpwrap(1)": re.search(r"Up to (\d+) times as many more wait", MAN_PAGES[0].read_text())}
    assert {where: m and int(m[1]) for where, m in said.items()} == dict.fromkeys(said, QUEUED_PER_SLOT)
    waiting = re.search(r"the ([\d,]+) that may wait at the default", MAN_PAGES[0].read_text())
    assert waiting and int(waiting[1].replace(",", "")) == default * QUEUED_PER_SLOT


def documented_tools_files() -> list[tuple[str, str]]:
    """(where, text) of each tools file the documentation shows or ships."""
    text = MAN_PAGES[1].read_text()
    found = [(f"mcpwrap-tools(5) example {i}", plain_roff(b)) for i, b in
             enumerate(re.findall(r"^\.EX\n(.*?)^\.EE", text, re.S | re.M)) if b.startswith("[")]
    found += [(f"README toml block {i}", b) for i, b in enumerate(re.findall(r"```toml\n(.*?)```", README.read_text(), re.S))]
    return found + [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "examples").glob("*.toml"))]


def test_no_documented_command_passes_an_option_value_as_its_own_element() -> None:
    """mcpwrap-tools(5)'s recipe: attach an option's value ("-e{pattern}"), never "-e", "{pattern}".
    An option takes a value when the documentation attaches one to it anywhere ("-e{...}", "--unit={...}")."""
    import tomllib

    commands = [(where, name, tool.get("command", [])) for where, text in documented_tools_files()
                for name, tool in tomllib.loads(text).get("tools", {}).items()]
    takes_value = {m[1] for _, _, command in commands for e in command if isinstance(e, str)
                   and (m := re.match(r"^(-\w|--[\w-]+)=?\{", e))}
    assert "-e" in takes_value
    offending = []
    for where, name, command in commands:
        elements = [e for e in command if isinstance(e, str)]
        for before, element in zip(elements, elements[1:]):
            if before == "--":
                break
            if before in takes_value and element.startswith("{"):
                offending.append(f"{where}: {name}: {before!r}, {element!r}")
    assert not offending, offending


def test_man_page_names_every_top_level_table() -> None:
    schema = json.loads(run_mcpwrap("schema").stdout)
    assert schema["additionalProperties"] is False
    description = plain_roff(man_section(MAN_PAGES[1], "DESCRIPTION").split("\n.PP\n", 1)[0])
    missing = [key for key in schema["properties"] if f"[{key}" not in description]
    assert not missing, f"mcpwrap-tools(5)'s DESCRIPTION does not name the top-level tables {missing}"
