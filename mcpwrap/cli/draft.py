"""`mcpwrap init --from-help PROGRAM`: a tools file drafted from a program's --help, safe by default.

A draft hands a program to a model, so it leaves out what the author must choose to give: an
option that takes a command, script, shell or program to run, or a file to write, is not drafted
but listed in a comment saying why; a subcommand that deletes, overwrites, pushes or installs gets
`confirm` and `destructiveHint`, one that only reads gets `readOnlyHint` (and so does an option
tool whose flags delete or overwrite). A help entry is read whole, its continuation lines joined,
so each description is a whole sentence. PROGRAM may be several words (`python3 -m pip`).
The words it goes by are heuristics on GNU-style help: the author reads and edits what it drafts.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from mcpwrap.cli.common import EXIT_USAGE, fail

# A help entry starts with an option list ("  -x, --name[=VALUE]  text") or, in git's and pip's
# form, a subcommand ("   name     Text"); a line indented 8 more than its start continues it.
OPTION_ENTRY = r"^(\s{1,12})(-\S.*?)(?:\s{2,}(\S.*))?$"
OPTION_SPEC = r"^(--?[A-Za-z0-9?][A-Za-z0-9-]*)(\[?=[<A-Za-z][\w<>.-]*\]?| <[\w-]+>| [A-Z][A-Z_-]*)?$"
SUBCOMMAND_ENTRY = r"^(\s{2,4})([a-z][a-z0-9-]*)\s{2,}([A-Z]\S.*)$"
CONTINUATION_INDENT = 8
HELP_NUMBERS = {"N", "NUM", "NUMBER", "COUNT", "LEVEL"}
OPERANDS = 'args.operands = { type = "array", items = { type = "string" }, optional = true }'

# What an option's value is for: by its names and metavar, else by a phrase of its description.
RUNS_NAMED = re.compile(r"\b(command|cmd|script|program|prog|shell|exec|hook|editor|pager|rsh|rmt|interpreter)s?\b", re.I)
RUNS_SAID = re.compile(r"\b(execut\w*|interpreter|pipe\w* .*\bprogram|run\w* (\w+ )?(script|program|command))\b", re.I)
PATH_VALUE = re.compile(r"file|path|dir|archive|log", re.I)
WRITES_NAMED = re.compile(r"\b(output|out|log|logfile|dump|save|write)\b", re.I)
WRITES_SAID = re.compile(r"\b(write[sn]?|written|save[sd]?|output|updates?|stores? .*\bin|appending)\b", re.I)
# What an option tool's flag does that makes the tool ask first.
DELETES = re.compile(r"\b(delete|remove|overwrite|unlink|erase|wipe|truncate|purge|destroy)", re.I)
# What a subcommand does (changes things, or only reads), by its name and description.
CHANGES = re.compile(r"\b(rm|mv|del|delete[sd]?|remove[sd]?|overwrite[sd]?|unlink|erase|wipe|truncate|purge|prune|"
                     r"destroy|discard|drop|clean|reset|restore|rebase|reapply|rewrite|replace|move|rename|push|"
                     r"pull|clone|upload|publish|install|uninstall|upgrade|manage)\b", re.I)
READS = re.compile(r"^(status|log|show|list|ls|diff|grep|search|info|inspect|check|describe|blame|view|cat|help|"
                   r"version|freeze|hash|index|debug|shortlog)$|^(show|list|print|display|inspect|verify|search|"
                   r"view|describe)\b", re.I)


@dataclass
class Entry:
    """One help entry: its head (an option list or a subcommand name), its whole text, where it starts."""
    head: str
    text: str
    indent: int


def draft_from_help(program: str) -> str:
    """A tools file drafted from `PROGRAM --help`: a tool per subcommand (operands only), or one tool
    whose arguments are the program's long options (a flag, or a value attached with "=")."""
    words = shlex.split(program)
    if not words:
        fail("--from-help needs a program", EXIT_USAGE)
    lines = _help_lines(words, program)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(words[-1]).name)
    head = [f"# Drafted by `mcpwrap init --from-help {program}`: read every tool, keep what a model may run,",
            "# and give the arguments better descriptions. Operands may not start with \"-\" (see mcpwrap-tools(5)).",
            "# Tools that change things ask first (confirm); readOnlyHint and destructiveHint were guessed from",
            "# names and descriptions.", "[server]", f"name = {quoted(name)}", ""]
    subcommands = entries(lines, SUBCOMMAND_ENTRY)
    if len(subcommands) >= 3 and re.search(r"command", " ".join(lines[:8]), re.I):   # "usage: git ... <command>"
        return "\n".join(head + _subcommand_tools(words, name, subcommands))
    return "\n".join(head + _option_tool(words, name, lines))


