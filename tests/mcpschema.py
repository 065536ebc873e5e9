"""Validate what mcpwrap writes against the official schema of the revision in force.

`check(rev, message, method)` validates the JSON-RPC envelope and, for a
result, the specific result type of the request `method`. In strict mode
(the default) an object with declared `properties` may carry no other keys
(`_meta` and free-form maps excepted), so a field a revision does not define
fails the test even though the official schemas leave objects open.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator, Draft202012Validator

HERE = Path(__file__).parent / "schemas"
REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
EXT_TASKS = "ext-tasks"

RESULTS = {
    "initialize": "InitializeResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "server/discover": "DiscoverResult",
    "subscriptions/listen": "SubscriptionsListenResult",
    "tasks/get": "GetTaskResult",
    "tasks/list": "ListTasksResult",
    "tasks/cancel": "CancelTaskResult",
    "tasks/update": "UpdateTaskResult",
    "task": "CreateTaskResult",
    "input_required": "InputRequiredResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
}
# Objects whose keys are free-form by design.
OPEN_KEYS = {"_meta", "properties", "experimental", "extensions", "structuredContent", "data",
             "inputRequests", "inputResponses", "arguments", "$defs", "definitions", "patternProperties",
             "inputSchema", "outputSchema", "requestedSchema"}


@functools.cache
def _root(rev: str) -> dict[str, Any]:
    return json.loads((HERE / rev / "schema.json").read_text())


def _close(schema: Any, key: str | None = None, unevaluated: bool = False) -> Any:
    """The schema with no room for keys it does not name. An object composed with `allOf` (e.g.
    NotificationParams & Task) is closed where it is composed, with `unevaluatedProperties` (2020-12
    only), since each part closed alone would refuse the other part's keys."""
    if isinstance(schema, dict):
        out = {k: _close(v, k, unevaluated) for k, v in schema.items()}
        if key in OPEN_KEYS:
            return out
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        elif "allOf" in out and unevaluated and "unevaluatedProperties" not in out:
            out["unevaluatedProperties"] = False
        return out
    if isinstance(schema, list):
        return [_close(v, None, unevaluated) for v in schema]
    return schema


def _composed(defs: dict[str, Any]) -> set[str]:
    """The definitions that are parts of an `allOf` somewhere: closed only where they are composed."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for part in node.get("allOf", []):
                if isinstance(part, dict) and isinstance(part.get("$ref"), str):
                    found.add(part["$ref"].rsplit("/", 1)[-1])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(defs)
    return found


@functools.cache
def _validator(rev: str, definition: str, strict: bool) -> Any:
    root = copy.deepcopy(_root(rev))
    defs_key = "$defs" if "$defs" in root else "definitions"
    if strict:
        # A _meta object is free-form by design (any prefixed key), also where it is a $ref'd definition.
        parts = _composed(root[defs_key]) if defs_key == "$defs" else set()
        root[defs_key] = {name: d if name.endswith("MetaObject") or name in parts else _close(d, None, bool(parts))
                          for name, d in root[defs_key].items()}
    schema = {**root, "$ref": f"#/{defs_key}/{definition}"}
    cls = Draft202012Validator if defs_key == "$defs" else Draft7Validator
    return cls(schema)


def has_definition(rev: str, definition: str) -> bool:
    root = _root(rev)
    return definition in root.get("$defs", root.get("definitions", {}))


def validate(rev: str, definition: str, instance: Any, strict: bool = True) -> None:
    errors = sorted(_validator(rev, definition, strict).iter_errors(instance), key=lambda e: e.path)
    if errors:
        details = "\n".join(f"  at {'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:5])
        raise AssertionError(f"{rev} {definition} rejects {json.dumps(instance)[:800]}\n{details}")


def check(rev: str, message: dict[str, Any], method: str | None = None, strict: bool = True) -> None:
    """Validate one message mcpwrap wrote; `method` names the request a response answers."""
    modern = rev == "2026-07-28"
    if "method" in message:
        kind = "ServerRequest" if "id" in message else "ServerNotification"
        envelope = "JSONRPCRequest" if "id" in message else "JSONRPCNotification"
        validate(rev, envelope, message, strict=False)
        if message["method"] in ("notifications/tasks/status", "notifications/tasks") and modern:
            validate(EXT_TASKS, "TaskStatusNotification", message, strict)
            return
        body = {k: v for k, v in message.items() if k in ("method", "params")}
        try:
            validate(rev, kind, message, strict)
        except AssertionError:
            validate(rev, kind, body, strict)       # older schemas define the body without the envelope
        return
    if "error" in message:
        envelope = "JSONRPCErrorResponse" if has_definition(rev, "JSONRPCErrorResponse") else "JSONRPCError"
        if "id" in message and message["id"] is None and envelope == "JSONRPCError":
            # No pre-2025-11-25 schema has a form for an error without a usable id; JSON-RPC 2.0 says null.
            assert message["error"]["code"] in (-32700, -32600), message
            validate(rev, "JSONRPCError", {**message, "id": 0}, strict)
            return
        validate(rev, envelope, message, strict)
        return
    envelope = "JSONRPCResultResponse" if has_definition(rev, "JSONRPCResultResponse") else "JSONRPCResponse"
    validate(rev, envelope, message, strict=False)
    result = message["result"]
    name = RESULTS.get(method or "")
    if modern:
        result_type = result.get("resultType")
        assert result_type in ("complete", "input_required", "task"), message
        if result_type != "complete":
            name = RESULTS[result_type]
    elif method == "tools/call" and "task" in result:
        name = "CreateTaskResult"
    if name is None:
        return
    target = EXT_TASKS if modern and (method or "").startswith("tasks/") or (modern and name == "CreateTaskResult") else rev
    if modern and result.get("resultType") == "task":
        target, name = EXT_TASKS, "CreateTaskResult"
    validate(target, name, result, strict)
