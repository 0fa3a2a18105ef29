"""Issue 30's done-when: every NodePool, EC2NodeClass and NodeOverlay field the validation schema accepts is either
applied (pointing at the code that reads it) or refused with "not supported by karpenter-lambda"; every field of
Karpenter's current CRDs is one of the two (never an "unknown field"); docs/api.md's table is the rendered one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import karpenter_lambda
from karpenter_lambda.api.field_status import APPLIED, DOC_BEGIN, DOC_END, FIELDS, KINDS, REFUSED, render_markdown
from karpenter_lambda.api.schema import NOT_SUPPORTED, List, Map, Obj, Refused
from karpenter_lambda.api.validation import SCHEMAS, validate_and_default

from .upstream_fields import UPSTREAM

PACKAGE = Path(karpenter_lambda.__file__).parent
DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def schema_paths(node, path: str = "spec") -> dict[str, object]:
    """Every field path under ``node`` -> its schema node (lists' items as ``[]``; maps and refused fields are leaves)."""
    out: dict[str, object] = {}
    if isinstance(node, List):
        return schema_paths(node.item, path + "[]")
    if isinstance(node, Obj):
        for name, child in node.fields.items():
            p = f"{path}.{name}"
            out[p] = child
            if not isinstance(child, (Refused, Map)):
                out.update(schema_paths(child, p))
        if node.passthrough:   # more fields read by another program (the kubelet's): one entry for them all
            out[f"{path}.*"] = node
    return out


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_schema_field_has_exactly_one_entry(kind):
    paths = schema_paths(SCHEMAS[kind].fields["spec"])
    entries = [f.path for f in FIELDS[kind]]
    assert len(entries) == len(set(entries)), "a field listed twice"
    assert sorted(set(paths) - set(entries)) == [], "accepted by the schema, neither applied nor refused in api/field_status.py"
    assert sorted(set(entries) - set(paths)) == [], "in api/field_status.py but not accepted by the schema"


@pytest.mark.parametrize("kind", list(KINDS))
def test_refused_entries_are_refused_nodes_and_applied_are_not(kind):
    paths = schema_paths(SCHEMAS[kind].fields["spec"])
    for f in FIELDS[kind]:
        node = paths[f.path]
        assert isinstance(node, Refused) == (f.status == REFUSED), f.path
        if f.status == REFUSED:
            assert node.message == f"{NOT_SUPPORTED} ({f.note})"


def _module(where: str) -> Path:
    return PACKAGE / where.split(":", 1)[0]


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@pytest.mark.parametrize("kind", list(KINDS))
def test_applied_entries_point_at_code_that_names_the_field(kind):
    problems = []
    for f in FIELDS[kind]:
        if f.status != APPLIED:
            continue
        module, _, name = f.where.partition(":")
        path = _module(f.where)
        if not path.exists():
            problems.append(f"{f.path}: {module} does not exist")
            continue
        text = path.read_text(encoding="utf-8")
        if not (name and re.search(rf"^\s*(def|class) {re.escape(name)}\b", text, re.M)):
            problems.append(f"{f.path}: no def/class {name} in {module}")
        # the field's name as written (camelCase) or as the snake_case accessor reading it; a field passed on
        # inside its parent (``whole``): the parent's name
        parts = f.path.replace("[]", "").split(".")
        field = parts[-2] if f.whole else parts[-1]
        if field not in text and _snake(field) not in text:
            problems.append(f"{f.path}: {module} never names {field!r}")
    assert problems == []


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_upstream_crd_field_is_applied_or_refused(kind):
    """A field of Karpenter's CRD is in the table, or under a refused field or a map (e.g. kubelet, free-form upstream)."""
    entries = {f.path: f for f in FIELDS[kind]}
    missing = []
    for path in UPSTREAM[kind]:
        if path in entries:
            continue
        parents = [p for p in entries if path.startswith(p + ".") or path.startswith(p + "[]")]
        if not any(entries[p].status == REFUSED for p in parents):
            missing.append(path)
    assert missing == []


REFUSED_SAMPLES = {
    "spec.networkInterfaces": [{"deviceIndex": 0, "networkCardIndex": 0, "interfaceType": "interface"}],
    "spec.cpuOptions": {"nestedVirtualization": "enabled"},
    "spec.connectionTracking": {"udpTimeout": 30},
    "spec.enclaveOptions": {"enabled": True},
}


def test_refused_fields_are_refused_by_validation_with_the_message():
    doc = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "x"},
           "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                    "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}
    refused = [f.path for f in FIELDS["EC2NodeClass"] if f.status == REFUSED]
    assert sorted(refused) == sorted(REFUSED_SAMPLES)
    for path, value in REFUSED_SAMPLES.items():
        d = yaml.safe_load(yaml.safe_dump(doc))
        d["spec"][path.split(".", 1)[1]] = value
        _, errors = validate_and_default("EC2NodeClass", d)
        assert [(e.path, e.message.split(" (")[0]) for e in errors] == [(path, NOT_SUPPORTED)]


def test_other_kubelet_configuration_fields_pass_through_on_al2023_and_typos_are_called_typos():
    """Karpenter v1.15: spec.kubelet takes any KubeletConfiguration field (tests/api/test_kubelet_config.py)."""
    doc = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "x"},
           "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                    "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
                    "kubelet": {"shutdownGracePeriod": "30s", "maxPod": 3}}}
    errors = {e.path: e.message for e in validate_and_default("EC2NodeClass", doc)[1]}
    assert "spec.kubelet.shutdownGracePeriod" not in errors
    assert errors["spec.kubelet.maxPod"] == 'unknown field (did you mean "maxPods"?)'


def test_docs_api_md_carries_the_rendered_table():
    text = DOCS.read_text(encoding="utf-8")
    assert DOC_BEGIN in text and DOC_END in text, f"docs/api.md lacks the {DOC_BEGIN} ... {DOC_END} block"
    block = text.split(DOC_BEGIN, 1)[1].split(DOC_END, 1)[0]
    assert block.strip() == render_markdown().strip(), (
        "docs/api.md's field table differs from api/field_status.py: regenerate it with "
        "`.venv/bin/python -c 'import pathlib; from karpenter_lambda.api.field_status import with_table; "
        "p = pathlib.Path(\"docs/api.md\"); p.write_text(with_table(p.read_text()))'`")
