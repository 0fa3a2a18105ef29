"""The pure core (api, scheduling, catalog, disruption, offpeak) never imports I/O layers or clients."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "layers" / "core" / "python" / "karpenter_lambda"
PURE = ["api", "scheduling", "catalog", "disruption", "offpeak"]
FORBIDDEN_PKGS = {"boto3", "botocore", "kubernetes", "pynamodb", "moto", "aws_lambda_powertools", "requests", "urllib3"}
FORBIDDEN_INTERNAL = {"adapters", "controllers", "sim", "cli"}


def _imports(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    rel_parts = path.relative_to(PKG).parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel_parts)[: len(rel_parts) - (node.level - 1)]
                mod = ".".join(["karpenter_lambda", *base] + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield node.lineno, mod


def _pure_files():
    for sub in PURE:
        yield from sorted((PKG / sub).rglob("*.py"))


@pytest.mark.parametrize("path", list(_pure_files()), ids=lambda p: str(p.relative_to(PKG)))
def test_pure_layers_import_no_io(path):
    bad = []
    for lineno, mod in _imports(path):
        top = mod.split(".")[0]
        if top in FORBIDDEN_PKGS:
            bad.append(f"line {lineno}: {mod}")
        parts = mod.split(".")
        if top == "karpenter_lambda" and len(parts) > 1 and parts[1] in FORBIDDEN_INTERNAL:
            bad.append(f"line {lineno}: {mod}")
    assert not bad, f"{path.relative_to(PKG)} imports I/O layers: {bad}"


def test_pure_layers_exist():
    for sub in PURE:
        assert (PKG / sub / "__init__.py").exists()
