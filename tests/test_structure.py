"""The package's shape (issue 22): no import cycle anywhere, counting imports inside functions (a cycle hidden behind
a function-level import is still a cycle), and no module over 800 lines, in the package and the watcher."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "layers" / "core" / "python" / "karpenter_lambda"
WATCHER = REPO / "watcher" / "karpenter_lambda_watcher"
MAX_LINES = 800


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _absolute(importer: str, is_package: bool, level: int, module: str | None) -> str | None:
    if not level:
        return module
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            skip.update(id(m) for m in ast.walk(n))
    return skip


_GRAPHS: dict = {}   # (root, every module's path and mtime) -> graph: each test module asked for the whole package


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the package modules it imports, anywhere in its body (TYPE_CHECKING blocks aside).  Parsed once per
    process while no file changes (a copy each call)."""
    mods = _modules(root)
    key = (str(root), tuple(sorted((n, p.stat().st_mtime_ns) for n, p in mods.items())))
    if key not in _GRAPHS:
        _GRAPHS[key] = _import_graph(mods)
    return {k: set(v) for k, v in _GRAPHS[key].items()}


def _import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        for n in ast.walk(tree):
            if id(n) in skip:
                continue
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                mod = _absolute(name, path.name == "__init__.py", n.level, n.module)
                if mod is None:
                    continue
                # ``from pkg import sub`` imports the module pkg.sub; ``from pkg import name`` reads pkg itself
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in n.names]
            else:
                continue
            graph[name].update(t for t in targets if t in mods and t != name)
        graph.setdefault(name, set())
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_hidden_cycle(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    (pkg / "d.py").write_text("from . import c\n")   # a sibling module, not the package: no edge to p
    assert cycles(import_graph(pkg)) == [["p.a", "p.b"]]


@pytest.mark.parametrize("root", [PACKAGE, WATCHER], ids=["karpenter_lambda", "watcher"])
def test_no_import_cycle(root):
    found = cycles(import_graph(root))
    assert not found, "import cycles (imports inside functions count): " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("root", [PACKAGE, WATCHER], ids=["karpenter_lambda", "watcher"])
def test_no_module_over_800_lines(root):
    big = {str(p.relative_to(REPO)): n for p in sorted(root.rglob("*.py"))
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by job): {big}"
