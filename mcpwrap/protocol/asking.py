"""What a call still needs before it runs, whoever asks: elicited arguments, then the confirmation.

Each question is an elicitation form built from the arguments' own schemas, restricted to the
primitive subset the revision allows, titles kept in the revision's own form: a titled
single-select (`oneOf` of const+title) goes as `oneOf` where the revision has it and as
enum+`enumNames` where it has only that; a legacy `enumNames` stays; a multi-select
(`items.enum`, or titled `items.anyOf`) is asked only where the revision has multi-select.
`protocol.rounds` asks a client (elicitation or `input_required`); `mcpwrap call` asks a terminal.

What is given is checked before anything is asked (`next_question`): the schema
(`arguments`), then, for a call with path arguments, their resolution, which is
I/O and so not done here: the decision stops at `Resolve` until the caller hands
back the outcome of `run.arguments.resolve_paths` on the arguments it names. Then
whether an argv can be built from the arguments as placed (defaults filled in,
paths resolved), then what is missing, then the confirmation. `Ready` carries the
arguments as placed: what runs is what was checked.

A task of the tasks extension asks from its supervisor, while parked in input_required: each
missing argument as a question of its own (`one_by_one`), so any replica can answer any subset,
then the confirmation (which quotes the values). `taken` is what an answer to one of them gives:
only the field asked, checked against the argument's schema, no string with a control character.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import orjson

from mcpwrap.config.model import PLACEHOLDER, Arg, Tool, string_consts
from mcpwrap.protocol.answers import CONTROL
from mcpwrap.protocol.arguments import argument_problems, value_problems
from mcpwrap.protocol.argv import ArgumentError, build_argv, build_env, with_defaults

if TYPE_CHECKING:
    from mcpwrap.protocol.revisions import Revision

STRING_FORMATS = {"email", "uri", "date", "date-time"}
Resolution: TypeAlias = tuple[dict[str, Any], list[str]]   # `run.arguments.resolve_paths`: resolved, refusals


@dataclass(frozen=True)
class Question:
    key: str                              # "arguments" | "confirm": the inputRequests key
    purpose: str
    message: str
    fields: tuple[Arg, ...] = ()

    def request(self, rev: Revision) -> dict[str, Any]:
        properties = {a.name: form_field(a, rev) for a in self.fields}
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        required = [a.name for a in self.fields if a.required]
        if required:
            schema["required"] = required
        return {"method": "elicitation/create", "params": {"message": self.message, "requestedSchema": schema}}

    def fits(self, rev: Revision) -> bool:
        """Whether the revision's forms can ask it (a list of choices needs multi-select)."""
        return rev.has("elicitation.multiselect") or all(a.schema.get("type") != "array" for a in self.fields)


@dataclass(frozen=True)
class Resolve:
    """The call's path arguments are to be resolved (`run.arguments.resolve_paths` on `arguments`,
    its defaults filled in) before the decision goes on with the outcome."""
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Ready:
    """Nothing is missing: the call runs with these arguments, as placed (defaults filled in, paths resolved)."""
    arguments: dict[str, Any]


def form_field(arg: Arg, rev: Revision) -> dict[str, Any]:
    """One argument schema as an elicitation PrimitiveSchemaDefinition."""
    schema = arg.schema
    kind = str(schema.get("type"))
    out: dict[str, Any] = {k: schema[k] for k in ("title", "description") if k in schema}
    if kind == "array":
        items = schema["items"]
        out.update(type="array", items={"anyOf": _titled(items["anyOf"])} if string_consts(items.get("anyOf"))
                   else {"type": "string", "enum": list(items["enum"])})
        out.update({k: schema[k] for k in ("minItems", "maxItems") if k in schema})
    elif kind == "string" and string_consts(schema.get("oneOf")):
        choices = _titled(schema["oneOf"])
        if rev.has("elicitation.titled_enum"):
            out.update(type="string", oneOf=choices)
        else:
            out.update(type="string", enum=[c["const"] for c in choices], enumNames=[c["title"] for c in choices])
    else:
        out["type"] = kind
        keep = {"string": ("enum", "minLength", "maxLength"), "number": ("minimum", "maximum"),
                "integer": ("minimum", "maximum"), "boolean": ()}[kind]
        out.update({k: schema[k] for k in keep if k in schema})
        if kind == "string" and schema.get("format") in STRING_FORMATS:
            out["format"] = schema["format"]
        if "enum" in out and "enumNames" in schema and rev.has("elicitation.enum_names"):
            out["enumNames"] = list(schema["enumNames"])
    if "default" in schema and (rev.has("elicitation.defaults") or kind == "boolean"):
        out["default"] = schema["default"]
    return out


