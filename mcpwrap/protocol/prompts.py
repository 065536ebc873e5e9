"""Prompts and completions decisions: listing, argument checks, rendering per revision. No I/O.

A prompt's arguments are strings; an absent one is its `default` (said in its listed
description, the schema's PromptArgument having no field for it), else empty. A missing
required one is -32602, except for a 2026-07-28 request that declared elicitation: it gets an
input_required result asking for it (`question`), with a requestState sealed and verified as
tools/call's is (`rounds.seal_request`), and the retry carrying the answer completes (`resume_get`). `{name}` is substituted
into a message's text
(and, percent-encoded, into an embedded resource's URI) and nowhere else: a
command message gets the arguments the way a tool does (argv placeholders under
the injection rules, or MCP_ARG_* for a shell script). Completion offers an
argument's `enum`, else its `examples`, else the lines of its `complete`
command, filtered by the typed prefix, at most 100; a command that fails is a helper that failed,
not the request: no candidates, and a line for stderr (`content.completed`).

A `complete` command gets no arguments, so its output depends only on the command
and the tools file: `CompletionCache` keeps it for `COMPLETION_TTL_S`, and the core
runs one command at a time per key for every request that asks meanwhile (the
spec's "Implement appropriate rate limiting").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcpwrap.config.model import PLACEHOLDER, Arg, Config, Prompt, PromptArg, Tool
from mcpwrap.protocol import asking, rounds, sealing
from mcpwrap.protocol.actions import Context
from mcpwrap.protocol.resources import page
from mcpwrap.protocol.revisions import Revision
from mcpwrap.protocol.tools import ProtocolError, invalid_params, render_block
from mcpwrap.result import Block

MAX_COMPLETIONS = 100
COMPLETION_TTL_S = 5.0            # how long a `complete` command's output answers without running it again
COMPLETION_ENTRIES = 64           # outputs cached, least recently used dropped first
COMPLETION_BYTES = 4 * 1024 * 1024    # and their size together
COMPLETION_WAITERS = 64           # requests that may wait for one running command; more are refused

CompletionKey = tuple[str, str, str]    # (tools file, its digest, the command's name: where it is in the file)


def render_prompt(prompt: Prompt, rev: Revision) -> dict[str, Any]:
    out: dict[str, Any] = {"name": prompt.name}
    if prompt.title and rev.has("resource.title"):
        out["title"] = prompt.title
    if prompt.description:
        out["description"] = prompt.description
    if prompt.args:
        out["arguments"] = [_render_arg(a, rev) for a in prompt.args]
    return out


def _render_arg(arg: PromptArg, rev: Revision) -> dict[str, Any]:
    out: dict[str, Any] = {"name": arg.name}
    if arg.title and rev.has("resource.title"):
        out["title"] = arg.title
    described = [arg.description] if arg.description else []
    if arg.default is not None:
        described.append(f"(default: {arg.default})")
    if described:
        out["description"] = " ".join(described)
    out["required"] = arg.required
    return out


def list_prompts(config: Config, rev: Revision, cursor: Any, size: int) -> dict[str, Any]:
    return page("prompts", [render_prompt(p, rev) for p in config.prompts], "prompts", cursor, config, size)


def prompt_request(config: Config, params: Mapping[str, Any]) -> tuple[Prompt, dict[str, Any]]:
    """The prompt and its arguments as given; -32602 for an unknown prompt or arguments not an object."""
    name = params.get("name")
    prompt = config.prompt(name) if isinstance(name, str) else None
    if prompt is None:
        raise invalid_params(f"Unknown prompt: {name}" if isinstance(name, str) else "prompts/get needs a string 'name'")
    arguments = params.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise invalid_params("prompts/get 'arguments' must be an object")
    return prompt, arguments


def check_arguments(prompt: Prompt, arguments: Mapping[str, Any]) -> tuple[dict[str, str], tuple[PromptArg, ...]]:
    """The arguments with their defaults, and the required ones still missing (which may be asked for);
    -32602 for anything else wrong (naming the missing ones too)."""
    problems = [f"unknown argument '{k}'" for k in arguments if prompt.arg(k) is None]
    missing = tuple(a for a in prompt.args if a.required and arguments.get(a.name) is None)
    for arg in prompt.args:
        value = arguments.get(arg.name)
        if value is not None and not isinstance(value, str):
            problems.append(f"argument '{arg.name}' must be a string")
        elif value is not None and arg.enum is not None and value not in arg.enum:
            problems.append(f"argument '{arg.name}' must be one of: {', '.join(arg.enum)}")
    if problems:
        raise missing_error(prompt, missing, problems)
    defaults = {a.name: a.default for a in prompt.args if a.default is not None and a.name not in arguments}
    return {**defaults, **{k: v for k, v in arguments.items() if isinstance(v, str)}}, missing


def missing_error(prompt: Prompt, missing: Sequence[PromptArg], problems: Sequence[str] = ()) -> ProtocolError:
    """-32602 naming what is wrong with a prompt's arguments: `problems`, then each missing one."""
    said = [*problems, *(f"missing required argument '{a.name}'" for a in missing)]
    return invalid_params(f"invalid arguments for prompt '{prompt.name}': " + "; ".join(said))


