"""The package's import graph has no cycle, counting every import a module can run.

Each module is parsed with `ast`; every `import` and `from ... import` in it counts, wherever it is:
at the top, inside a function, under `if TYPE_CHECKING:`, in relative form (`from . import x`); so
does the `__init__` of each package an imported module is in. A cycle hidden behind a function-local
or type-checking import is still one: each of its modules can only be read, changed or moved with
the others.

Each package is a layer, and imports point down: a module imports its own package and lower ranks
only (`RANK`: result, config, protocol | state, run, tasks, serve, cli). `protocol` and `state` share a
rank and may not import each other; `protocol` imports nothing but `config.model`, `result` and
itself (the package root, holding `__version__`, is everyone's).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "mcpwrap"

# Each entry: the modules of one strongly connected component of the graph.
# The layers, lowest first: a module may import modules of its own package and of a lower rank.
# `mcpwrap` is the package root (its version), `__main__` the entry point above the CLI.
RANK = {"mcpwrap": 0, "result": 0, "config": 1, "protocol": 2, "state": 2, "run": 3, "tasks": 4, "serve": 5,
        "cli": 6, "__main__": 7}
# All that `protocol/` may import besides itself (names below the root; "" the root): decisions take
# values in and give values out.
PROTOCOL_MAY_IMPORT = {"", "config", "config.model", "result"}


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (a package is its `__init__`)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that module `name` (at `path`) imports anywhere in its body."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")[:len(name.split(".")) - node.level + is_package]
                base = ".".join(parts + ([base] if base else []))
            # `from pkg import x` imports the submodule pkg.x when there is one, else names of pkg
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    # importing a.b.c runs a.b's __init__ first (the importer's own packages are already running)
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    found |= {".".join(m.split(".")[:i]) for m in found for i in range(1, m.count(".") + 1)} - ancestors
    return found & known - {name}


def graph(package: Path) -> dict[str, set[str]]:
    found = modules(package)
    return {name: imported(name, path, set(found)) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def layer(name: str) -> str:
    """The layer a module of the package belongs to: its top-level package or module below `mcpwrap`."""
    return name.split(".")[1] if "." in name else name


def upward(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The edges that break the layering, leaving out a package's `__init__` that a deeper target implies."""
    found = set()
    for source, targets in edges.items():
        for target in targets - {t.rsplit(".", 1)[0] for t in targets}:
            here, there = layer(source), layer(target)
            if here == there:
                continue
            if (RANK[there] > RANK[here] or {here, there} == {"protocol", "state"}
                    or (here == "protocol" and target.partition(".")[2] not in PROTOCOL_MAY_IMPORT)):
                found.add((source, target))
    return found


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(graph(PACKAGE))
    assert not found, f"import cycle(s): {[sorted(c) for c in found]}"


@pytest.mark.parametrize(("files", "expected"), [
    ({"a.py": "from p import b\n", "b.py": "def f():\n    from p.a import x\n"}, {"p.a", "p.b"}),
    ({"a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import p.b\n",
      "b.py": "from . import a\n"}, {"p.a", "p.b"}),
    ({"a.py": "from .sub import c\n", "sub/__init__.py": "from .. import a\n", "sub/c.py": ""}, {"p.a", "p.sub"}),
    ({"a.py": "from .sub.c import x\n", "sub/__init__.py": "", "sub/c.py": "from ..a import y\n"}, {"p.a", "p.sub.c"}),
    ({"a.py": "import p.b\n", "b.py": "import json\n"}, set()),
])
def test_the_graph_sees_function_level_type_checking_and_relative_imports(tmp_path: Path, files: dict[str, str],
                                                                         expected: set[str]) -> None:
    for name, text in {"__init__.py": "", **files}.items():
        (tmp_path / "p" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "p" / name).write_text(text)
    found = cycles(graph(tmp_path / "p"))
    assert found == ({frozenset(expected)} if expected else set())


def test_every_import_points_down_the_layers() -> None:
    edges = graph(PACKAGE)
    assert {layer(name) for name in edges} <= RANK.keys(), "a new package: give it a rank"
    found = upward(edges)
    assert not found, f"upward import(s): {sorted(found)}"


@pytest.mark.parametrize(("files", "expected"), [
    ({"protocol/a.py": "from p.config.model import X\nfrom p.result import Y\nfrom p import __version__\n",
      "config/model.py": "", "result.py": ""}, set()),
    ({"protocol/a.py": "def f():\n    from p.run import spool\n", "run/spool.py": ""}, {("p.protocol.a", "p.run.spool")}),
    ({"protocol/a.py": "from p.config import load\n", "config/load.py": ""}, {("p.protocol.a", "p.config.load")}),
    ({"state/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.protocol import b\n",
      "protocol/b.py": ""}, {("p.state.a", "p.protocol.b")}),
    ({"run/a.py": "import p.serve.b\n", "serve/b.py": "from p.run import a\n"}, {("p.run.a", "p.serve.b")}),
])
def test_the_layering_sees_upward_edges_wherever_they_hide(tmp_path: Path, files: dict[str, str],
                                                          expected: set[tuple[str, str]]) -> None:
    for name, text in {"__init__.py": "", **files}.items():
        for parent in (tmp_path / "p" / name).parents:
            if parent == tmp_path:
                break
            parent.mkdir(parents=True, exist_ok=True)
            (parent / "__init__.py").touch()
        (tmp_path / "p" / name).write_text(text)
    assert upward(graph(tmp_path / "p")) == expected
