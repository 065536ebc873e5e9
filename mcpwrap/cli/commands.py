"""The command line, declared once: every command, its help, the function it runs and its parameters.

`main` parses argv and writes --help from these declarations; `completion` builds the typer app
for shell completion from the same ones. Each command runs a plain function of the module named
after what it does, called with the parsed values by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from mcpwrap.cli import audit, call, client_config, content, files, secret, serve, tasks

REQUIRED: Any = ...


class Param(NamedTuple):
    """A positional (no flags) or an option; an option without a metavar is a flag. (The declarations
    are NamedTuples, cheaper to create than dataclasses: they are on the way to serve's first answer.)"""
    dest: str
    help: str
    flags: tuple[str, ...] = ()
    metavar: str = ""
    default: Any = None
    many: bool = False                 # repeatable: values collect in a list
    off: str = ""                      # the flag's negative form ("--no-watch"); the flag then defaults on
    hidden: bool = False


class Command(NamedTuple):
    """One command: its help, the function it runs and its parameters."""
    help: str
    run: Callable[..., Any]
    params: tuple[Param, ...] = ()
    loose: bool = False                # an unknown "-word" is a positional (old task ids start with "-")


def _file(help: str = "The tools file (TOML).") -> Param:
    return Param("file", help, metavar="FILE", default=REQUIRED)


def _opt(dest: str, flags: str, help: str, metavar: str = "", **more: Any) -> Param:
    return Param(dest, help, tuple(flags.split()), metavar, **more)


STATE_DIR = _opt("state_dir", "--state-dir", "Where durable task records live; env MCPWRAP_STATE_DIR; default: the user state dir.", "DIR")
SECRET_FILE = _opt("secret_file", "--secret-file", "The shared secret file; env MCPWRAP_SECRET_FILE; default: the user config dir.", "PATH")
AS_JSON = _opt("as_json", "--json", "Print JSON instead of text.")
WHERE = (Param("where", "The tools file (optional: without it, every store under the state dir is searched), then "
               "the task id, as `mcpwrap tasks list FILE` shows it.", metavar="[FILE] TASK_ID", default=REQUIRED),
         Param("task_id", "", metavar="TASK_ID", hidden=True))
OUTPUT = _opt("output", "--output -o", "Write image/audio/binary content here (default: a temporary file named on stderr).", "PATH")

INLINE = (_opt("inline", "--tool", "A tool with no file: NAME=COMMAND, the command split as a shell would, with "
               "placeholders {arg}, {arg:integer} (or number, boolean), {arg?} for an optional one; repeatable.",
               "NAME=COMMAND", many=True),
          _opt("describe", "--describe", "The description a model reads for --tool NAME; repeatable.", "NAME=TEXT", many=True))
FILE_OR_TOOL = Param("file", "The tools file (TOML); or, without it, --tool options.", metavar="[FILE]")

GROUPS = {(): "Serve a TOML file of shell commands as an MCP server, on stdio or over Streamable HTTP.",
          ("secret",): "The shared secret that signs requestState (modern confirmations) and task records.",
          ("tasks",): "List, show, fetch, cancel and collect durable tasks. Exit status: 0 ok; 1 the task failed, "
                      "was cancelled or its tool reported an error; 2 usage or unknown task id; 4 the task is "
                      "still running (`result` without --wait).",
          ("audit",): "Check and read the audit trail (serve --audit, [server] audit)."}
COMMANDS: dict[tuple[str, ...], Command] = {
    ("serve",): Command("Run the MCP server: on stdio (MCP messages on stdout, logs on stderr), or over Streamable HTTP with --http.", serve.serve, (
        FILE_OR_TOOL, *INLINE,
        _opt("print_toml", "--print-toml", "Print the tools file the --tool and --describe options stand for (a "
             "starting file: `mcpwrap check` accepts it) instead of serving."),
        STATE_DIR, SECRET_FILE,
        _opt("log_level", "--log-level", "What mcpwrap itself logs on stderr: debug (also every message in and out, and tool stderr), info (default), warning, error; env MCPWRAP_LOG_LEVEL.", "LEVEL"),
        _opt("max_calls", "--max-calls", "Tool calls running at once (default 64); up to 64 times as many wait for a slot, more are refused; env MCPWRAP_MAX_CALLS.", "N"),
        _opt("max_tasks", "--max-tasks", "Durable tasks running at once (default 16); past it, task creation is refused; env MCPWRAP_MAX_TASKS.", "N"),
        _opt("watch", "--watch", "Reload the tools file when it changes (--no-watch: do not).", default=True, off="--no-watch"),
        _opt("read_only", "--read-only", "Serve only the tools annotated readOnlyHint = true."),
        _opt("only", "--only", "Serve only these tools (comma-separated names; repeatable).", "NAME,...", many=True),
        _opt("exclude", "--exclude", "Do not serve these tools (comma-separated names; repeatable).", "NAME,...", many=True),
        _opt("audit", "--audit", "Append the audit trail (calls, confirmations, refusals, tasks; hash-chained) to "
             "FILE, in place of [server] audit; SIGHUP then reopens it (logrotate) instead of stopping.", "FILE"),
        _opt("http", "--http", "Serve Streamable HTTP on [HOST:]PORT (host default 127.0.0.1; port 0 picks one) at /mcp "
             "instead of stdio; needs the http extra.", "[HOST:]PORT"),
        _opt("token_file", "--token-file", "With --http: require a bearer token, one of this 0600 file's lines.", "PATH"),
        _opt("oauth_issuer", "--oauth-issuer", "With --http: accept OAuth access tokens (JWTs) of this authorization "
             "server, found by its RFC 8414 or OpenID metadata, and publish RFC 9728 metadata naming it.", "URL"),
        _opt("resource_uri", "--resource-uri", "With --oauth-issuer: this server's canonical URL, which tokens must "
             "name in aud (default: the loopback address served, e.g. http://127.0.0.1:8000/mcp).", "URL"),
        _opt("oauth_scope", "--oauth-scope", "With --oauth-issuer: a scope every access token must carry (else 403 "
             "insufficient_scope); repeatable.", "SCOPE", many=True),
        _opt("oauth_client_file", "--oauth-client-file", "With --oauth-issuer: accept opaque access tokens too, asking "
             "the issuer's RFC 7662 introspection endpoint as the client of this 0600 file's line CLIENT_ID: SECRET.",
             "PATH"),
        _opt("allowed_origin", "--allowed-origin", "With --http: a browser Origin that may call (e.g. https://app.example); "
             "repeatable; default: loopback origins only.", "ORIGIN", many=True),
        _opt("insecure_no_auth", "--insecure-no-auth", "With --http: allow a non-loopback address without --token-file "
             "(only behind a proxy that authenticates)."),
        _opt("rate", "--rate", "With --http: each client (a legacy session; else its bearer token, else its address) "
             "may send R requests a second, in bursts of B (default R, at least 10); past it, 429 with Retry-After. "
             "Default: no limit.", "R[/B]"),
        _opt("certfile", "--certfile", "With --http: serve HTTPS with this PEM certificate chain (with --keyfile); "
             "TLS does not replace --token-file.", "PATH"),
        _opt("keyfile", "--keyfile", "With --http: the PEM private key of --certfile.", "PATH"),
        _opt("body_timeout", "--body-timeout", "With --http: a request body must end, or bring 16 KiB more, within "
             "each such interval, else 408 and the connection is closed (default 30s).", "DURATION"),
        _opt("send_timeout", "--send-timeout", "With --http: a client that takes nothing of its response for this "
             "long (or leaves data unacknowledged) is cut off (default 60s).", "DURATION"))),
    ("init",): Command("Write a commented starter tools file that demonstrates each major feature.", files.init, (
        Param("file", "Where to write the starter tools file.", metavar="[FILE]", default="tools.toml"),
        _opt("force", "--force", "Overwrite an existing file."),
        _opt("from_help", "--from-help", "Draft the file from PROGRAM --help instead: a tool per subcommand, or one "
             "whose arguments are its long options; written only if it checks.", "PROGRAM"))),
    ("check",): Command("Validate a tools file as `serve` would (problems are printed as FILE:LINE:COL: message), "
                        "look for each program on PATH, and check the secret file if a tool needs it.", files.check, (
        _file(), _opt("strict", "--strict", "Make a program not found on PATH an error, not a warning."), SECRET_FILE)),
    ("list",): Command("List the tools (their arguments, choices, confirmation, task support, what is asked of the "
                       "user), resources and prompts; --json as `serve` lists them.", call.list_tools, (
        FILE_OR_TOOL, *INLINE, _opt("as_json", "--json", "Print tools and inputSchemas as JSON, each tool's mcpwrap "
                                    "behaviour (confirm, elicit, task) under \"mcpwrap\"."))),
    ("call",): Command("Run one tool the way `serve` would; exit 1 when the result is an error.", call.call, (
        FILE_OR_TOOL, Param("tool", "The tool to run.", metavar="TOOL"),
        Param("arguments", "Arguments as one JSON object.", metavar="[JSON]"), *INLINE,
        _opt("arg", "--arg -a", "The raw text for a string argument, JSON for any other type; repeatable.", "NAME=VALUE", many=True),
        OUTPUT,
        _opt("yes", "--yes -y", "Answer yes to the tool's confirmation (needed when stdin is not a terminal), "
             "and to the yes/no questions the command asks while it runs."),
        _opt("answer", "--answer", "Answer the next question the command asks while it runs; repeatable.", "VALUE",
             many=True),
        _opt("task", "--task", "Run it as a durable task, as `serve` does for a client: the id goes to stderr, then the outcome as `tasks result --wait` prints it."),
        _opt("no_wait", "--no-wait", "With --task: print the task id on stdout and return at once."),
        STATE_DIR, SECRET_FILE, _opt("as_json", "--json", "Print the whole result as JSON."))),
    ("read",): Command("Read a resource the way `serve` would (a file, a command's output, or a call's output "
                       "beyond the cap, whole); exit 1 when its command failed, 2 when there is no such resource.", content.read, (
        FILE_OR_TOOL, Param("uri", "The resource's URI, as `list` shows it (a template filled in), or its name; "
                            "a resource's exact URI wins over another's name.", metavar="URI|NAME"), *INLINE,
        OUTPUT, STATE_DIR, _opt("as_json", "--json", "Print the contents as `resources/read` returns them."))),
    ("prompt",): Command("Get a prompt the way `serve` would and print its messages, each under its [role].", content.prompt, (
        _file(), Param("name", "The prompt.", metavar="NAME", default=REQUIRED),
        _opt("arg", "--arg -a", "A prompt argument (prompt arguments are strings); repeatable.", "NAME=VALUE", many=True),
        STATE_DIR, _opt("as_json", "--json", "Print the messages as `prompts/get` returns them."))),
    ("schema",): Command("Print the JSON Schema of the tools-file format (for editors: taplo, Even Better TOML).", files.schema),
    ("client-config",): Command("Print what an MCP client's config needs: the JSON to paste (the TOML table for "
                                "codex, the `claude mcp add` command for claude-mcp-add), for this tools file, or "
                                "for a remote `serve --http` (--url).", client_config.client_config, (
        Param("file", "The tools file (TOML); or, without it, --tool options or --url.", metavar="[FILE]"), *INLINE,
        _opt("client", "--client -c", f"{', '.join(client_config.CLIENT_LAYOUTS[:-1])} or {client_config.CLIENT_LAYOUTS[-1]}.", "CLIENT", default="claude-desktop"),
        _opt("name", "--name", "The server's key in the config (default: the file's stem).", "NAME"),
        _opt("env", "--env -e", "Set this variable in the server's environment; repeatable.", "NAME=VALUE", many=True),
        _opt("pin_path", "--pin-path", "Set the server's PATH to this shell's (desktop hosts start servers with a minimal one)."),
        _opt("url", "--url", "A remote Streamable HTTP server (mcpwrap serve --http) instead of FILE; Claude Desktop "
             "gets the mcp-remote bridge.", "URL"),
        _opt("header", "--header -H", "With --url: send this header; repeatable.", "'NAME: VALUE'", many=True),
        _opt("token_file", "--token-file", "With --url: authenticate with the last token of this 0600 file, "
             "referenced as $MCPWRAP_TOKEN (Claude Code, Cursor, Windsurf, Gemini, Codex) or a VS Code password "
             "prompt, not printed; Claude Desktop's bridge and Zed get it written in (a note says so).", "PATH"))),
    ("secret", "path"): Command("Print where the secret file is (it may not exist yet).", secret.secret_where, (SECRET_FILE,)),
    ("secret", "init"): Command("Create the secret file (0600) if it does not exist; check it if it does.", secret.secret_init, (SECRET_FILE,)),
    ("secret", "rotate"): Command("Make a new key; the previous one still verifies for 24 hours.", secret.secret_rotate, (SECRET_FILE,)),
    ("tasks", "list"): Command("List the tasks of FILE, oldest first.", tasks.tasks_list, (_file(), STATE_DIR, AS_JSON)),
    ("tasks", "show"): Command("Show one task: status, arguments, progress, supervisor, outcome.", tasks.tasks_show,
                               (*WHERE, STATE_DIR, AS_JSON), loose=True),
    ("tasks", "result"): Command("Print a finished task's output like `mcpwrap call` does; exit 1 when it failed.", tasks.tasks_result, (
        *WHERE, STATE_DIR, _opt("wait", "--wait", "Wait until the task has finished."), OUTPUT, AS_JSON), loose=True),
    ("tasks", "cancel"): Command("Cancel a running task (its command's process group is killed); exit 1 if it had finished.",
                                 tasks.tasks_cancel, (*WHERE, STATE_DIR, AS_JSON), loose=True),
    ("tasks", "answer"): Command("Answer the question a task asks while it runs (status input_required), as a "
                                 "client's tasks/update would; without --answer, print the question.", tasks.tasks_answer,
                                 (*WHERE, STATE_DIR, _opt("answer", "--answer", "The answer (y/n for a yes/no question).",
                                                          "VALUE"), AS_JSON), loose=True),
    ("tasks", "gc"): Command("Remove expired tasks (their ttl has passed) and stale leftovers.", tasks.tasks_gc, (_file(), STATE_DIR, AS_JSON)),
    ("audit", "verify"): Command("Check the hash chain of an audit file and its rotated predecessors (FILE.N ... FILE.1); "
                                 "exit 1 naming the first line that fails, 5 when only the last line is unfinished.",
                                 audit.audit_verify, (_file("The audit file."),)),
    ("audit", "tail"): Command("Print the last lines of an audit file, one event a line: time, identity, event, tool, outcome.",
                               audit.audit_tail, (_file("The audit file."), _opt("lines", "-n --lines", "How many lines.", "N", default="10"),
                                                  _opt("follow", "--follow -f", "Keep printing lines as they are appended."))),
}
TOP_OPTIONS = (("--version", "Print the version and exit."),
               ("--install-completion", "Install completion for the current shell."),
               ("--show-completion", "Show completion for the current shell, to copy it or customize it."),
               ("--help", "Show this message and exit."))