def _help_lines(words: list[str], program: str) -> list[str]:
    """The lines `PROGRAM --help` prints (on stdout, or else on stderr), in the C locale, unpaged."""
    import subprocess

    try:
        done = subprocess.run([*words, "--help"], capture_output=True, text=True, errors="replace", timeout=30,
                              stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C", "PAGER": "cat", "MANPAGER": "cat"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        fail(f"cannot run `{program} --help`: {exc}", EXIT_USAGE)
    return (done.stdout or done.stderr).expandtabs().splitlines()


def entries(lines: list[str], start: str) -> list[Entry]:
    """The help entries whose first line matches `start` (groups: indent, head, text), each with the
    lines that continue it joined into its text."""
    found: list[Entry] = []
    current: Entry | None = None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if current is not None and line.strip() and indent >= current.indent + CONTINUATION_INDENT:
            current.text = f"{current.text} {line.strip()}".strip()
        elif m := re.match(start, line):
            current = Entry(m[2], m[3] or "", len(m[1]))
            found.append(current)
        else:
            current = None
    return found


def sentence(text: str) -> str:
    """Help text as a sentence: spaces collapsed, a capital first letter, a full stop at the end."""
    text = " ".join(text.split())
    if text and text[0].islower():
        text = text[0].upper() + text[1:]
    return text if not text or text.endswith((".", "!", "?")) else text + "."


def quoted(text: str) -> str:
    """`text` as a TOML basic string (a JSON string is one)."""
    import orjson

    return orjson.dumps(text).decode()


def _subcommand_tools(words: list[str], name: str, subcommands: list[Entry]) -> list[str]:
    """The TOML lines of a tool per subcommand (the first entry of each name), taking operands only;
    one that changes things asks first, one that only reads says so."""
    import orjson

    lines = []
    first: dict[str, Entry] = {}
    for entry in subcommands:
        first.setdefault(entry.head, entry)
    for entry in first.values():
        sub, description = entry.head, sentence(entry.text)
        lines += [f"[tools.{quoted(f'{name}_{sub}')}]", f"description = {quoted(description)}",
                  f"command = {orjson.dumps([*words, sub, '{operands}']).decode()}", OPERANDS]
        if CHANGES.search(f"{sub} {description}"):
            lines += [f"confirm = {quoted(f'Run {name} {sub} with {{operands}}?')}",
                      "annotations = { destructiveHint = true }"]
        elif READS.search(sub) or READS.search(description):
            lines.append("annotations = { readOnlyHint = true }")
        lines.append("")
    return lines


@dataclass
class Option:
    """A long option of the help: its argument name, names, value metavar ("" for a flag), description."""
    arg: str
    names: list[str]
    value: str
    description: str

    def danger(self) -> str:
        """Why a model must not get this option ("" when it may): it runs a program, or writes a file."""
        named = f"{' '.join(self.names)} {self.value}".replace("-", " ")
        if self.value and (RUNS_NAMED.search(named) or RUNS_SAID.search(self.description)):
            return "it would run a program or command of the caller's choosing"
        if self.value and PATH_VALUE.search(named) and (WRITES_NAMED.search(named) or WRITES_SAID.search(self.description)):
            return "it would write a file the caller names"
        return ""


def _options(lines: list[str]) -> tuple[list[Option], list[str]]:
    """The drafted long options, and a comment line for each one left out (with why)."""
    kept: dict[str, Option] = {}
    left_out = []
    for entry in entries(lines, OPTION_ENTRY):
        specs = [re.match(OPTION_SPEC, spec) for spec in re.split(r",\s*", entry.head)]
        names = [m[1] for m in specs if m and m[1].startswith("--")]
        if not names or not all(specs) or names[0] in ("--help", "--version", "--usage"):
            continue
        arg = names[0][2:].replace("-", "_")
        arg = "opt_" + arg if arg[:1].isdigit() or arg == "operands" else arg
        value = next((m[2] for m in specs if m and m[2]), "") or ""
        option = Option(arg, names, value, sentence(entry.text))
        if why := option.danger():
            left_out.append(f"#   {entry.head}: {why} ({option.description})")
        elif arg not in kept and len(arg) <= 64:
            kept[arg] = option
    return list(kept.values()), left_out


def _option_tool(words: list[str], name: str, lines: list[str]) -> list[str]:
    """The TOML lines of one tool whose arguments are the program's long options, then its operands."""
    import orjson

    options, left_out = _options(lines)
    args, elements = [], list(words)
    for o in options:
        if not o.value:
            args.append(f"args.{o.arg} = {{ type = \"boolean\", flag = {quoted(o.names[0])}, default = false, "
                        f"description = {quoted(o.description)} }}")
            elements.append("{" + o.arg + "}")
        else:
            kind = "integer" if o.value.strip("[]=<> ").upper() in HELP_NUMBERS else "string"
            args.append(f"args.{o.arg} = {{ type = \"{kind}\", optional = true, description = {quoted(o.description)} }}")
            elements.append(f"{o.names[0]}={{{o.arg}}}")
    elements += ["--", "{operands}"]
    comment = ["# Left out: options a model could use to run a program or write a file (add one only if you must):",
               *left_out] if left_out else []
    hints = []
    if any(not o.value and DELETES.search(f"{' '.join(o.names)} {o.description}".replace("-", " ")) for o in options):
        hints = [f"confirm = {quoted(f'Run {name} with {{operands}}? Its flags can delete or overwrite files.')}",
                 "annotations = { destructiveHint = true }"]
    return [*comment, f"[tools.{quoted(name)}]", f"description = {quoted(_summary(lines))}",
            f"command = {orjson.dumps(elements).decode()}", OPERANDS, *hints, *args, ""]


def _summary(lines: list[str]) -> str:
    """The paragraph under the usage line that says what the program does, as a sentence."""
    paragraph: list[str] = []
    for line in lines[1:8]:
        if not line.strip() or line.startswith(" ") or line.startswith("Example"):
            if paragraph:
                break
            continue
        paragraph.append(line)
    return sentence(" ".join(paragraph))
