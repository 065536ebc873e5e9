"""`protocol/access.py`: who may use what, a function of the identity and the tools file (issue 26,
item 2); the same rules over a real server are in tests/blackbox/http/test_allow.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpwrap.config import load as config_module
from mcpwrap.config.model import Toolset
from mcpwrap.protocol import access, identity
from tests.blackbox.http.test_allow import tools_file

# --- the decision ---------------------------------------------------------------------------
def test_each_entry_kind_matches_its_part_of_the_identity(tmp_path: Path) -> None:
    ops = identity.oauth("https://as", "alice", frozenset({"deploy"}), frozenset({"ops"}))
    cases: list[tuple[str, identity.Identity, bool]] = [
        ("token:ci", identity.bearer(b"x" * 16, "ci"), True),
        ("token:ci", identity.bearer(b"x" * 16, "dev"), False),
        ("token:ci", identity.bearer(b"x" * 16), False),
        ("user:alice", ops, True), ("user:bob", ops, False),
        ("scope:deploy", ops, True), ("scope:admin", ops, False),
        ("group:ops", ops, True), ("group:dev", ops, False),
        ("*", identity.bearer(b"x" * 16), True), ("*", ops, True), ("*", identity.ANONYMOUS, False),
        ("token:ci", identity.LOCAL_USER, True),            # the local user owns the process
    ]
    for entry, who, expected in cases:
        assert access.permits((entry,), who) is expected, (entry, who)
    assert access.permits(None, identity.ANONYMOUS) and not access.permits((), identity.bearer(b"x" * 16, "ci"))
    assert not access.permits(("scope:ci",), identity.bearer(b"x" * 16, "ci"))   # kinds never cross


def test_view_leaves_out_what_the_caller_may_not_use_and_composes_with_the_toolset(tmp_path: Path) -> None:
    config = config_module.load(tools_file(tmp_path))
    ci, dev = identity.bearer(b"c" * 16, "ci"), identity.bearer(b"d" * 16, "dev")
    seen = access.view(config, ci)
    assert [t.name for t in seen.tools] == ["open", "deploy", "authed"]
    assert [r.name for r in seen.resources] == ["notes", "log"] and [p.name for p in seen.prompts] == ["release", "hello"]
    seen = access.view(config, dev)
    assert [t.name for t in seen.tools] == ["open", "authed"] and seen.tool("deploy") is None
    assert seen.resources == () and [p.name for p in seen.prompts] == ["hello"]
    assert [t.name for t in access.view(config, identity.ANONYMOUS).tools] == ["open"]
    assert access.view(config, identity.LOCAL_USER) is config
    read_only = Toolset(read_only=True).apply(config)
    assert [t.name for t in access.view(read_only, ci).tools] == ["open"]
    plain = config_module.load(Path(__file__).parents[2] / "fixtures" / "http.toml")
    assert access.view(plain, dev) is plain                          # no allow anywhere: nothing to filter


def test_server_default_applies_where_an_item_names_none(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[server]\nallow = ["token:ci"]\n[tools.a]\ncommand = ["true"]\n'
                    '[tools.b]\ncommand = ["true"]\nallow = ["*"]\n')
    config = config_module.load(path)
    assert config.tool("a").allow == ("token:ci",) and config.tool("b").allow == ("*",)  # type: ignore[union-attr]
    assert [t.name for t in access.view(config, identity.bearer(b"d" * 16, "dev")).tools] == ["b"]


@pytest.mark.parametrize("entry", ["tokens:ci", "scope:", "deploy", "*ops", "group:a b", 3])
def test_a_malformed_entry_is_located(tmp_path: Path, entry: Any) -> None:
    path = tmp_path / "t.toml"
    value = f'"{entry}"' if isinstance(entry, str) else str(entry)
    path.write_text(f'[tools.a]\ncommand = ["true"]\nallow = [{value}]\n')
    with pytest.raises(config_module.ConfigError) as caught:
        config_module.load(path)
    assert "t.toml:3:" in str(caught.value) and "allow lists" in str(caught.value)