def parse_get(config: Config, params: Mapping[str, Any]) -> tuple[Prompt, dict[str, str]]:
    """The prompt and its checked arguments, where nobody is asked: -32602 for an unknown prompt or bad
    or missing arguments."""
    prompt, given = prompt_request(config, params)
    arguments, missing = check_arguments(prompt, given)
    if missing:
        raise missing_error(prompt, missing)
    return prompt, arguments


# --- a missing required argument asked for (2026-07-28: input_required) --------------------------
def question(prompt: Prompt, missing: Sequence[PromptArg]) -> asking.Question:
    """The form asking for the missing arguments, built from their declarations (strings, an enum's values)."""
    fields = tuple(Arg(a.name, {"type": "string", **({"title": a.title} if a.title else {}),
                                **({"description": a.description} if a.description else {}),
                                **({"enum": list(a.enum)} if a.enum else {})}, True) for a in missing)
    names = ", ".join(a.name for a in missing)
    return asking.Question("arguments", f"the arguments {names}", f"prompt '{prompt.name}' needs: {names}", fields)


def resume_get(ctx: Context, prompt: Prompt, given: Mapping[str, Any], config: Config, keyring: sealing.Keys,
               now: float) -> tuple[dict[str, Any], int]:
    """A modern retry of prompts/get: the arguments gathered so far, the answer to the state's question
    folded in, and the round. Its requestState is verified as tools/call's is (`rounds.unseal_request`:
    signed, this prompt, these arguments, this tools file, this requestor); it is not spent, since a
    prompt runs nothing a request naming the arguments could not. Answers without a state answer
    nothing: the request starts afresh. Declined or cancelled, the arguments stay missing: -32602."""
    responses = rounds.input_responses(ctx)
    if "requestState" not in ctx.params:
        return dict(given), 0
    claims = rounds.unseal_request(ctx, prompt.name, given, config, keyring, now).claims
    gathered, answer = dict(claims["g"]), responses.get(str(claims.get("q")))
    if answer is None:
        return gathered, claims["r"]
    action = answer.get("action") if isinstance(answer, dict) else None
    if action != "accept" or not isinstance(answer.get("content"), dict):
        why = "the answer is not an accepted form" if action in (None, "accept") else f"the user answered {action!r}"
        raise missing_error(prompt, check_arguments(prompt, gathered)[1], [why])
    asked = {a.name for a in prompt.args if a.required and gathered.get(a.name) is None}
    return {**gathered, **{k: v for k, v in answer["content"].items() if k in asked}}, claims["r"] + 1


def fill(text: str, arguments: Mapping[str, str]) -> str:
    return PLACEHOLDER.sub(lambda m: arguments.get(m[1], ""), text)


