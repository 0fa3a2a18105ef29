"""The package's shape, as issue 22 measures it: JSON on stdout.

    python bench/structure.py

Keys (a contract: added, never renamed): ``modules`` (count), ``largest`` (the five largest modules, lines),
``over_800`` (modules over 800 lines), ``import_cycles`` (tests/test_structure.py's finder: imports inside functions
count), ``function_level_imports`` (import statements not at module level, TYPE_CHECKING/try/if blocks at module level
aside) with the files holding most of them, for the package and the watcher.
"""
from __future__ import annotations

import ast
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_structure import PACKAGE, WATCHER, cycles, import_graph  # noqa: E402


def function_level_imports(root: Path) -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for f in sorted(root.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        top = {id(n) for n in tree.body}
        for n in tree.body:
            if isinstance(n, (ast.If, ast.Try)):
                top.update(id(m) for m in ast.walk(n))
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in top:
                out[str(f.relative_to(root))] += 1
    return out


def shape(root: Path) -> dict:
    lines = {str(p.relative_to(root)): len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(root.rglob("*.py"))}
    inner = function_level_imports(root)
    return {"modules": len(lines),
            "largest": dict(sorted(lines.items(), key=lambda kv: -kv[1])[:5]),
            "over_800": {k: v for k, v in lines.items() if v > 800},
            "import_cycles": cycles(import_graph(root)),
            "function_level_imports": sum(inner.values()),
            "function_level_imports_by_file": dict(inner.most_common(8))}


if __name__ == "__main__":
    print(json.dumps({"karpenter_lambda": shape(PACKAGE), "watcher": shape(WATCHER)}, indent=2))
