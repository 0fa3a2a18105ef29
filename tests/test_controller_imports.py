"""No import cycle among controllers/ (counting imports inside functions too): the launcher, the cloud provider and
the provisioner depend one way."""

import ast
from pathlib import Path

CONTROLLERS = Path(__file__).resolve().parent.parent / "layers/core/python/karpenter_lambda/controllers"


def _graph() -> dict[str, set[str]]:
    mods = {p.stem for p in CONTROLLERS.glob("*.py")}
    graph = {}
    for m in mods:
        deps = set()
        for node in ast.walk(ast.parse((CONTROLLERS / f"{m}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
                deps.update(n for n in names if n in mods)
        graph[m] = deps
    return graph


def test_no_import_cycle_among_controllers():
    graph = _graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(path[path.index(d):] + [d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_the_graph_sees_imports():
    g = _graph()
    assert "launcher" in g["provision"] and "cloudprovider" in g["lifecycle"]
