"""config/model: the frozen values a tools file becomes (a toolset's choice of tools; tools and arguments
equal to what their dataclasses make)."""

from __future__ import annotations

from pathlib import Path

from mcpwrap.config import load as config


def test_toolsets_select_by_name_and_read_only_hint(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[tools.a]\ncommand = ["true"]\nannotations = { readOnlyHint = true }\n'
                                     '[tools.b]\ncommand = ["true"]\n[tools.c]\ncommand = ["true"]\n')
    loaded = config.load(tmp_path / "t.toml")

    def names(toolset: config.Toolset) -> list[str]:
        return [t.name for t in toolset.apply(loaded).tools]

    assert names(config.Toolset(read_only=True)) == ["a"]
    assert names(config.Toolset(only=frozenset({"b", "c"}))) == ["b", "c"]
    assert names(config.Toolset(exclude=frozenset({"a"}), read_only=False)) == ["b", "c"]
    assert config.Toolset(only=frozenset({"b", "zz"})).unknown(loaded) == ["zz"]



def test_loaded_tools_and_arguments_are_what_their_dataclasses_make(tmp_path: Path) -> None:
    """The loader sets their fields without the generated __init__: every field, nothing else,
    so a tool equals the one its __init__ makes of the same values."""
    from dataclasses import fields

    tools = config.load(Path(__file__).parents[2] / "fixtures" / "conformance.toml").tools
    tools += config.load(Path(__file__).parents[2] / "fixtures" / "census.toml").tools
    assert any(t.args for t in tools)
    for made in [*tools, *(a for t in tools for a in t.args)]:
        names = [f.name for f in fields(made)]
        assert set(names) <= set(vars(made)) <= set(names) | {"input_schema", "call_schema"}   # and cached schemas
        again = type(made)(**{name: getattr(made, name) for name in names})
        assert again == made and repr(again) == repr(made)