def get_result(prompt: Prompt, blocks: Sequence[tuple[str, Block]], rev: Revision) -> dict[str, Any]:
    result: dict[str, Any] = {"messages": [{"role": role, "content": render_block(block, rev)}
                                           for role, block in blocks]}
    if prompt.description:
        result["description"] = prompt.description
    return result


# --- completion ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Completion:
    """Where an argument's candidates come from: a fixed list, or a command's output lines."""
    values: tuple[str, ...] = ()
    command: Tool | None = None


def completion_source(config: Config, params: Mapping[str, Any]) -> tuple[Completion, str]:
    """What to complete from, and the typed prefix; -32602 for an unknown reference or argument."""
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict) or not isinstance(argument.get("name"), str) \
            or not isinstance(argument.get("value"), str):
        raise invalid_params("completion/complete needs 'ref' and 'argument' {name, value}")
    name, prefix = argument["name"], argument["value"]
    if ref.get("type") == "ref/prompt":
        ref_name = ref.get("name")
        prompt = config.prompt(ref_name) if isinstance(ref_name, str) else None
        arg = prompt.arg(name) if prompt else None
        if arg is None:
            raise invalid_params(f"no prompt argument '{name}' for {ref.get('name')!r}")
        return Completion(arg.enum or arg.examples, arg.complete), prefix
    if ref.get("type") == "ref/resource":
        resource = next((r for r in config.resources if r.uri_template and r.uri_template == ref.get("uri")), None)
        spec = resource.tool.arg(name) if resource and resource.tool else None
        if resource is None or spec is None:
            raise invalid_params(f"no template variable '{name}' for {ref.get('uri')!r}")
        listed = spec.schema.get("enum") or spec.schema.get("examples") or ()
        return Completion(tuple(str(v) for v in listed), resource.completers.get(name)), prefix
    raise ProtocolError(-32602, "ref.type must be \"ref/prompt\" or \"ref/resource\"")


def complete_result(candidates: Sequence[str], prefix: str) -> dict[str, Any]:
    matching = list(dict.fromkeys(c for c in candidates if c.startswith(prefix)))
    completion: dict[str, Any] = {"values": matching[:MAX_COMPLETIONS], "total": len(matching),
                                  "hasMore": len(matching) > MAX_COMPLETIONS}
    return {"completion": completion}


def completion_key(config: Config, command: Tool) -> CompletionKey:
    """What a command's output depends on: the command, and the tools file (a reload is a new key)."""
    return str(config.path), config.digest, command.name


class CompletionCache:
    """Recent `complete` outputs, shared by the cores of a server; bounded in entries and bytes.

    An entry answers from when it was stored until `COMPLETION_TTL_S` later (a clock that went
    back makes it stale, never fresher).
    """

    def __init__(self, ttl_s: float = COMPLETION_TTL_S, entries: int = COMPLETION_ENTRIES,
                 size: int = COMPLETION_BYTES) -> None:
        self.ttl_s, self.entries, self.size = ttl_s, entries, size
        self.kept: OrderedDict[CompletionKey, tuple[float, tuple[str, ...], int]] = OrderedDict()
        self.held = 0

    def get(self, key: CompletionKey, now: float) -> tuple[str, ...] | None:
        """The fresh output for `key`, or None (a stale one is dropped)."""
        entry = self.kept.get(key)
        if entry is None:
            return None
        stored, candidates, _ = entry
        if not stored <= now < stored + self.ttl_s:
            self._drop(key)
            return None
        self.kept.move_to_end(key)
        return candidates

    def put(self, key: CompletionKey, candidates: Sequence[str], now: float) -> None:
        """Keep an output, dropping the least recently used past the bounds (one too large is not kept)."""
        cost = sum(len(c) for c in candidates) + 64 * len(candidates) + 64
        if key in self.kept:
            self._drop(key)
        if cost > self.size:
            return
        while self.kept and (len(self.kept) >= self.entries or self.held + cost > self.size):
            self._drop(next(iter(self.kept)))
        self.kept[key] = (now, tuple(candidates), cost)
        self.held += cost

    def _drop(self, key: CompletionKey) -> None:
        self.held -= self.kept.pop(key)[2]
