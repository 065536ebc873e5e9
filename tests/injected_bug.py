"""`python -m tests.injected_bug serve ...`: mcpwrap's own CLI with one real bug planted in it.

For tests/blackbox/stdio/test_safety_nets.py, which must see a driver's safety net catch a bug in the server it
ships. `INJECTED_BUG` says where, and the bug fires once (what follows is served as usual):
`receive:<method>` makes `Core.receive` raise on the first message that is, or is a batch that
holds, a request of that method (what only a driver's net can catch); `perform:<Action>` makes the
driver's performer (`Driver._perform`) raise on the first action of that type.
"""

from __future__ import annotations

import os
from typing import Any

from mcpwrap.cli import main as cli
from mcpwrap.protocol import jsonrpc
from mcpwrap.serve import driver as server
from mcpwrap.protocol.core import Core

BUG = "INJECTED_BUG"


class InjectedBug(RuntimeError):
    """The planted bug: an exception no code of mcpwrap expects."""


def plant(spec: str) -> None:
    where, _, what = spec.partition(":")
    fired: list[bool] = []

    def fire(hit: bool) -> None:
        if hit and not fired:
            fired.append(True)
            raise InjectedBug(f"planted in {where} for {what}")

    if where == "receive":
        receive = Core.receive

        def bugged_receive(self: Core, message: jsonrpc.Message) -> Any:
            items = message.items if isinstance(message, jsonrpc.Batch) else (message,)
            fire(any(isinstance(m, jsonrpc.Request) and m.method == what for m in items))
            return receive(self, message)
        Core.receive = bugged_receive     # type: ignore[method-assign]
    elif where == "perform":
        perform = server.Driver._perform

        def bugged_perform(self: server.Driver, actions: list[Any]) -> None:
            fire(any(type(a).__name__ == what for a in actions))
            perform(self, actions)
        server.Driver._perform = bugged_perform   # type: ignore[method-assign]
    else:
        raise SystemExit(f"{BUG}: unknown place {where!r}")


if __name__ == "__main__":
    plant(os.environ[BUG])
    cli.entry()
