"""No import cycle among controllers/ (counting imports inside functions too): the launcher, the cloud provider and
the provisioner depend one way."""

import ast
from pathlib import Path

from test_structure import cycles

CONTROLLERS = Path(__file__).resolve().parent.parent / "layers/core/python/karpenter_lambda/controllers"
# the cloud provider's package (karpenter_lambda/cloudprovider/) is one node of the graph, named "cloudprovider"
CLOUDPROVIDER = CONTROLLERS.parent / "cloudprovider"


def _deps(path: Path, mods: set[str], in_controllers: bool) -> set[str]:
    deps = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        parts = (node.module or "").split(".") if node.module else []
        if node.level == 1 and in_controllers:
            names = [parts[0]] if parts else [a.name for a in node.names]
        elif node.level == 2 and parts[:1] == ["cloudprovider"]:
            names = ["cloudprovider"]
        elif node.level == 2 and parts[:1] == ["controllers"]:
            names = [parts[1]] if len(parts) > 1 else [a.name for a in node.names]
        else:
            continue
        deps.update(n for n in names if n in mods)
    return deps


def _graph() -> dict[str, set[str]]:
    mods = {p.stem for p in CONTROLLERS.glob("*.py")} | {"cloudprovider"}
    graph = {}
    for m in mods:
        path = CONTROLLERS / f"{m}.py"
        graph[m] = (_deps(path, mods, True) if path.exists() else set()) - {m}   # the old module re-exports the package
    for path in CLOUDPROVIDER.glob("*.py"):
        graph["cloudprovider"] |= _deps(path, mods, False) - {"cloudprovider"}
    return graph


def test_no_import_cycle_among_controllers():
    full = _graph()   # parsed once (it was parsed again for every module: 4 s of the suite)
    graph = {m: set(deps) & set(full) for m, deps in full.items()}
    assert cycles(graph) == []   # the one cycle finder: tests/test_structure.py


def test_the_graph_sees_imports():
    g = _graph()
    assert "launcher" in g["provision"] and "cloudprovider" in g["lifecycle"]
