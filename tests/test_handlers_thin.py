"""Handlers stay thin: at most 60 code lines each (no blank lines, comments or docstrings)."""

import ast
from pathlib import Path

import pytest

FUNCTIONS = Path(__file__).resolve().parent.parent / "functions"
HANDLERS = sorted(FUNCTIONS.glob("*/handler.py"))


def code_lines(path: Path) -> int:
    text = path.read_text()
    tree = ast.parse(text)
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
                    and isinstance(first.value.value, str):
                doc_lines.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for i, line in enumerate(text.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in doc_lines)


def test_there_are_handlers():
    assert {p.parent.name for p in HANDLERS} >= {"provisioner", "lifecycle"}


@pytest.mark.parametrize("path", HANDLERS, ids=lambda p: p.parent.name)
def test_handler_is_thin(path):
    assert code_lines(path) <= 60, f"{path}: {code_lines(path)} code lines (> 60): move logic to controllers/"


def test_counter_counts_code_only(tmp_path):
    f = tmp_path / "h.py"
    f.write_text('"""doc\nmore"""\n\n# comment\nimport os\n\n\ndef h():\n    """d"""\n    return 1\n')
    assert code_lines(f) == 3
