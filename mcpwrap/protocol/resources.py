"""Resources decisions: listing, URI -> what to read, and reads rendered per revision. No I/O.

A URI names one of: a page of a call's output kept in the spool
(`mcpwrap://output/<call>/<stream>{?offset,length}`), a `[resources.NAME]` with a
fixed URI, or an instance of a resource's `uri_template` whose variables become
that resource command's arguments, validated like a tool's (`arguments`) before
anything runs. Anything else is the revision's resource-not-found error with
`data.uri`: a URI is matched exactly, as the resource's identity (resources.mdx: "uniquely identified
by a URI"), so no dot segment or other spelling of a file's path ever reaches a path (no traversal);
a spelling whose dot segments removed give a listed URI is refused naming that URI. Lists keep the tools file's order; cursors are bound to the file's
digest. An output page is text when its bytes are UTF-8 (its end moved back to a
character boundary when that makes it so), else a base64 blob, so pages joined
give the stream byte for byte.
"""

from __future__ import annotations

import base64
import posixpath
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcpwrap.config.model import TEMPLATE_EXPR, Config, Resource
from mcpwrap.protocol import grammar
from mcpwrap.protocol.arguments import argument_problems
from mcpwrap.protocol.pages import URI_PREFIX, Page, output_uri, valid
from mcpwrap.protocol.revisions import Revision
from mcpwrap.protocol.tools import ProtocolError, invalid_params
from mcpwrap.result import Resource as Contents

PAGE_BYTES = 1024 * 1024               # an output page's default and largest length
OUTPUT_TEMPLATE = URI_PREFIX + "{call}/{stream}{?offset,length}"
OUTPUT_URI = re.compile(r"mcpwrap://output/([^/?#]+)/([^/?#]+)(?:\?([^#]*))?")   # fullmatch: no stray newline
PAGE_META = "mcpwrap/page"             # result _meta: where this page sits and the next page's URI


@dataclass(frozen=True)
class OutputPage:
    call: str
    stream: str
    offset: int
    length: int


@dataclass(frozen=True)
class Source:
    """A [resources.NAME] to read, with its template's arguments."""
    resource: Resource
    arguments: dict[str, Any]
    uri: str


Target = OutputPage | Source


def not_found(uri: str, rev: Revision, listed: str | None = None) -> ProtocolError:
    """The revision's resource-not-found error; `listed`: the URI the client meant, which it names."""
    message = f"Resource not found: URIs match exactly; read {listed}" if listed else "Resource not found"
    return ProtocolError(rev.resource_not_found, message, {"uri": uri})


# --- listing ------------------------------------------------------------------------------------
def render_resource(resource: Resource, rev: Revision) -> dict[str, Any]:
    out: dict[str, Any] = ({"uri": resource.uri} if resource.uri else {"uriTemplate": resource.uri_template})
    out["name"] = resource.name
    if resource.title and rev.has("resource.title"):
        out["title"] = resource.title
    if resource.description:
        out["description"] = resource.description
    if resource.mime_type:
        out["mimeType"] = resource.mime_type
    return out


def _output_template(rev: Revision) -> dict[str, Any]:
    out = {"uriTemplate": OUTPUT_TEMPLATE, "name": "output",
           "description": "The whole stdout or stderr of a call whose output passed max_output, as its result "
                          f"linked it; read in pages of up to {PAGE_BYTES} bytes from byte `offset`."}
    if rev.has("resource.title"):
        out["title"] = "Output beyond the cap"
    return out


def page(kind: str, items: list[dict[str, Any]], key: str, cursor: Any, config: Config,
          size: int) -> dict[str, Any]:
    offset = 0 if cursor is None else _decode_cursor(kind, cursor, config, len(items))
    result: dict[str, Any] = {key: items[offset:offset + size]}
    if offset + size < len(items):
        result["nextCursor"] = grammar.encode_cursor(kind, offset + size, config.digest[:16])
    return result


def _decode_cursor(kind: str, cursor: Any, config: Config, count: int) -> int:
    fields = grammar.cursor_fields(cursor, 3)
    position = grammar.decimal(fields[1]) if fields else None
    if fields is None or position is None:
        raise invalid_params("Invalid cursor")
    if fields[0] != kind or fields[2] != config.digest[:16] or not 0 < position < count:
        raise invalid_params("Invalid cursor: it does not belong to the current list; list again from the start")
    return position


def list_resources(config: Config, rev: Revision, cursor: Any, size: int) -> dict[str, Any]:
    items = [render_resource(r, rev) for r in config.resources if r.uri]
    return page("resources", items, "resources", cursor, config, size)


def list_templates(config: Config, rev: Revision, cursor: Any, size: int) -> dict[str, Any]:
    items = ([_output_template(rev)] if config.spool.quota else []) + [
        render_resource(r, rev) for r in config.resources if r.uri_template]
    return page("templates", items, "resourceTemplates", cursor, config, size)


# --- resolving a URI ----------------------------------------------------------------------------
def resolve(config: Config, uri: Any, rev: Revision) -> Target:
    """What `resources/read` of `uri` reads; -32602 for a bad URI or arguments, not-found otherwise."""
    if not isinstance(uri, str):
        raise invalid_params("resources/read needs a string 'uri'")
    if uri.startswith(URI_PREFIX):
        return _output_page(uri, config, rev)
    for resource in config.resources:
        if resource.uri == uri:
            return Source(resource, {}, uri)
    for resource in config.resources:
        if resource.uri_template and (arguments := match_template(resource, uri)) is not None:
            problems = argument_problems(resource.tool, arguments) if resource.tool else []
            if problems:
                raise ProtocolError(-32602, f"invalid arguments for resource '{resource.name}': "
                                    + "; ".join(problems), {"uri": uri})
            return Source(resource, arguments, uri)
    raise not_found(uri, rev, _listed_spelling(config, uri))


