"""What one server core knows between messages, and the answers every handler gives from it.

`ServerState` holds a core's config (`served`; `config` is the part its identity may use, see
`access.py`), identity, the requests in flight, the questions asked, the open listens and
subscriptions, the batches waiting for their answers and the completion runs.
`Core` (`core.py`) is one: it adds receiving, the method -> handler table and the batch routing.
The handlers of calls (`calls.py`), content (`content.py`) and tasks (`task_requests.py`) are
plain functions over a `ServerState`, in modules loaded when a request first needs them.

Every request that awaits an answer is in `inflight` until it is answered or cancelled
(`settled`), so an id is "in use" exactly then. Every answer leaves through `_routed`: one to a
batched request is held, encoded and counted in the `BatchBudget`, until its batch's array is sent.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from mcpwrap.config.model import Config
from mcpwrap.protocol import access, jsonrpc, modern
from mcpwrap.protocol.actions import Action, Audit, Context, Send, Stderr
from mcpwrap.protocol.identity import LOCAL_USER, Identity, label
from mcpwrap.protocol.jsonrpc import RequestId
from mcpwrap.protocol.revisions import TASKS_EXTENSION, Revision
from mcpwrap.protocol.session import HOLDS, Held, LegacySession
from mcpwrap.protocol.tools import ProtocolError

if TYPE_CHECKING:
    from mcpwrap.protocol import rounds
    from mcpwrap.protocol.audit import Caller, Record
    from mcpwrap.protocol.prompts import CompletionCache, CompletionKey
    from mcpwrap.protocol.sealing import Keys

BATCH_ITEMS = 256                 # messages a batch may hold; a longer batch is refused whole and runs nothing
BATCH_BYTES = 4 * 1024 * 1024     # encoded answers one batch may hold while its other items are still running
HELD_BYTES = 16 * 1024 * 1024     # the same, for all the batches of a server process together


class BatchBudget:
    """The bytes of batch answers held for their siblings, counted across every `Core` that shares it.

    A server process makes one and hands it to each of its cores (one over stdio, one a session
    over HTTP), so `total` bounds them all together and `per_batch` each batch on its own.
    """

    def __init__(self, per_batch: int = BATCH_BYTES, total: int = HELD_BYTES) -> None:
        self.per_batch, self.total = per_batch, total
        self.held = 0

    def refusal(self, batch_held: int, size: int) -> str | None:
        """Why an answer of `size` bytes cannot join a batch holding `batch_held`; None: it is counted."""
        if batch_held + size > self.per_batch:
            return f"the batch's answers exceed {self.per_batch} bytes"
        if self.held + size > self.total:
            return f"the answers held for batches exceed {self.total} bytes across the server"
        self.held += size
        return None


@dataclass
class BatchState:
    """The requests of one batch still unanswered, and the answers held until they are.

    Each answer is held encoded (its result or error as an `orjson.Fragment`, written into the
    array as is), so what it holds is what it costs: `held` bytes, counted in the budget too.
    """
    waiting: set[RequestId] = field(default_factory=set)
    answers: list[dict[str, Any]] = field(default_factory=list)
    held: int = 0


@dataclass
class CompletionRun:
    """One running `complete` command and the requests (with their typed prefixes) it will answer."""
    run: int
    waiters: list[tuple[Context, str]]


class ServerState:
    """A core's state, and the ways its answers leave: replies, errors, batches, messages held for a session."""

    served: Config                    # the tools file as loaded (and chosen by --read-only/--only/--exclude)
    _view: Config

    def __init__(self, config: Config, keyring_source: Callable[[], Keys],
                 clock: Callable[[], float], page_size: int = 500,
                 budget: BatchBudget | None = None, completions: CompletionCache | None = None,
                 identity: Identity = LOCAL_USER, transport: str = "stdio", session: str | None = None) -> None:
        self.identity = identity          # of every request this core receives (a session's, a POST's, stdio's)
        self.config = config
        self.transport, self.session_tag = transport, session    # as the audit trail names them
        self.budget = budget or BatchBudget()
        self._completions = completions        # shared by a server's cores; made when first needed
        self.completing: dict[CompletionKey, CompletionRun] = {}
        self.run_ids = itertools.count(1)
        self.session = LegacySession()
        self.keyring_source = keyring_source
        self.clock = clock
        self.page_size = page_size
        self.inflight: dict[RequestId, Context] = {}
        self.listens: dict[RequestId, dict[str, Any]] = {}
        self.asks: dict[str, rounds.Pending] = {}
        self.questions: dict[str, tuple[Context, int, str]] = {}   # our elicitation id -> a running call's question
        self.relays: dict[str, tuple[Context, str, str]] = {}  # our elicitation id -> (tasks/result, task, question key)
        self.resolving: dict[RequestId, rounds.Pending] = {}   # calls whose paths the driver is resolving
        self.ask_ids = (f"mcpwrap-ask-{n}" for n in itertools.count(1))
        self.batches: dict[RequestId, BatchState] = {}
        self.subscribed: set[str] = set()          # legacy resources/subscribe
        self.advertised: dict[str, Any] = {}       # the legacy session's capabilities, for list_changed

    @property
    def config(self) -> Config:
        """The tools file as this core's caller may see it (`access.view`): all it serves, lists and runs."""
        return self._view

    @config.setter
    def config(self, config: Config) -> None:
        self.served, self._view = config, access.view(config, self.identity)

    def capabilities(self, rev: Revision) -> dict[str, Any]:
        """Only what the tools file has: resources when it defines some or keeps output, prompts..."""
        caps: dict[str, Any] = {"tools": {"listChanged": True}, "logging": {}}
        if self.config.resources or self.config.spool.quota:
            caps["resources"] = {"listChanged": True}
            if self.files():
                caps["resources"]["subscribe"] = True
        if self.config.prompts:
            caps["prompts"] = {"listChanged": True}
        if (self.config.prompts or any(r.uri_template for r in self.config.resources)) and rev.has(
                "capability.completions"):
            caps["completions"] = {}
        if rev.has("tasks.core"):   # tasks.list only where requestors are told apart (2025-11-25 tasks, security)
            caps["tasks"] = {**({"list": {}} if self.identity.identified else {}), "cancel": {},
                             "requests": {"tools": {"call": {}}}}
        if rev.modern:
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    def files(self) -> dict[str, Path]:
        """URI -> path of the file resources (the ones whose updates can be watched)."""
        return {r.uri: r.path for r in self.config.resources if r.path is not None and r.uri is not None}

    @property
    def completions(self) -> CompletionCache:
        if self._completions is None:
            from mcpwrap.protocol.prompts import CompletionCache

            self._completions = CompletionCache()
        return self._completions

    # --- answers ------------------------------------------------------------------------
    def reply(self, ctx: Context, result: dict[str, Any], result_type: str = "complete") -> Send:
        """A result for the request's era: modern results are stamped (resultType, serverInfo)."""
        if ctx.modern:
            result = modern.stamp(result, self.config, result_type)
        return Send(jsonrpc.response(ctx.id, result), (ctx.id,))

    def listed(self, ctx: Context, page: dict[str, Any]) -> Send:
        """A list's page, with the cache hints of the revisions that have them."""
        return self.reply(ctx, modern.cacheable(page) if ctx.rev.has("result.cache_hints") else page)

    def error_message(self, request_id: RequestId | None, error: ProtocolError, rev: Revision) -> dict[str, Any]:
        """The error response in `rev`'s terms: a code it does not define becomes -32603."""
        if error.code not in rev.error_codes:
            error = ProtocolError(-32603, error.message)
        message: dict[str, Any] = {"jsonrpc": "2.0"}
        if request_id is not None:
            message["id"] = request_id
        elif not rev.has("error.id_optional"):
            message["id"] = None          # JSON-RPC 2.0's form; these revisions define none of their own
        message["error"] = error.to_json()
        return message

    def error_reply(self, ctx: Context, error: ProtocolError) -> Send:
        return Send(self.error_message(ctx.id, error, ctx.rev), (ctx.id,))

    def refusal(self, request_id: RequestId, error: ProtocolError, rev: Revision) -> list[Action]:
        """A request refused with `error`: its answer, and the diagnostic (if any) for stderr."""
        actions: list[Action] = [Send(self.error_message(request_id, error, rev), (request_id,))]
        if error.diagnostic:
            actions.append(Stderr(f"mcpwrap: request {request_id!r} rejected: {error.diagnostic}", "warning"))
        return actions

    # --- the audit trail ------------------------------------------------------------------
    def caller(self, ctx: Context) -> Caller:
        """Who sent `ctx`, over what, as the audit trail records it."""
        from mcpwrap.protocol.audit import Caller

        return Caller(label(self.identity), self.transport, self.session_tag)

    def audited(self, ctx: Context, event: Callable[..., Record], *fields: Any) -> list[Action]:
        """`event(caller, request id, *fields)` as an `Audit` action, when there is an audit trail."""
        if self.config.audit is None:
            return []
        return [Audit(event(self.caller(ctx), ctx.id, *fields))]

    def settled(self, ctx: Context) -> bool:
        """The request leaves `inflight` now; False if the client cancelled it (no answer, ever)."""
        return self.inflight.pop(ctx.id, None) is not None

    # --- batches: their answers leave together -------------------------------------------
    def _routed(self, actions: list[Action]) -> list[Action]:
        """Responses to batched requests are held and sent together as one array."""
        out: list[Action] = []
        for action in actions:
            message = action.message if isinstance(action, Send) else None
            if isinstance(message, dict) and "method" not in message and message.get("id") in self.batches:
                state = self.batches.pop(message["id"])
                state.waiting.discard(message["id"])
                out += self._keep(state, message)
                if not state.waiting:
                    out += self._sent(state)
                continue
            out.append(action)
        return out

    def _keep(self, state: BatchState, message: dict[str, Any]) -> list[Action]:
        """Hold one answer of a batch, encoded once; past the budget, an error for its item instead.

        The request was carried out either way: only its answer is not kept.
        """
        key = "result" if "result" in message else "error"
        try:
            data = orjson.dumps(message[key])
        except TypeError as exc:           # orjson.JSONEncodeError: too deep, a bad key, a huge int
            error = ProtocolError(-32603, f"internal error: the answer could not be encoded ({exc})")
            state.answers.append(self.error_message(message.get("id"), error, self.session.rev))
            return [Stderr(f"mcpwrap: cannot encode an answer in a batch ({exc}); answering with an error", "error")]
        size = len(data) + len(orjson.dumps(message.get("id"))) + 32    # the envelope around it
        refusal = self.budget.refusal(state.held, size)
        if refusal is None:
            state.held += size
            state.answers.append({**message, key: orjson.Fragment(data)})
        else:
            state.answers.append(self.error_message(message.get("id"), ProtocolError(-32603, (
                f"{refusal}: this answer ({size} bytes) was dropped after its request was carried out; "
                "send the requests separately")), self.session.rev))
        return []

    def _sent(self, state: BatchState) -> list[Action]:
        """The batch's array, its held bytes given back to the budget."""
        self.budget.held -= state.held
        state.held = 0
        answered = tuple(m["id"] for m in state.answers if m.get("id") is not None)
        return [Send(state.answers, answered)] if state.answers else []

    def end(self) -> None:
        """This core's session is over: what its unfinished batches held is given back to the budget."""
        for state in {id(s): s for s in self.batches.values()}.values():
            self.budget.held -= state.held
            state.held = 0
        self.batches.clear()

    def _drop_from_batch(self, request_id: RequestId) -> list[Action]:
        """A batched request that will never be answered (cancelled): its batch stops waiting for it."""
        state = self.batches.pop(request_id, None)
        if state is None:
            return []
        state.waiting.discard(request_id)
        return self._sent(state) if not state.waiting else []

    # --- messages of ours to the client --------------------------------------------------
    def to_client(self, ctx: Context, key: Held, message: dict[str, Any]) -> list[Action]:
        """A request or notification of ours about `ctx`, held while the legacy session is not yet
        initialized (`session.HOLDS`); the held ones whose request or question ended are dropped, so
        what waits is bounded by the requests in flight."""
        if ctx.modern or self.session.state not in HOLDS:
            return [Send(message)]
        self.session.held = {k: m for k, m in self.session.held.items() if self.live(k)}
        self.session.held[key] = message
        return []

    def live(self, key: Held) -> bool:
        kind, ident = key
        return ident in (self.asks.keys() | self.questions.keys() | self.relays.keys() if kind == "ask" else self.inflight)

    def drop_relays(self, request_id: RequestId, reason: str, keep: frozenset[str] = frozenset()) -> list[Action]:
        """The task questions relayed on the tasks/result `request_id` (but those in `keep`) are over: withdrawn."""
        over = [k for k, (ctx, _, key) in self.relays.items() if ctx.id == request_id and key not in keep]
        withdrawn: list[Action] = []
        for ask_id in over:
            del self.relays[ask_id]
            withdrawn += self.withdraw(ask_id, reason)
        return withdrawn

    def withdraw(self, key: str, reason: str) -> list[Action]:
        """Tell the client our question `key` is over, unless it never left (held until initialized)."""
        if self.session.held.pop(("ask", key), None) is not None:
            return []
        return [Send(jsonrpc.notification("notifications/cancelled", {"requestId": key, "reason": reason}))]


def declares_extension(ctx: Context, extension: str) -> bool:
    """This modern request declared `extension` (capabilities are per request)."""
    extensions = ctx.capabilities.get("extensions")
    return isinstance(extensions, dict) and extension in extensions


def needs_extension(extension: str, why: str) -> ProtocolError:
    """-32021: the request must declare `extension` in its client capabilities."""
    return ProtocolError(-32021, f"{why}; declare the {extension} extension in clientCapabilities",
                         {"requiredCapabilities": {"extensions": {extension: {}}}})
