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

ROOT = Path(__file__).parent.parent
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