def _titled(variants: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The choices as the form wants them: each with a title (its value when the schema gave none)."""
    return [{"const": v["const"], "title": str(v.get("title", v["const"]))} for v in variants]


def render_confirm(template: str, arguments: Mapping[str, Any]) -> str:
    def value(match: Any) -> str:
        found = arguments.get(match[1], "")
        return found if isinstance(found, str) else orjson.dumps(found).decode()
    return PLACEHOLDER.sub(value, template)


def next_question(tool: Tool, arguments: Mapping[str, Any], confirmed: bool,
                  resolution: Resolution | None = None) -> Question | Resolve | Ready | list[str]:
    """What a call with these arguments still needs, whoever asks (a client, or `mcpwrap call` on a
    terminal): why it is refused (a non-empty list), its paths resolved (`Resolve`, until `resolution`
    is given), the next question, or nothing (`Ready`). What was given is checked before anything is asked."""
    missing = tuple(a for a in tool.args if a.elicit and a.name not in arguments)
    problems = argument_problems(tool, arguments, ignore_missing={a.name for a in missing})
    if problems:
        return problems
    placed = with_defaults(tool, arguments)
    if any(spec.path is not None and spec.name in placed for spec in tool.args):
        if resolution is None:
            return Resolve(placed)
        placed, problems = resolution
        if problems:
            return problems
    try:
        build_argv(tool, placed)
        if tool.shell is not None:
            build_env(tool, placed, {})       # a shell tool's values travel here: same checks, same moment
    except ArgumentError as exc:
        return [str(exc)]
    if missing:
        names = ", ".join(a.name for a in missing)
        return Question("arguments", f"the arguments {names}",
                        f"'{tool.name}' needs: {names}", missing)
    if tool.confirm and not confirmed:
        return Question("confirm", "confirmation", render_confirm(tool.confirm, with_defaults(tool, arguments)))
    return Ready(placed)


def one_by_one(tool: Tool, question: Question) -> tuple[Question, ...]:
    """`question` as a task asks it: each argument a question of its own, keyed by its name (a form of
    that one field); the confirmation as it is."""
    if question.key != "arguments":
        return (question,)
    return tuple(Question(a.name, f"the argument {a.name}", f"'{tool.name}' needs: {a.name}", (a,))
                 for a in question.fields)


def taken(question: Question, response: Mapping[str, Any]) -> tuple[bool, Any]:
    """An ElicitResult to one of a task's questions (`one_by_one`): (True, the value; True for the
    confirmation), or (False, why it cannot be used). Only the field asked is taken (the content may
    carry more); left empty, the argument's default; the value must fit the argument's schema, and a
    string holding a newline or any other control character is refused, as a command's answer is."""
    action = response.get("action")
    if action in ("decline", "cancel"):
        return False, f"the user {'declined' if action == 'decline' else 'cancelled'} {question.purpose}"
    content = response.get("content") or {}
    if action != "accept" or not isinstance(content, Mapping):
        return False, f"the answer to {question.purpose} was malformed"
    if not question.fields:
        return True, True
    arg = question.fields[0]
    if arg.name not in content:
        if "default" in arg.schema:
            return True, arg.schema["default"]
        return False, f"the user accepted without providing {arg.name}"
    value = content[arg.name]
    problems = value_problems(arg.schema, value)
    if isinstance(value, str) and CONTROL.search(value):
        problems.append(f"{arg.name} holds a control character (a newline or an escape)")
    return (False, f"the answer for {arg.name} was refused: " + "; ".join(problems)) if problems else (True, value)


def can_ask(capabilities: Mapping[str, Any]) -> bool:
    """Form elicitation declared (an empty `elicitation` object means form mode in every revision)."""
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, dict) and (not elicitation or "form" in elicitation)
