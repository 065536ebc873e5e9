"""Who may use what: the tools file's `allow` lists applied to a caller's `Identity`. Pure: no I/O.

A tool, resource (or template) or prompt without `allow` (and no `[server] allow` default) is
anyone's. With one, a caller may use it when any entry matches:

- `*`: any authenticated caller (a token-file line or a validated OAuth token);
- `token:NAME`: the token file's `NAME: token` line;
- `user:SUBJECT`: an OAuth access token whose `sub` is SUBJECT;
- `scope:SCOPE`: an OAuth access token granted SCOPE;
- `group:GROUP`: an OAuth access token whose `groups` claim lists GROUP.

The local user (stdio, the CLI: `identity.LOCAL_USER`) owns the process and the tools file, so
`allow` does not apply to it. A caller nobody authenticated (HTTP without a token file or OAuth)
matches no entry. `view` is the whole decision: each core serves the view of its caller, so every
list shows only what the caller may use and anything else is unknown to it, exactly as a name
the file does not have (`--read-only/--only/--exclude` chose the config it filters).
"""

from __future__ import annotations

from dataclasses import replace

from mcpwrap.config.model import Config
from mcpwrap.protocol.identity import Identity

KINDS = ("token", "user", "scope", "group")


def permits(allow: tuple[str, ...] | None, who: Identity) -> bool:
    """Whether `who` may use something whose `allow` list is `allow` (None: anyone)."""
    if allow is None or who.local:
        return True
    return any(_matches(entry, who) for entry in allow)


def _matches(entry: str, who: Identity) -> bool:
    authenticated = who.name is not None or who.subject is not None or who.principal.startswith("bearer:")
    if entry == "*":
        return authenticated
    kind, _, value = entry.partition(":")
    if kind == "token":
        return who.name == value
    if kind == "user":
        return who.subject == value
    if kind == "scope":
        return value in who.scopes
    return kind == "group" and value in who.groups


def view(config: Config, who: Identity) -> Config:
    """The config as `who` may see it: what it may not use is left out (the same config when nothing is)."""
    if who.local or not config.restricted:
        return config
    return replace(config,
                   tools=tuple(t for t in config.tools if permits(t.allow, who)),
                   resources=tuple(r for r in config.resources if permits(r.allow, who)),
                   prompts=tuple(p for p in config.prompts if permits(p.allow, who)))