def _listed_spelling(config: Config, uri: str) -> str | None:
    """The listed URI that `uri` spells with dot segments (`/./`, `/../`), if there is one."""
    try:
        parts = urllib.parse.urlsplit(uri)
    except ValueError:                    # e.g. an unclosed "[" host: no listed URI is spelled that way
        return None
    if not re.search(r"(?:^|/)\.\.?(?:/|$)", parts.path):
        return None
    spelled = urllib.parse.urlunsplit(parts._replace(path=posixpath.normpath(parts.path)))
    return next((r.uri for r in config.resources if r.uri is not None and r.uri == spelled), None)


def _output_page(uri: str, config: Config, rev: Revision) -> OutputPage:
    match = OUTPUT_URI.fullmatch(uri)
    if not match or not config.spool.quota or not valid(match[1], match[2]):
        raise not_found(uri, rev)
    query = urllib.parse.parse_qs(match[3] or "", keep_blank_values=True)
    numbers = {}
    for name, default in (("offset", 0), ("length", PAGE_BYTES)):
        values = query.pop(name, [str(default)])
        number = grammar.decimal(values[0]) if len(values) == 1 else None
        if number is None:
            raise ProtocolError(-32602, f"'{name}' must be one non-negative integer of at most "
                                f"{grammar.MAX_DIGITS} ASCII digits", {"uri": uri})
        numbers[name] = number
    if query:
        raise ProtocolError(-32602, f"unknown parameter(s) {', '.join(sorted(query))}: "
                            "the output template has offset and length", {"uri": uri})
    return OutputPage(match[1], match[2], numbers["offset"], max(1, min(numbers["length"], PAGE_BYTES)))


def _template_regex(template: str) -> tuple[re.Pattern[str], list[str]]:
    """{name} matches one path segment; a trailing {?a,b} matches an optional query string."""
    parts, names, end, query = list[str](), list[str](), 0, list[str]()
    for match in TEMPLATE_EXPR.finditer(template):
        parts.append(re.escape(template[end:match.start()]))
        if match[1]:
            query = match[2].split(",")
        else:
            names.append(match[2])
            parts.append(f"(?P<{match[2]}>[^/?#]+)")
        end = match.end()
    parts.append(re.escape(template[end:]) + (r"(?:\?(?P<__query>[^#]*))?" if query else ""))
    return re.compile("^" + "".join(parts) + "$"), query


def match_template(resource: Resource, uri: str) -> dict[str, Any] | None:
    """The arguments `uri` gives the resource's template (typed per its schema), or None if it does not match."""
    assert resource.uri_template is not None and resource.tool is not None
    pattern, query_names = _template_regex(resource.uri_template)
    match = pattern.match(uri)
    if not match:
        return None
    raw = {k: urllib.parse.unquote(v) for k, v in match.groupdict().items() if k != "__query" and v is not None}
    for name, values in urllib.parse.parse_qs(match["__query"] or "" if query_names else "").items():
        if name in query_names:
            raw[name] = values[-1]
    specs = {a.name: a.schema for a in resource.tool.args}
    return {name: _typed(value, specs.get(name, {})) for name, value in raw.items()}


def _typed(text: str, schema: Mapping[str, Any]) -> Any:
    """A URI carries strings: a number, integer or boolean argument gets its value's own type back when
    the text is one in JSON's own (ASCII) grammar; anything else stays a string, for validation to name."""
    kind = schema.get("type")
    value: Any = None
    if kind == "integer":
        value = grammar.integer(text)
    elif kind == "number":
        value = grammar.number(text)
    elif kind == "boolean" and text in ("true", "false"):
        value = text == "true"
    return text if value is None else value


def expand(template: str, arguments: Mapping[str, str]) -> str:
    """A URI with `{name}` filled in (percent-encoded): a prompt's embedded resource."""
    return TEMPLATE_EXPR.sub(lambda m: urllib.parse.quote(str(arguments.get(m[2], "")), safe=""), template)


# --- rendering reads ----------------------------------------------------------------------------
def contents_json(contents: Contents) -> dict[str, Any]:
    out: dict[str, Any] = {"uri": contents.uri}
    if contents.mime_type:
        out["mimeType"] = contents.mime_type
    out.update({"text": contents.text} if contents.text is not None else {"blob": contents.blob})
    return out


def page_result(target: OutputPage, page: Page | None, uri: str, rev: Revision) -> dict[str, Any]:
    """One page of a kept stream; -32602 (not found) when it is gone or the offset is past its end."""
    if page is None:
        raise not_found(uri, rev)
    if page.offset > page.total:
        raise ProtocolError(-32602, f"offset {page.offset} is past the end ({page.total} bytes)", {"uri": uri})
    data = page.data
    text = _utf8_prefix(data)
    if text is not None:
        data = data[:len(text.encode())]
        contents = Contents(uri, "text/plain", text=text)
    else:
        contents = Contents(uri, "application/octet-stream", blob=base64.b64encode(data).decode())
    end = page.offset + len(data)
    where: dict[str, Any] = {"offset": page.offset, "length": len(data), "total": page.total}
    if end < page.total:
        where["next"] = f"{output_uri(target.call, target.stream)}?offset={end}&length={target.length}"
    return {"contents": [contents_json(contents)], "_meta": {PAGE_META: where}}


def _utf8_prefix(data: bytes) -> str | None:
    """The text of `data`, or of `data` less a character cut at its end; None for binary data."""
    if not data:
        return ""
    for cut in range(0, min(4, len(data))):
        try:
            text = data[:len(data) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return text if text or not data else None
    return None
